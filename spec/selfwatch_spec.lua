-- What an uncontended hold sends (issue 34; docs/design.md, section 4.5):
-- the create, its listing and the delete, and nothing else, when the
-- hold ends before connect's `self_watch_delay` (default 0.1 s); the
-- self watch (a get of our node, with a watch) goes once the hold has
-- lasted that long, at once for a revocable lock, and when a node
-- lingers.  So a foreign deletion of a hold is noticed at most
-- self_watch_delay late; a fenced write is refused all the same.
-- Against a real standalone ZooKeeper.

local H = require "spec.helpers"

-- Run a C op of zk to its end: its results (as op:result()).
local function op(zk, method, ...)
  local o, msg, code = zk[method](zk, ...)
  if not o then return nil, msg, code end
  assert(H.await(zk, o, H.now() + 10) == "done", method .. " hung")
  return o:result()
end

describe("the self watch", function()
  local srv, zk2
  local clients = {}
  lazy_setup(function()
    srv = H.testing.server()
    zk2 = H.connect(srv)
  end)
  lazy_teardown(function()
    for _, c in ipairs(clients) do c:close() end
    if zk2 then zk2:close() end
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  local function client(delay)
    local c = assert(H.zklock.connect(srv.connect_string,
      { session_timeout = 5, self_watch_delay = delay }))
    clients[#clients + 1] = c
    return c
  end

  -- the paths the server watches for c's session
  local function watched(c)
    return H.watches_by_session(srv)[c:session_id()] or {}
  end

  -- requests and notifications of n uncontended cycles
  local function cycles(c, n, opts)
    local m = c:mutex(H.path("sw"), opts)
    assert(m:acquire(5)); assert(m:release()) -- (its parents made)
    local s0 = c:stats()
    for _ = 1, n do assert(m:acquire(5)); assert(m:release()) end
    local s1 = c:stats()
    return (s1.requests - s0.requests) / n,
      (s1.watch_events - s0.watch_events) / n
  end

  it("an uncontended cycle sends the create, its listing and the delete, " ..
     "and is told nothing, while its holds end before the delay", function()
    -- (a delay of 30 s: no hold here lasts that long on any machine)
    local r, e = cycles(client(30), 20)
    assert.equal(3, r)
    assert.equal(0, e)
    -- with cohorts off, the same
    r, e = cycles(client(30), 20, { cohort = false })
    assert.equal(3, r)
    assert.equal(0, e)
  end)

  -- voluntary context switches so far of each thread of this process but
  -- the Lua thread (tid = pid)
  local function switches()
    local pid = tostring(H.core.pid())
    local t = {}
    local ls = assert(io.popen("ls /proc/" .. pid .. "/task"))
    for tid in ls:lines() do
      local fh = tid ~= pid and
        io.open(("/proc/%s/task/%s/status"):format(pid, tid))
      if fh then
        local st = fh:read("*a")
        fh:close()
        t[tid] = tonumber(st:match("voluntary_ctxt_switches:%s*(%d+)"))
      end
    end
    ls:close()
    return t
  end

  it("the replies of a cycle wake one of the C client's threads: its IO " ..
     "thread runs the completions (features.io_completions; two threads " ..
     "without it)", function()
    local c = client(30)
    local n = 200
    local before = switches()
    cycles(c, n)
    local busy = 0
    for tid, k in pairs(switches()) do
      if before[tid] and k - before[tid] >= n / 2 then busy = busy + 1 end
    end
    -- (the IO thread wakes for each request and reply; the completion
    -- thread, when it runs them, for each reply too; the timer thread
    -- and other clients' threads hardly at all)
    assert.equal(H.zklock.features.io_completions and 1 or 2, busy)
  end)

  it("with self_watch_delay = 0 every hold reads its node at once, and " ..
     "its own delete is told (the cost the delay saves)", function()
    local r, e = cycles(client(0), 20)
    assert.equal(4, r)
    assert.equal(1, e)
  end)

  it("a foreign deletion is not seen before the delay: is_held() stays " ..
     "true, and a fenced write is refused all the same", function()
    local zk = client(30)
    local path, target = H.path("sw-late"), H.path("sw-target")
    local m = zk:mutex(path)
    assert(m:acquire(5))
    local node = m:node()
    assert.is_false(H.contains(watched(zk), node)) -- no watch yet
    assert(op(zk2, "_delete", node))
    -- nothing can tell this session: the server has no watch for it
    assert.is_false(H.contains(watched(zk), node))
    assert.is_true(m:is_held())
    assert.same({ nil, "lock lost: " .. node .. " is gone", "lock_lost" },
      { m:fenced_set(target, "x") })
    assert.is_nil((zk2:get(target))) -- nothing written
    -- its release finds the node gone: the hold had ended
    assert.same({ nil, "lock lost: our node was deleted by someone else",
      "lock_lost" }, { m:release() })
  end)

  it("a foreign deletion is noticed once the hold has lasted the delay",
      function()
    local zk = client(0.3)
    local m = zk:mutex(H.path("sw-bound"))
    local lost = 0
    m:on_lost(function() lost = lost + 1 end)
    assert(m:acquire(5))
    local r0 = zk:stats().requests
    assert(op(zk2, "_delete", m:node()))
    H.dispatch_until(zk, function() return lost == 1 end, "on_lost")
    assert.is_false(m:is_held())
    -- the self watch's get told it (the deferred request, sent once)
    assert.equal(1, zk:stats().requests - r0)
    assert.equal("lock_lost", select(3, m:release()))
  end)

  it("a revocable hold watches its node at once", function()
    local zk = client(30)
    local path = H.path("sw-revoke")
    local m = zk:mutex(path):on_revoke(function(l)
      assert(l:release())
    end)
    assert(m:acquire(5))
    zk:get(H.path("sw-rt")) -- (a round trip: the get before it is in)
    assert.is_true(H.contains(watched(zk), m:node()))
    assert.equal(1, H.zklock.revoke(zk2, path))
    H.dispatch_until(zk, function() return not m:is_held() end,
      "the revocation")
  end)

  it("a lingering node watches itself from its release on", function()
    local zk = client(30)
    local path = H.path("sw-linger")
    local m = zk:mutex(path, { linger = 30 })
    assert(m:acquire(5))
    local node = m:node()
    assert.is_false(H.contains(watched(zk), node))
    assert(m:release())
    zk:get(H.path("sw-rt")) -- (a round trip)
    assert.is_true(H.contains(watched(zk), node))
    -- asked to revoke while it lingers: it goes (the watch told it)
    assert.equal(1, H.zklock.revoke(zk2, path))
    H.wait_until(function()
      return #H.lock_nodes(zk2, path) == 0
    end, 10, "the lingering node to go")
  end)

  it("refuses a bad self_watch_delay", function()
    for _, bad in ipairs { -1, "1", 0 / 0, 1e10 } do
      assert.has_error(function()
        H.zklock.connect(srv.connect_string, { self_watch_delay = bad })
      end)
    end
  end)
end)
