-- Holders that die, sessions that expire, a server that restarts.
local H = require "spec.helpers"

describe("faults", function()
  local srv

  lazy_setup(function() srv = H.testing.server() end)
  lazy_teardown(function()
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  it("a waiter gets the lock of a kill -9'd holder within the session " ..
     "timeout", function()
    local path = H.path("kill")
    local ready = H.tmpname("ready")
    local st = 2
    local p = H.spawn("spec/workers/hold.lua", srv.connect_string, path, ready,
      st)
    local ok, err = pcall(function()
      H.wait_until(function() return H.read(ready) end, 30, "holder ready")
      local zk = H.connect(srv)
      local m = zk:mutex(path)
      assert.is_nil(m:acquire(0.2)) -- really held by the other process
      p:kill("KILL")
      local t0 = H.now()
      assert.equal(m, m:acquire(st + 10))
      local took = H.now() - t0
      assert.is_true(took < st + 5, ("took %.1fs"):format(took))
      m:release()
      zk:close()
    end)
    p:cleanup()
    os.remove(ready)
    assert(ok, err)
  end)

  it("a holder process frozen past its session timeout loses the lock " ..
     "to a waiter", function()
    local path = H.path("freeze")
    local ready = H.tmpname("ready")
    local p = H.spawn("spec/workers/hold.lua", srv.connect_string, path, ready,
      2)
    local ok, err = pcall(function()
      H.wait_until(function() return H.read(ready) end, 30, "holder ready")
      local zk = H.connect(srv)
      local m = zk:mutex(path)
      p:kill("STOP")
      local t0 = H.now()
      assert.equal(m, m:acquire(30))
      assert.is_true(H.now() - t0 < 2 + 5)
      m:release()
      zk:close()
    end)
    p:kill("CONT")
    p:cleanup()
    os.remove(ready)
    assert(ok, err)
  end)

  it("a waiter process frozen past its session timeout gets " ..
     "'session_expired', not a hang", function()
    local path = H.path("freeze-waiter")
    local result = H.tmpname("result")
    local zk = H.connect(srv)
    local m = zk:mutex(path)
    assert(m:acquire(5))
    local p = H.spawn("spec/workers/acquire.lua", srv.connect_string, path,
      result, 2, 60)
    local ok, err = pcall(function()
      H.wait_until(function() return #m:participants() == 2 end, 30,
        "waiter queued")
      p:kill("STOP")
      -- the server expires the frozen session and deletes its node
      H.wait_until(function() return #m:participants() == 1 end, 30,
        "waiter's node removed by expiry")
      p:kill("CONT")
      assert.equal(0, p:wait(30))
      assert.matches("^session_expired|", H.read(result))
      assert.is_true(m:is_held())
    end)
    p:cleanup()
    os.remove(result)
    m:release()
    zk:close()
    assert(ok, err)
  end)

  it("a server paused past the session timeout: the holder stops " ..
     "believing at once, everyone gets a clear result", function()
    local path = H.path("expire")
    local zk1 = H.connect(srv, { session_timeout = 2 })
    local zk2 = H.connect(srv, { session_timeout = 2 })
    local holder, waiter = zk1:mutex(path), zk2:mutex(path)
    assert(holder:acquire(5))
    local res, released
    local paused_at, resumed
    H.run(zk2, {
      function()
        res = { waiter:acquire(60) }
        if res[1] then waiter:release() end
      end,
    }, 60, function()
      if not paused_at and #holder:participants() == 2 then
        srv:pause()
        paused_at = H.now()
      elseif paused_at and not resumed then
        if H.now() - paused_at > 2 + 1 then
          -- past the session timeout the holder cannot know it still
          -- holds: it must not claim to
          assert.is_false(holder:is_held())
          srv:resume()
          resumed = true
        end
      elseif resumed and not released and zk1:state() ~= "connecting" then
        released = { holder:release() }
      end
    end)
    if not released then
      H.wait_until(function() return zk1:state() ~= "connecting" end, 30)
      released = { holder:release() }
    end
    -- not heard from for the session timeout: lost, whether or not the
    -- server expired the session after all; and a new hold works (on a
    -- new session when it did)
    assert.same({ nil, "lock lost", "lock_lost" }, released)
    assert.same({ holder }, { holder:acquire(10) })
    holder:release()
    -- the waiter: expired (usual, then renewed) or it got the lock
    if res[1] == nil then
      assert.equal("session_expired", res[3])
      assert.equal(1, zk2:stats().renewed)
    else
      assert.equal(waiter, res[1])
    end
    zk1:close()
    zk2:close()
    local zk = H.connect(srv)
    assert.same({}, H.lock_nodes(zk, path))
    zk:close()
  end)

  it("a waiter acquires once a restarted server is back", function()
    local path = H.path("restart")
    local zk1 = H.connect(srv, { session_timeout = 20 })
    local zk2 = H.connect(srv, { session_timeout = 20 })
    local holder, waiter = zk1:mutex(path), zk2:mutex(path)
    assert(holder:acquire(5))
    local got
    local restarted, released = false, false
    H.run(zk2, {
      function()
        got = { waiter:acquire(60), waiter:is_held() }
        if got[1] then waiter:release() end
      end,
    }, 60, function()
      if not restarted and #holder:participants() == 2 then
        srv:restart()
        restarted = true
      elseif restarted and not released then
        -- the session survived the restart: the holder still holds
        if zk1:state() == "connected" then
          assert.is_true(holder:is_held())
          assert.is_true(holder:release())
          released = true
        end
      end
    end)
    assert.same({ waiter, true }, got)
    assert.same({}, H.lock_nodes(zk1, path))
    zk1:close()
    zk2:close()
  end)
end)
