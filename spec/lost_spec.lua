-- Lock lost, fencing and session renewal against a real server: a holder
-- frozen past its session timeout stops believing at once, hears on_lost,
-- and is refused by the fence; the client then opens a new session.
local H = require "spec.helpers"

describe("lock lost", function()
  local srv

  lazy_setup(function() srv = H.testing.server() end)
  lazy_teardown(function()
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  it("a holder frozen past the session timeout answers is_held() false " ..
     "at once on resuming, runs on_lost, and its fenced write and release " ..
     "say lock_lost; the client renews its session", function()
    local r = H.freeze_holder(srv, true)
    -- the first answer after the freeze was already false
    assert.is_true(tonumber(r.gap) > 2, "gap " .. tostring(r.gap))
    for k, v in pairs(H.FROZEN_REPORT[true]) do
      assert.equal(v, r[k], k .. " in report: " .. H.report_text(r))
    end
  end)

  it("with renew_session = false the client stays expired", function()
    local r = H.freeze_holder(srv, false)
    for k, v in pairs(H.FROZEN_REPORT[false]) do
      assert.equal(v, r[k], k .. " in report: " .. H.report_text(r))
    end
  end)

  it("a server silent past the session timeout: the hold is lost even " ..
     "if the session survives, and its node is deleted", function()
    local path = H.path("silent")
    local zk = H.connect(srv, { session_timeout = 2 })
    local m = zk:mutex(path)
    local lost = 0
    m:on_lost(function() lost = lost + 1 end)
    assert(m:acquire(5))
    local node = m:node()
    srv:pause()
    local ok, err = pcall(function()
      -- the timer thread declares it lost at (last heard + timeout)
      H.wait_until(function() return not m:is_held() end, 10, "not held")
      H.wait_until(function() zk:dispatch(); return lost == 1 end, 10,
        "on_lost")
    end)
    srv:resume()
    assert(ok, err)
    assert.same({ nil, "lock lost", "lock_lost" }, { m:release() })
    -- whichever session we have now, that node is not left behind
    local other = H.connect(srv)
    H.wait_until(function()
      for _, n in ipairs(H.lock_nodes(other, path)) do
        if n == node then return false end
      end
      return true
    end, 20, "lost node deleted")
    assert.equal(m, m:acquire(10))
    m:release()
    other:close()
    zk:close()
  end)

  it("with_lock reports a lock lost during fn", function()
    local path = H.path("with-lost")
    local zk = H.connect(srv, { session_timeout = 2 })
    local m = zk:mutex(path)
    local a, b, c = H.zklock.with_lock(m, 5, function()
      srv:pause()
      local ok, err = pcall(H.wait_until, function()
        return zk:stats().lost > 0 end, 10, "lost")
      srv:resume()
      assert(ok, err)
      return "done"
    end)
    assert.same({ nil, "lock lost", "lock_lost" }, { a, b, c })
    zk:close()
  end)
end)

describe("fencing", function()
  local srv, zk

  lazy_setup(function()
    srv = H.testing.server()
    zk = H.connect(srv)
  end)
  lazy_teardown(function()
    if zk then zk:close() end
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  it("fenced_set creates, then sets, only while the lock node exists",
     function()
    local path, target = H.path("fence"), H.path("fenced") .. "/a/b"
    local m = zk:mutex(path)
    assert(m:acquire(5))
    local v1, z1 = m:fenced_set(target, "one")
    assert.equal(0, v1)
    assert.is_true(z1 > m:token()) -- the create's zxid
    local v2, z2 = m:fenced_set(target, "two")
    assert.equal(1, v2)
    assert.is_true(z2 > z1)
    assert.same({ "two", 1 }, { zk:get(target) })
    -- the lock node goes (an operator, a reaper...): the fence holds
    local other = H.connect(srv)
    local op = assert(other:_delete(m:node()))
    assert.equal("done", H.await(other, op, H.now() + 10))
    local r, msg, code = m:fenced_set(target, "three")
    assert.is_nil(r)
    assert.equal("lock_lost", code)
    assert.matches("lock lost", msg)
    assert.same({ "two", 1 }, { zk:get(target) })
    m:release()
    other:close()
  end)

  it("fenced_set refuses a caller that does not hold the lock, and " ..
     "bad arguments", function()
    local m = zk:mutex(H.path("fence-misuse"))
    local ok, err = pcall(m.fenced_set, m, "/x", "y")
    assert.is_false(ok)
    assert.matches("bad argument #1 to 'fenced_set' %(.*not held", err)
    assert(m:acquire(5))
    ok, err = pcall(m.fenced_set, m, "x", "y")
    assert.is_false(ok)
    assert.matches("bad argument #1 to 'fenced_set' %(path must start", err)
    ok, err = pcall(m.fenced_set, m, "/x", 42)
    assert.is_false(ok)
    assert.matches("bad argument #2 to 'fenced_set' %(string expected", err)
    m:release()
  end)

  it("tokens strictly increase across holders of a path", function()
    local path = H.path("tokens")
    local zk2 = H.connect(srv)
    local a, b = zk:mutex(path), zk2:mutex(path)
    local last = 0
    for i = 1, 6 do
      local m = i % 2 == 0 and a or b
      assert(m:acquire(5))
      local t = m:token()
      assert.is_true(t > last)
      last = t
      m:release()
    end
    zk2:close()
  end)
end)
