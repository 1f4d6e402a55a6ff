-- zklock under OpenResty: real nginx (nginx-light + libnginx-mod-http-lua)
-- serving examples/nginx, against a real ZooKeeper, driven over HTTP by
-- curl.  Runs once, under LuaJIT (nginx's own runtime is LuaJIT either way).
local H = require "spec.helpers"
local N = require "spec.nginx"
local zklock = H.zklock

local LOCK = "/zklock-example/stock-lock"

-- A service written as a new user would: plain `require "zklock"`, no
-- zklock.ngx, and a handler whose locked function yields (ngx.sleep).
local PLAIN_CONF = assert(H.read("spec/conf/nginx_plain.conf"))

-- Test-only locations, added to the example's server block.  Each takes
-- the worker's shared lock object (examples/nginx/stock.lua).
local EXTRA = assert(H.read("spec/conf/nginx_extra.conf"))

-- http-level: a session opened in the master (with the raw C client: both
-- connects refuse the master), used later by a worker
local HTTP_INIT = [[
init_by_lua_block {
    MASTER_ZK = assert(require("zklock.core").connect(os.getenv("ZK_HOSTS"),
      10000))
    local _, err = pcall(require("zklock.ngx").connect, os.getenv("ZK_HOSTS"))
    NGX_CONNECT_ERR = err
    _, err = pcall(require("zklock").connect, os.getenv("ZK_HOSTS"))
    CONNECT_ERR = err
}
]]

-- nginx runs LuaJIT: the spec runs once, in the LuaJIT pass
if not jit then return end

-- A describe's server (testing.server(opts)) and session (connect_opts),
-- handed to got(srv, zk); at the end every nginx stops, and no lock node
-- may be left.
local function with_server(opts, connect_opts, got)
  local srv, zk
  lazy_setup(function()
    srv = H.testing.server(opts)
    zk = H.connect(srv, connect_opts)
    got(srv, zk)
  end)
  lazy_teardown(function()
    N.stop_all()
    if zk then zk:close() end
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)
end

describe("zklock under OpenResty (real nginx)", function()
  local srv, zk
  with_server(nil, { session_timeout = 10 }, function(s, z)
    srv, zk = s, z
  end)
  after_each(function() N.stop_all() end)

  local function queued()
    return #(assert(zk:mutex(LOCK):participants(5)))
  end

  local function start(opts)
    opts.hosts = srv.connect_string
    return N.start(opts)
  end

  local function urls(insts, path, n)
    local list = {}
    for i = 1, n do list[i] = insts[i % #insts + 1]:url(path) end
    return list
  end

  it("200 concurrent buys over two instances x 2 workers sell exactly 30; " ..
     "the unlocked endpoint oversells under the same load", function()
    local a, b = start { workers = 2 }, start { workers = 2 }
    assert.equal(200, (a:get("/reset?n=30")))
    local st, n = N.parallel(urls({ a, b }, "/buy", 200))
    assert.equal(200, n)
    assert.equal(30, st[200])
    assert.equal(170, st[409])
    local _, left = a:get("/stock")
    assert.equal("0", left)
    assert.equal(0, queued())

    -- the proof that the test can fail: no lock, same load
    assert.equal(200, (b:get("/reset?n=30")))
    st, n = N.parallel(urls({ a, b }, "/buy_unlocked", 200))
    assert.equal(200, n)
    _, left = a:get("/stock")
    local sold = st[200] or 0
    assert.is_true(sold > 30 or tonumber(left) ~= 30 - sold,
      ("unlocked: %d sold, %s left: no oversell seen"):format(sold, left))
  end)

  it("plain require \"zklock\" never blocks a worker: 200 concurrent buys " ..
     "over two instances x 2 workers sell exactly 30, /ping answers meanwhile",
     function()
    local conf = H.tmpname("plain") .. ".conf"
    H.write(conf, PLAIN_CONF)
    local a = start { workers = 2, conf = conf }
    local b = start { workers = 2, conf = conf }
    os.remove(conf)
    assert.equal(200, (a:get("/reset?n=30")))
    local buyers = N.parallel_bg(urls({ a, b }, "/buy", 200), 60)
    local worst = 0
    for _ = 1, 10 do
      local code, _, t = a:get("/ping", 10)
      assert.equal(200, code)
      if t > worst then worst = t end
    end
    local st = buyers()
    assert.equal(30, st[200])
    assert.equal(170, st[409])
    local _, left = a:get("/stock")
    assert.equal("0", left)
    -- (a blocking waiter took 10 s per /ping here, and sold 2 of 30)
    assert.is_true(worst < 1, ("/ping took %.3f s"):format(worst))
  end)

  it("/metrics adds up both workers' figures, and the reference " ..
     "Prometheus parser reads them", function()
    -- /take: one acquire and release of the service's lock, answering
    -- with the worker's pid; asked until both workers have answered
    local a = start { workers = 2, extra = [[
      location = /take { content_by_lua_block {
        local lock = require("stock").lock()
        assert(lock:acquire(30))
        assert(lock:release())
        ngx.say(ngx.worker.pid())
      } }
    ]] }
    local pids, n, distinct = {}, 0, 0
    while distinct < 2 do
      assert(n < 400, "one worker answered all of " .. n .. " requests")
      local code, body = a:get("/take")
      assert.equal(200, code)
      n = n + 1
      if not pids[body] then pids[body], distinct = true, distinct + 1 end
    end
    -- the workers publish every second: wait (bounded) for the sum
    local samples
    H.wait_until(function()
      local code, body = a:get("/metrics")
      assert.equal(200, code)
      samples = H.parse_prometheus(body)
      local s = samples["zklock_acquires_total{kind=mutex}"]
      return s and s.value >= n
    end, 30, n .. " acquires in /metrics")
    assert.equal(n, samples["zklock_acquires_total{kind=mutex}"].value)
    assert.equal(n, samples["zklock_releases_total{kind=mutex}"].value)
    assert.equal(0, samples["zklock_losses_total{kind=mutex}"].value)
    assert.equal(n, samples["zklock_hold_seconds_count{kind=mutex}"].value)
    local p50 = samples["zklock_wait_seconds{kind=mutex,quantile=0.5}"]
    local p99 = samples["zklock_wait_seconds{kind=mutex,quantile=0.99}"]
    assert.equal("summary", p99.type)
    assert.is_true(p50.value > 0 and p50.value <= p99.value)
  end)

  it("the C client's log and failing callbacks go to nginx's error log",
     function()
    -- /badlog: a session to a port nobody listens on (the C client logs
    -- its failed connects at ERROR), and a lock whose on_lost callback
    -- fails once its node is deleted behind its back.  The request stays
    -- until the callback has run: a hold of a request that ended is given
    -- back by the worker's sweep, which would leave nothing to lose.
    local port = H.tcore.free_port()
    local a = start { workers = 1, extra = ([[
      location = /badlog { content_by_lua_block {
        local zklock = require "zklock"
        zklock.set_log_level("error")
        local bad = assert(zklock.connect("127.0.0.1:%d", { connect_timeout = 0 }))
        local lock = require("stock").client():mutex("/spec/badlog")
        local ran = false
        lock:on_lost(function() ran = true; error("on_lost broke") end)
        assert(lock:acquire(10))
        ngx.say(lock:node())
        ngx.flush(true)
        local deadline = ngx.now() + 30
        while not ran and ngx.now() < deadline do ngx.sleep(0.05) end
        ngx.say(ran and "ran" or "not run")
        package.loaded.badlog = { bad = bad } -- (kept)
      } }
    ]]):format(port) }
    local p = H.spawn_cmd("curl", "-sN", "-m", "40", a:url("/badlog"))
    local node
    H.wait_until(function()
      node = p:output():match("^(/%S+)\n")
      return node or p:status()
    end, 30, "the lock's node from /badlog")
    assert(node, "/badlog answered: " .. p:output())
    local del = assert(zk:_delete(node))
    assert.equal("done", H.await(zk, del, H.now() + 10))
    assert.equal(0, p:wait(40))
    assert.truthy(p:output():find("\nran\n"), p:output())
    p:cleanup()
    local c_log, cb_log
    local ok = pcall(H.wait_until, function()
      local log = a:log()
      c_log = c_log or log:find("%[error%].-zklock: .-ZOO_ERROR@")
      cb_log = cb_log or
        log:find("%[error%].-zklock: on_lost callback failed: .-on_lost broke")
      return c_log and cb_log
    end, 30)
    assert(ok, ("in error.log within 30 s: the C client's error %s, the " ..
      "failed callback %s"):format(c_log and "yes" or "NO",
      cb_log and "yes" or "NO"))
  end)

  it("a worker answers /ping promptly while 200 of its requests queue on " ..
     "one lock", function()
    local a = start { workers = 1, extra = EXTRA }
    assert.equal(200, (a:get("/reset?n=30")))
    local release = zk:barrier("/spec/release")
    assert(release:set())
    local holder = N.parallel_bg({ a:url("/hold") })
    H.wait_until(function() return queued() == 1 end, 15, "the hold")
    local buyers = N.parallel_bg(urls({ a }, "/buy", 200))
    -- (queued in the worker's lock cohort: no node of their own)
    H.wait_until(function()
      local _, n = a:get("/local_waiters")
      return tonumber(n) == 200 and queued() == 1
    end, 30, "200 requests queued on the lock")
    local worst = 0
    for _ = 1, 10 do
      local code, _, t = a:get("/ping")
      assert.equal(200, code)
      if t > worst then worst = t end
    end
    assert.is_true(worst < 0.2, ("/ping took %.3f s"):format(worst))
    assert(release:remove())
    local st = buyers()
    assert.equal(30, st[200])
    assert.equal(170, st[409])
    assert.equal(1, holder()[200])
    assert.equal(0, queued())
  end)

  for _, case in ipairs {
    { "/hold_error", 500, "errors" },
    { "/hold_forget", 200, "returns without releasing" },
    { "/hold_exit", 202, "calls ngx.exit" },
  } do
    it("a handler that " .. case[3] .. " while holding does not leave the " ..
       "lock held", function()
      local a = start { workers = 1, extra = EXTRA }
      local code = a:get(case[1])
      assert.equal(case[2], code)
      local m = zk:mutex(LOCK)
      assert.equal(m, m:acquire(10))
      m:release()
      assert.equal(0, queued())
    end)
  end

  it("a semaphore mutex of the worker, forgotten while held by a " ..
     "request, is given back, and so is a mutex beside it: the sweep " ..
     "goes on (issue 22, item 15)", function()
    local a = start { workers = 1, extra = EXTRA }
    assert.equal(200, (a:get("/smutex_forget")))
    assert.equal(200, (a:get("/hold_forget")))
    local sm = zk:semaphore_mutex("/spec/smutex")
    assert.equal(sm, sm:acquire(10))
    assert(sm:release())
    local m = zk:mutex(LOCK)
    assert.equal(m, m:acquire(10))
    m:release()
    assert.is_nil(a:log():find("attempt to index", 1, true), a:log())
  end)

  it("a later request on the same Lua thread is another owner: it does " ..
     "not inherit a hold its predecessor forgot", function()
    -- (nginx reuses a finished request's Lua thread for the next one)
    local a = start { workers = 1, extra = EXTRA }
    local code, first = a:get("/hold_forget")
    assert.equal(200, code)
    assert.matches("/zklock%-example/stock%-lock/_c_", first)
    local second
    code, second = a:get("/take_node")
    assert.equal(200, code)
    assert.matches("/zklock%-example/stock%-lock/_c_", second)
    -- a node of its own, or the node passed on to it in the worker's lock
    -- cohort once the forgotten hold was given back: not a re-entry
    assert.not_equal(first, second)
    assert.equal(0, queued())
  end)

  for _, mode in ipairs { "on", "off" } do
    it("a request that replaces its ngx.ctx while it holds a lock still " ..
       "holds it: the sweep leaves the hold be, and another request " ..
       "cannot acquire (cohort " .. mode .. "; issue 32, defect 7)",
       function()
      local a = start { workers = 1, extra = EXTRA }
      local release = zk:barrier("/spec/release-newctx")
      assert(release:set())
      -- /hold_newctx acquires, sets ngx.ctx = {}, says whether it holds,
      -- and holds on until the barrier goes
      local holder = H.spawn_cmd("curl", "-sN", "-m", "40",
        a:url("/hold_newctx?cohort=" .. mode))
      local first
      H.wait_until(function()
        first = holder:output():match("^(held %a+)\n")
        return first or holder:status()
      end, 30, "the hold of /hold_newctx")
      assert.equal("held true", first, holder:output())
      -- The sweep runs every sweep_interval (0.1 s) and looks at every
      -- watched hold in one pass: once it has given back a hold that a
      -- request forgot, begun and ended after the replacement, it has
      -- looked at the replacing request's hold since (before the fix it
      -- took that request for ended and released its hold too)
      assert.equal(200, (a:get("/forget_probe")))
      local probe = zk:mutex("/spec/newctx-probe")
      H.wait_until(function()
        return #assert(probe:participants(5)) == 0
      end, 15, "the sweep to give back the forgotten hold")
      -- another request of the worker: the lock is held, it must time out
      -- (before the fix: "acquired", two requests holding at once)
      local code, body = a:get("/try_newctx?t=2&cohort=" .. mode)
      assert.equal(200, code)
      assert.equal("timeout", body)
      assert(release:remove())
      assert.equal(0, holder:wait(40))
      assert.equal("held true\nthen held true, released true\n",
        holder:output())
      holder:cleanup()
      local m = zk:mutex("/spec/newctx-" .. mode)
      assert.equal(0, #assert(m:participants(5)))
    end)
  end

  it("exactly one worker across two instances runs the periodic job; " ..
     "another takes over when it is killed", function()
    local a, b = start { workers = 2 }, start { workers = 2 }
    local HEART = "/zklock-example/leader-heartbeat"
    local function writer()
      local data = zk:get(HEART)
      return data and tonumber(data:match("^(%d+)"))
    end
    -- the heartbeat's writers over `secs`: one pid, if one leads
    local function writers(secs)
      local seen, n, t = {}, 0, H.now() + secs
      while H.now() < t do
        local p = writer()
        if p and not seen[p] then seen[p] = true; n = n + 1 end
        H.nap(0.05)
      end
      return seen, n
    end
    H.wait_until(function() return writer() ~= nil end, 30, "a heartbeat")
    local seen, n = writers(2)
    assert.equal(1, n, "heartbeats from several workers")
    local leader = next(seen)
    local workers = {}
    for _, w in ipairs(a:workers()) do workers[w] = a end
    for _, w in ipairs(b:workers()) do workers[w] = b end
    assert.is_truthy(workers[leader], "the leader is none of the workers")
    -- the job runs in a timer of its own: the leader's instance answers
    local code = workers[leader]:get("/ping")
    assert.equal(200, code)
    os.execute("kill -9 " .. leader)
    H.wait_until(function()
      local p = writer()
      return p ~= nil and p ~= leader
    end, 40, "another worker to take over")
    seen, n = writers(2)
    assert.equal(1, n, "heartbeats from several workers after the take-over")
    assert.is_nil(seen[leader])
  end)

  it("max_hold ends a hold while its request idles: a waiter gets the " ..
     "lock on time", function()
    local a = start { workers = 1, extra = EXTRA }
    local holder = N.parallel_bg({ a:url("/hold_max") }, 30)
    H.wait_until(function() return queued() == 1 end, 15, "the hold")
    local t0 = H.now()
    local m = zk:mutex(LOCK)
    assert(m:acquire(10))
    local waited = H.now() - t0
    m:release()
    -- within max_hold (1 s) and some slack, long before the request woke
    assert.is_true(waited < 4, ("the waiter waited %.2f s"):format(waited))
    assert.equal(1, holder()[200])
    assert.equal(0, queued())
  end)

  it("extend: an extended hold outlives its first limit and ends at its " ..
     "new one while its request idles, by the same C timer", function()
    local a = start { workers = 1, extra = EXTRA }
    local holder = N.parallel_bg({ a:url("/hold_extend") }, 30)
    H.wait_until(function() return queued() == 1 end, 15, "the hold")
    local t0 = H.now()
    local m = zk:mutex(LOCK)
    assert(m:acquire(20))
    local waited = H.now() - t0
    m:release()
    -- not at its first limit (1 s), at its new one (3 s from the
    -- extend), long before the request woke (8 s)
    assert.is_true(waited > 2 and waited < 6.5,
      ("the waiter waited %.2f s"):format(waited))
    assert.equal(1, holder()[200]) -- (held at 2 s, no nginx timer added)
    assert.equal(0, queued())
  end)

  it("a waiting request whose client went away leaves no node behind",
    function()
    local a = start { workers = 1, extra = EXTRA }
    local m = zk:mutex(LOCK)
    assert(m:acquire(5))
    local waiter = N.parallel_bg({ a:url("/wait") }, 2) -- curl leaves at 2 s
    H.wait_until(function() return queued() == 2 end, 10, "the request queued")
    local st = waiter()
    assert.equal(1, st[0]) -- no answer: the client went away
    H.wait_until(function() return queued() == 1 end, 10,
      "the abandoned waiter's node to go")
    m:release()
  end)

  it("a wait with a timeout over 24.8 days neither spins nor blocks the " ..
     "worker, and is served when the lock frees", function()
    local a = start { workers = 1, extra = EXTRA }
    local m = zk:mutex(LOCK)
    assert(m:acquire(5))
    local waiter = N.parallel_bg({ a:url("/wait_long") }, 30)
    H.wait_until(function() return queued() == 2 end, 10, "the request queued")
    -- a worker spinning on a negative semaphore wait never answers /ping
    local worst = 0
    for _ = 1, 5 do
      local code, _, t = a:get("/ping", 5)
      assert.equal(200, code)
      if t > worst then worst = t end
    end
    assert.is_true(worst < 0.5, ("/ping took %.3f s"):format(worst))
    m:release()
    assert.equal(1, waiter()[200])
    assert.equal(0, queued())
  end)

  it("a worker shut down gracefully ends its session: the lock it held " ..
     "is free at once, not after the session timeout", function()
    local a = start { workers = 1, extra = EXTRA }
    local release = zk:barrier("/spec/release")
    assert(release:set())
    local holder = N.parallel_bg({ a:url("/hold") }, 30)
    H.wait_until(function() return queued() == 1 end, 15, "the hold")
    local t0 = H.now()
    a:stop() -- SIGQUIT
    local m = zk:mutex(LOCK)
    assert.equal(m, m:acquire(8)) -- the session timeout is 10 s
    assert.is_true(H.now() - t0 < 8)
    m:release()
    holder()
    assert(release:remove())
  end)

  it("on_queued tells a request's light thread its place: 0 for the " ..
     "holder, 1 behind it (issue 36)", function()
    local a = start { workers = 1, extra = [[
      location = /queued { content_by_lua_block {
        local client = require("stock").client()
        local path = "/spec/queued"
        local places = {}
        local holder = client:mutex(path)
        assert(holder:acquire(10, { on_queued = function(p)
          places[1] = p end }))
        local th = ngx.thread.spawn(function()
          local m = client:mutex(path)
          assert(m:acquire(10, { on_queued = function(p)
            places[2] = p end }))
          assert(m:release())
        end)
        local deadline = ngx.now() + 10
        while places[2] == nil and ngx.now() < deadline do
          ngx.sleep(0.01)
        end
        assert(holder:release())
        assert(ngx.thread.wait(th))
        ngx.say(places[1], " ", places[2])
      } }
    ]] }
    local code, body = a:get("/queued", 30)
    assert.equal(200, code, body)
    assert.equal("0 1", body)
  end)

  it("runs revocation callbacks in a timer of the worker", function()
    local a = start { workers = 1, extra = EXTRA }
    local release = zk:barrier("/spec/release")
    assert(release:set())
    local holder = N.parallel_bg({ a:url("/hold_revocable") })
    H.wait_until(function() return queued() == 1 end, 15, "the hold")
    assert.equal(1, zklock.revoke(zk, LOCK))
    local m = zk:mutex(LOCK)
    assert.equal(m, m:acquire(10)) -- the callback released it
    m:release()
    local _, where = a:get("/revoked_in")
    assert.equal("timer", where)
    assert(release:remove())
    assert.equal(1, holder()[200])
  end)

  it("a session opened in the master gives the documented error in a " ..
     "worker; zklock.connect and zklock.ngx.connect refuse the master",
     function()
    local a = start { workers = 1, extra = EXTRA, http = HTTP_INIT }
    local code, body = a:get("/fork")
    assert.equal(200, code)
    assert.matches("^false\n", body)
    assert.matches("forked child", body)
    -- both connects refused the master, saying where to call them
    local _, refusals = body:gsub("call it in init_worker_by_lua", "")
    assert.equal(2, refusals, body)
    -- (issue 24, item 4) an unknown option: connect's and its own
    code, body = a:get("/bad_options")
    assert.equal(200, code)
    assert.matches("bad argument #2 to 'connect' (unknown option " ..
      "'sweep_intervall' (did you mean 'sweep_interval'?))\n", body, 1, true)
    assert.matches("bad argument #2 to 'connect' (unknown option " ..
      "'sesion_timeout' (did you mean 'session_timeout'?))", body, 1, true)
  end)
end)

describe("zklock under OpenResty over TLS (a TLS-only ZooKeeper)", function()
  local srv, zk
  with_server({ tls = true }, nil, function(s, z) srv, zk = s, z end)

  it("the stock service: 100 concurrent buys over 2 workers sell exactly " ..
     "20", function()
    local a = N.start { workers = 2, hosts = srv.connect_string,
                        tls = srv.tls }
    assert.equal(200, (a:get("/reset?n=20")))
    local list = {}
    for i = 1, 100 do list[i] = a:url("/buy") end
    local st, n = N.parallel(list, 100)
    assert.equal(100, n)
    assert.equal(20, st[200])
    assert.equal(80, st[409])
    local _, left = a:get("/stock")
    assert.equal("0", left)
    assert.equal(0, #(assert(zk:mutex(LOCK):participants(5))))
  end)
end)
