-- Connection faults made on command by zklock.testing's TCP proxy, between
-- a client and a real server: replies lost after the server applied a
-- create, connections stalled past the session timeout.
local H = require "spec.helpers"

describe("connection faults through a proxy", function()
  local srv, proxy, direct

  lazy_setup(function()
    srv = H.testing.server()
    proxy = H.testing.proxy(srv)
    direct = H.connect(srv)
  end)
  lazy_teardown(function()
    if direct then direct:close() end
    if proxy then proxy:close() end
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  before_each(function() proxy:stall(false, false) end)

  -- Acquire m (of client zk) with the replies held by the proxy; cut the
  -- connections once cut_now() says so.  In the acquiring coroutine: the
  -- result, our node and every lock node the server has, the release.
  local function acquire_reply_held(zk, m, path, cut_now)
    local got, nodes, released, cut
    proxy:stall(false, true) -- requests pass, replies are held
    H.run(zk, { function()
      got = { m:acquire(20) }
      nodes = { m:node(), H.lock_nodes(direct, path) }
      released = m:release()
    end }, 30, function()
      if not cut and cut_now() then
        proxy:cut()
        proxy:stall(false, false)
        cut = true
      end
    end)
    return got, nodes, released, cut
  end

  it("the proxy forwards, stalls and cuts", function()
    local zk = H.connect(proxy:connect_string(), { session_timeout = 5 })
    local p = H.path("via-proxy")
    assert.is_true(zk:set(p, "x"))
    assert.is_true(proxy:stats().connections >= 1)
    local accepted = proxy:stats().accepted
    proxy:cut()
    -- (the client reconnects within a millisecond: count connections)
    H.wait_until(function() return proxy:stats().accepted > accepted end,
      10, "client reconnected")
    H.wait_until(function() return zk:state() == "connected" end, 10,
      "client back")
    assert.equal(1, proxy:stats().cuts)
    assert.same({ "x", 0 }, { zk:get(p) })
    zk:close()
  end)

  it("a create whose reply (no parent) is lost: the parents are made and " ..
     "the lock taken", function()
    local path = H.path("lost-reply-noparent")
    local zk = H.connect(proxy:connect_string(), { session_timeout = 10 })
    local m = zk:mutex(path)
    local t0 = H.now()
    local got, nodes, released = acquire_reply_held(zk, m, path,
      function() return H.now() - t0 > 0.3 end)
    assert.same({ m }, got)
    assert.same({ nodes[1] }, nodes[2])
    assert.is_true(released)
    zk:close()
  end)

  it("a create whose reply is lost ends with exactly one node, ours",
     function()
    local path = H.path("lost-reply")
    assert(direct:set(path, "")) -- (else the reply held is "no parent")
    local zk = H.connect(proxy:connect_string(), { session_timeout = 10 })
    local m = zk:mutex(path)
    -- cut once the server applied the create: its reply never arrives
    local got, nodes, released, cut = acquire_reply_held(zk, m, path,
      function() return #H.lock_nodes(direct, path) == 1 end)
    assert.is_true(cut)
    assert.same({ m }, got)
    assert.same({ nodes[1] }, nodes[2]) -- adopted, not created again
    assert.is_true(released)
    assert.same({}, H.lock_nodes(direct, path))
    zk:close()
  end)

  it("a create whose reply is lost while the session expires: no node " ..
     "is taken for ours, and a new session acquires", function()
    local path = H.path("lost-reply-expired")
    assert(direct:set(path, ""))
    local zk = H.connect(proxy:connect_string(), { session_timeout = 2 })
    local m = zk:mutex(path)
    local got, stalled_at = nil, nil
    proxy:stall(false, true)
    H.run(zk, { function() got = { m:acquire(30) } end }, 40, function()
      if not stalled_at and #H.lock_nodes(direct, path) == 1 then
        proxy:stall(true, true) -- silence until the server expires us
        stalled_at = H.now()
      elseif stalled_at and #H.lock_nodes(direct, path) == 0 then
        proxy:cut()
        proxy:stall(false, false)
      end
    end)
    assert.is_nil(got[1])
    assert.equal("session_expired", got[3])
    assert.equal(m, m:acquire(10))
    assert.equal(1, zk:stats().renewed)
    assert.same({ m:node() }, H.lock_nodes(direct, path))
    m:release()
    zk:close()
  end)

  it("a holder behind a stalled connection stops believing before a " ..
     "waiter gets the lock, and hears on_lost", function()
    local path = H.path("stalled")
    local zk1 = H.connect(proxy:connect_string(), { session_timeout = 2 })
    local holder = zk1:mutex(path)
    local lost = 0
    holder:on_lost(function() lost = lost + 1 end)
    assert(holder:acquire(5))
    local waiter = direct:mutex(path)
    local got_at, last_true
    proxy:stall(true, true)
    H.run(direct, { function()
      assert(waiter:acquire(30))
      got_at = H.now()
      waiter:release()
    end }, 40, function()
      if holder:is_held() then last_true = H.now() end
    end)
    assert.is_true(last_true < got_at,
      ("held until %.3f, waiter from %.3f"):format(last_true, got_at))
    proxy:stall(false, false)
    H.wait_until(function() zk1:dispatch(); return lost == 1 end, 20,
      "on_lost")
    assert.same({ nil, "lock lost", "lock_lost" }, { holder:release() })
    zk1:close()
  end)
end)
