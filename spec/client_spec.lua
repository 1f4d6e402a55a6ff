-- Sessions: connect, state, close, chroot, fork, connection failures.
local H = require "spec.helpers"
local session = require "zklock.rt.session"
local zklock, tcore = H.zklock, H.tcore

-- Run client:<method>(...), an op, to its end: its result.
local function run_op(zk, method, ...)
  local o, msg, code = zk[method](zk, ...)
  if not o then return nil, msg, code end
  assert(H.await(zk, o, H.now() + 10) == "done", method .. " hung")
  return o:result()
end

describe("zklock.connect", function()
  local srv

  lazy_setup(function() srv = H.testing.server() end)
  lazy_teardown(function()
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  it("connects, reports its session and closes idempotently", function()
    local zk = assert(zklock.connect(srv.connect_string,
      { session_timeout = 4, connect_timeout = 10 }))
    assert.equal("connected", zk:state())
    assert.matches("^0x%x+$", zk:session_id())
    assert.equal(4, zk:session_timeout())
    assert.matches("^zklock.client{connected}: ", tostring(zk))
    zk:close()
    assert.equal("closed", zk:state())
    zk:close()
    -- a closed client (docs/api.md, "A closed client"): what asks the
    -- server answers closed; what keeps state in C raises
    assert.has_error(function() zk:session_id() end)
    assert.equal(0, zk:session_timeout())
    assert.same({ nil, "client is closed", "closed" }, { zk:get("/x") })
    assert.same({ nil, "client is closed", "closed" }, { zk:set("/x", "") })
    assert.equal(0, zk:dispatch(0.01))
    assert.has_error(function() zk:stats() end,
      "bad argument #1 to 'stats' (client is closed)")
    assert.has_error(function() zk:on_state(function() end) end,
      "bad argument #1 to 'on_state' (client is closed)")
    if H.is54 then -- <close> closes it, as close() does
      assert.equal("closed", assert(load([[
        local zklock, hosts = ...
        local c <close> = assert(zklock.connect(hosts))
        return c
      ]]))(zklock, srv.connect_string):state())
    end
    -- before its first session: "connecting", and no session id
    local waiting = assert(session.open("127.0.0.1:" .. tcore.free_port(),
      { session_timeout = 4 }, "connect"))
    assert.equal("connecting", waiting:state())
    assert.is_nil(waiting:session_id())
    waiting:close()
  end)

  -- the table of docs/api.md, "Codes", is zklock.errors: each code maps to
  -- itself, so a program compares with zklock.errors.timeout
  it("zklock.errors holds the codes docs/api.md lists, each mapping to " ..
     "itself", function()
    local doc = assert(H.read("docs/api.md"))
    local tbl = assert(doc:match("\n### Codes\n(.-)\n#"))
    local listed = {}
    for row in tbl:gmatch("\n| (`[^|]+)|") do
      for code in row:gmatch("`([%w_]+)`") do listed[code] = code end
    end
    local errors = {}
    for k, v in pairs(zklock.errors) do errors[k] = v end
    assert.is_truthy(next(listed))
    assert.same(listed, errors)
  end)

  it("gives nil, msg, 'connection_loss' when nothing listens", function()
    local port = tcore.free_port()
    local t0 = H.now()
    local zk, msg, code = zklock.connect("127.0.0.1:" .. port,
      { connect_timeout = 0.5 })
    assert.is_nil(zk)
    assert.equal("connection_loss", code)
    assert.matches("could not connect", msg)
    assert.is_true(H.now() - t0 < 8)
  end)

  it("says that every server refused the connection, at the timeout",
      function()
    local a, b = tcore.free_port(), tcore.free_port()
    local hosts = ("127.0.0.1:%d,127.0.0.1:%d"):format(a, b)
    local zk, msg, code = zklock.connect(hosts, { connect_timeout = 1.5 })
    assert.is_nil(zk)
    assert.equal("connection_loss", code)
    assert.equal(("could not connect to %s within 1.5s: 127.0.0.1:%d " ..
      "refused the connection, and so did every other server: nothing " ..
      "listens there? (a ZooKeeper server's port is its clientPort, or its " ..
      "secureClientPort for TLS)"):format(hosts, a), msg)
  end)

  it("a host name that does not resolve fails at once with unknown_host",
      function()
    local t0 = H.now()
    local zk, msg, code = zklock.connect("no-such-host.invalid:2181",
      { connect_timeout = 10 })
    assert.is_nil(zk)
    assert.equal("unknown_host", code)
    -- (".invalid" never resolves; without a DNS server the resolver says
    -- "name resolution failed" instead)
    assert.matches("^cannot resolve the servers of 'no%-such%-host%.invalid" ..
      ":2181': ", msg)
    assert.is_true(H.now() - t0 < 5)
  end)

  it("works under a chroot", function()
    local root = H.connect(srv)
    local base = H.path("chroot")
    -- make the chroot exist by taking (and releasing) a lock below it
    local m0 = root:mutex(base .. "/x")
    assert(m0:acquire(5)); m0:release()
    local zk = H.connect(srv.connect_string .. base)
    local m = zk:mutex("/locks/a")
    assert(m:acquire(5))
    assert.equal(1, #H.lock_nodes(root, base .. "/locks/a"))
    m:release()
    zk:close()
    root:close()
  end)

  -- (issue 22, item 12: connect reported connected, a barrier wait
  -- passed, holders() came back empty: a deploy gate opened on a typo)
  it("refuses a chroot that does not exist: connect fails with no_node, " ..
     "naming it", function()
    local t0 = H.now()
    local zk, msg, code = zklock.connect(srv.connect_string ..
      "/no/such/chroot", { connect_timeout = 20 })
    assert.is_nil(zk)
    assert.equal("no_node", code)
    assert.equal("the chroot /no/such/chroot of the connect string does " ..
      "not exist: create it, or connect without it", msg)
    assert.is_true(H.now() - t0 < 10) -- the server's answer, not a timeout
  end)

  it("a session not waited for (as zklock.ngx.connect opens it) under a " ..
     "missing chroot: waits and listings fail with no_node, never pass",
    function()
    local zk = assert(session.open(srv.connect_string .. "/no/such/chroot",
      { session_timeout = 5 }, "connect"))
    -- started before the session has looked for its chroot
    local ok, msg, code = zk:barrier("/gate"):wait(10)
    assert.is_nil(ok)
    assert.equal("no_node", code)
    assert.matches("chroot /no/such/chroot ", msg, 1, true)
    assert.equal("no_chroot", zk:state())
    local h
    h, msg, code = zk:mutex("/locks/a"):holders(10)
    assert.is_nil(h)
    assert.equal("no_node", code)
    assert.matches("chroot /no/such/chroot ", msg, 1, true)
    ok, msg, code = zk:mutex("/locks/a"):acquire(1)
    assert.is_nil(ok)
    assert.equal("no_node", code)
    assert.matches("chroot /no/such/chroot ", msg, 1, true)
    assert.same({ nil, msg, "no_node" }, { zk:get("/x") })
    zk:close()
    assert.equal("closed", zk:state())
  end)

  it("a chroot removed while the session lives: a lock or a barrier set " ..
     "answers no_node, naming it", function()
    local root = H.connect(srv)
    local base = H.path("gone")
    assert.is_true(root:set(base, ""))
    local zk = H.connect(srv.connect_string .. base)
    assert(run_op(root, "_delete", base)) -- (empty: we made nothing)
    local ok, msg, code = zk:mutex("/a"):acquire(5)
    assert.is_nil(ok)
    assert.equal("no_node", code)
    assert.matches("(the chroot " .. base .. " of the connect string must " ..
      "exist)", msg, 1, true)
    -- a top-level node too (no parent to create): an answer, not a loop
    ok, msg, code = zk:barrier("/x"):set()
    assert.is_nil(ok)
    assert.equal("no_node", code)
    assert.matches("chroot " .. base, msg, 1, true)
    ok, msg, code = zk:set("/data/x", "1")
    assert.is_nil(ok)
    assert.equal("no_node", code)
    assert.matches("chroot " .. base, msg, 1, true)
    assert.equal("connected", zk:state()) -- (looked for once per session)
    zk:close()
    root:close()
  end)

  it("a new session after an expiry looks for its chroot again: gone " ..
     "meanwhile, the client says no_chroot and waits fail with no_node",
    function()
    local root = H.connect(srv)
    local base = H.path("renew")
    assert.is_true(root:set(base, ""))
    local proxy = H.testing.proxy(srv)
    local zk = H.connect(proxy:connect_string() .. base,
      { session_timeout = 2 })
    local m = zk:mutex("/m")
    assert.equal(m, m:acquire(5))
    proxy:stall(true, true) -- silence: the server expires the session...
    H.wait_until(function() -- ...and its lock node goes
      return #H.lock_nodes(root, base) == 0 end, 30, "the session's expiry")
    run_op(root, "_delete", base .. "/m") -- (a container: the server may
    assert(run_op(root, "_delete", base)) --  have reaped it already)
    proxy:cut()
    proxy:stall(false, false)
    H.wait_until(function() return zk:state() == "no_chroot" end, 30,
      "the new session to find no chroot")
    assert.is_false(m:is_held())
    local ok, msg, code = zk:barrier("/gate"):wait(5)
    assert.is_nil(ok)
    assert.equal("no_node", code)
    assert.matches("chroot " .. base .. " ", msg, 1, true)
    zk:close()
    proxy:close()
    root:close()
  end)

  it("get and set the data of a node; set creates it and its parents",
    function()
    local zk = H.connect(srv)
    local path = H.path("data") .. "/deep/node"
    local d, msg, code = zk:get(path)
    assert.is_nil(d)
    assert.equal("no_node", code)
    assert.matches("no node", msg)
    assert.is_true(zk:set(path, "30"))
    local v
    d, v = zk:get(path)
    assert.equal("30", d)
    assert.equal(0, v)
    assert.is_true(zk:set(path, "a\0b"))
    d, v = zk:get(path)
    assert.equal("a\0b", d)
    assert.equal(1, v)
    assert.is_true(zk:set(path, ""))
    assert.equal("", (zk:get(path)))
    assert.has_error(function() zk:set(path, 5) end,
      "bad argument #2 to 'set' (string expected, got number)")
    assert.has_error(function() zk:get("x") end)
    zk:close()
  end)

  it("errors clearly when used in a forked child #fork", function()
    local zk = H.connect(srv)
    local m = zk:mutex(H.path())
    local out, out2 = H.tmpname("fork"), H.tmpname("fork")
    -- (an op and an attempt made before the fork: their methods take the
    -- client's mutex too, which another thread may hold at fork time)
    local op = assert(zk:_get(H.path()))
    local att = zk:_lock(H.path())
    local pid = tcore.fork()
    if pid == 0 then
      local ok, err = pcall(m.acquire, m, 1)
      local ok2, err2 = pcall(zk.state, zk)
      local fh = io.open(out, "w")
      fh:write(tostring(ok), "\n", tostring(err), "\n", tostring(ok2), "\n",
        tostring(err2))
      fh:close()
      local r = {}
      for _, f in ipairs({ op.poll, op.result, op.cancel }) do
        r[#r + 1] = tostring(select(2, pcall(f, op)):find("forked child", 1,
          true) ~= nil)
      end
      r[#r + 1] = tostring(select(2, pcall(zk._ready, zk)):find(
        "forked child", 1, true) ~= nil)
      r[#r + 1] = tostring(tostring(att):find("forked", 1, true) ~= nil)
      fh = io.open(out2, "w")
      fh:write(table.concat(r, " "))
      fh:close()
      tcore.exit(0)
    end
    assert.equal(0, tcore.waitpid(pid))
    local text = H.read(out)
    assert.equal("true true true true true", H.read(out2))
    os.remove(out)
    os.remove(out2)
    assert.matches("^false\n", text)
    assert.matches("forked child", text)
    assert.matches("\nfalse\n.*init_worker_by_lua", text)
    -- the parent's session is untouched
    assert.equal("connected", zk:state())
    assert(m:acquire(5)); m:release()
    zk:close()
  end)
end)
