-- Sessions: connect, state, close, chroot, fork, connection failures.
local H = require "spec.helpers"
local zklock, tcore = H.zklock, H.tcore

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
    assert.has_error(function() zk:session_id() end)
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

  it("reports a missing chroot clearly", function()
    local zk = H.connect(srv.connect_string .. "/no/such/chroot")
    local ok, msg, code = zk:mutex("/a"):acquire(5)
    assert.is_nil(ok)
    assert.equal("no_node", code)
    assert.matches("chroot", msg)
    -- a top-level node too (no parent to create): an answer, not a loop
    ok, msg, code = zk:barrier("/x"):set()
    assert.is_nil(ok)
    assert.equal("no_node", code)
    assert.matches("chroot", msg)
    zk:close()
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
