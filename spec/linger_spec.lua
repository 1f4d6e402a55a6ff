-- Lock caching: `zk:mutex(path, { linger = s })` keeps a released node
-- for up to `s` seconds, and an acquire on that object meanwhile holds
-- again with no request sent; a contender, the time running out, close,
-- GC or the session ending gives the node up (docs/design.md, section
-- 4.13).  Exclusion with lingering processes: spec/exclusion_spec.lua and
-- spec/interop_spec.lua (with Curator).
local H = require "spec.helpers"

describe("lock caching (linger)", function()
  local srv, zk, zk2

  lazy_setup(function()
    srv = H.testing.server({ min_session_timeout = 1000 })
    zk = H.connect(srv)
    zk2 = H.connect(srv)
  end)
  lazy_teardown(function()
    if zk then zk:close() end
    if zk2 then zk2:close() end
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  local function nodes(path) return H.lock_nodes(zk2, path) end

  it("re-acquires a lingering node at once, with no request sent", function()
    local path = H.path("linger")
    local m = zk:mutex(path, { linger = 30 })
    assert(m:acquire(5))
    local token, node = m:token(), m:node()
    assert(m:release())
    assert.is_false(m:is_held()) -- the hold ended for the caller
    assert.is_nil(m:token())
    assert.same({ node }, nodes(path)) -- the node did not
    local r0 = zk:stats().requests
    for _ = 1, 50 do
      assert(m:acquire(5))
      assert.is_true(m:is_held())
      assert.equal(token, m:token()) -- one node: one token for them all
      assert(m:release())
    end
    assert.equal(0, zk:stats().requests - r0)
    -- reentrant, and the metrics count each cached hold
    assert(m:acquire(5)); assert(m:acquire(5))
    assert(m:release()); assert(m:release())
    assert.equal(52, zk:stats().kinds.mutex.acquires)
    -- a plain mutex on the same path, same client: another object, a
    -- contender like any other
    local plain = zk:mutex(path)
    assert(plain:acquire(10))
    assert.is_true(plain:token() > token)
    assert(plain:release())
    assert.same({}, nodes(path))
    -- and then a new node for the lingering object
    assert(m:acquire(5))
    assert.is_true(m:token() > token)
    assert(m:release())
    m = nil -- luacheck: ignore (collected: its node goes)
    H.wait_until(function()
      collectgarbage(); collectgarbage()
      return #nodes(path) == 0
    end, 20, "the lingering node of a collected lock to go")
  end)

  it("a waiter of another process gets it when the hold ends, not when " ..
      "the linger runs out", function()
    local path = H.path("linger-wait")
    local m = zk:mutex(path, { linger = 600 })
    assert(m:acquire(5))
    local ready, done = H.tmpname("ready"), H.tmpname("done")
    local p = H.spawn("spec/workers/waiter.lua", srv.connect_string, path,
      ready, done)
    H.wait_until(function() return #nodes(path) == 2 end, 30,
      "the other process queued")
    local t0 = H.now()
    assert(m:release())
    H.wait_until(function() return H.read(done) end, 30, "the waiter's hold")
    local waited = H.now() - t0
    assert.equal(0, p:wait(30))
    p:cleanup()
    os.remove(ready); os.remove(done)
    assert.is_true(waited < 10, ("the waiter took %.1f s"):format(waited))
    assert.same({}, nodes(path))
    -- and the lingering object, contended, queues anew
    assert(m:acquire(5))
    assert(m:release())
  end)

  it("a contender arriving while lingering makes the node go at once",
      function()
    local path = H.path("linger-contender")
    local m = zk:mutex(path, { linger = 600 })
    assert(m:acquire(5))
    assert(m:release())
    local other = zk2:mutex(path)
    assert(other:acquire(10)) -- (would wait 600 s if the node stayed)
    assert(other:release())
    assert(m:acquire(5))
    assert(m:release())
  end)

  it("leaves nothing after the linger runs out, or after close", function()
    local path = H.path("linger-expire")
    local m = zk:mutex(path, { linger = 0.3 })
    assert(m:acquire(5))
    assert(m:release())
    H.wait_until(function() return #nodes(path) == 0 end, 20,
      "the lingering node to go after 0.3 s")
    local c = H.connect(srv)
    local m2 = c:mutex(path, { linger = 600 })
    assert(m2:acquire(5))
    assert(m2:release())
    assert.equal(1, #nodes(path))
    c:close()
    assert.same({}, nodes(path))
  end)

  it("a session expiry while lingering leaves nothing taken for ours",
      function()
    local path = H.path("linger-expiry")
    local proxy = H.testing.proxy(srv)
    local c = H.connect(proxy:connect_string(), { session_timeout = 2 })
    local m = c:mutex(path, { linger = 600 })
    assert(m:acquire(5))
    local token = m:token()
    assert(m:release())
    proxy:stall(true, true) -- silence: the server expires the session
    local ok, err = pcall(H.wait_until, function()
      return #nodes(path) == 0
    end, 20, "the server to expire the session (our node gone)")
    proxy:cut()
    proxy:stall(false, false)
    assert(ok, err)
    H.wait_until(function()
      return c:stats().renewed == 1 and c:state() == "connected"
    end, 30, "the renewed session")
    -- the next acquire cannot reuse it: a new node, a new token
    assert(m:acquire(20))
    assert.is_true(m:token() > token)
    assert(m:release())
    c:close()
    proxy:close()
    -- (through the proxy, the close may reach the server late: then the
    -- session's timeout ends it)
    H.wait_until(function() return #nodes(path) == 0 end, 20,
      "the renewed session's node to go with it")
  end)

  it("refuses a bad linger, and a semaphore's", function()
    assert.has_error(function() zk:mutex("/x", { linger = 0 }) end)
    assert.has_error(function() zk:mutex("/x", { linger = "1" }) end)
    assert.has_error(function() zk:semaphore_mutex("/x", { linger = 1 }) end)
    assert.has_error(function() zk:semaphore("/x", 2, { linger = 1 }) end)
    local rw = zk:rwlock(H.path("linger-rw"), { linger = 30 })
    assert(rw.write:acquire(5))
    assert(rw.write:release())
    local r0 = zk:stats().requests
    assert(rw.write:acquire(5))
    assert(rw.write:release())
    assert.equal(0, zk:stats().requests - r0) -- the write lock lingers
    assert(rw.read:acquire(5)) -- our own reader is a contender too
    assert(rw.read:release())
  end)
end)
