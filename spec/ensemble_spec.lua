-- The lock on a 3-member ensemble on loopback while its leader is stopped
-- or paused: waiters survive the election and acquire, a holder whose
-- session survives keeps believing (rightly), fences and tokens hold.
local H = require "spec.helpers"

describe("a 3-member ensemble", function()
  local cl

  lazy_setup(function() cl = H.testing.cluster(3) end)
  lazy_teardown(function() H.end_cluster(cl) end)

  local function connect() return H.connect(cl, { session_timeout = 10 }) end

  it("a waiter survives a leader change and acquires", function()
    local path = H.path("ens-waiter")
    local zk1, zk2 = connect(), connect()
    local holder, waiter = zk1:mutex(path), zk2:mutex(path)
    assert(holder:acquire(10))
    local t1 = holder:token()
    local old = assert(cl:leader())
    local got, stopped, released
    H.run(zk2, { function()
      got = { waiter:acquire(60) }
      if got[1] then got[2] = waiter:token(); waiter:release() end
    end }, 90, function()
      if not stopped then
        local names = holder:participants(1)
        if names and #names == 2 then old:stop(); stopped = true end
      elseif not released and zk1:state() == "connected" and
          cl:leader(0.1) then
        assert.is_true(holder:is_held()) -- the session lived on
        assert.is_true(holder:release())
        released = true
      end
    end)
    assert.equal(waiter, got[1])
    assert.is_true(got[2] > t1)
    old:start()
    assert(cl:wait_quorum(30))
    zk1:close()
    zk2:close()
  end)

  it("a holder keeps its lock through a paused leader: the session lives, " ..
     "its fenced writes pass, the token stays", function()
    local path, target = H.path("ens-holder"), H.path("ens-data")
    local zk = connect()
    local m = zk:mutex(path)
    assert(m:acquire(10))
    local token = m:token()
    assert(m:fenced_set(target, "before"))
    local old = assert(cl:leader())
    old:pause()
    local ok, err = pcall(function()
      local new = assert(cl:leader(30))
      assert.not_equal(old.id, new.id)
      H.wait_until(function()
        return zk:state() == "connected" and m:is_held()
      end, 30, "holder reconnected and holding")
      assert.equal(token, m:token())
      assert(m:fenced_set(target, "during", 20))
      assert.same({ path .. "/" .. m:node():match("[^/]+$") },
        m:participants(10))
    end)
    old:resume()
    assert(ok, err)
    assert(cl:wait_quorum(30))
    assert.same({ "during", 1 }, { zk:get(target, 10) })
    assert.is_true(m:release())
    zk:close()
  end)

  it("a holder frozen past its session timeout: false at once on " ..
     "resuming, on_lost, its fenced write refused, a new session", function()
    local r = H.freeze_holder(cl, true)
    assert.is_true(tonumber(r.gap) > 2, "gap " .. tostring(r.gap))
    for k, v in pairs(H.FROZEN_REPORT[true]) do
      assert.equal(v, r[k], k .. " in report: " .. H.report_text(r))
    end
  end)

  it("contenders keep a fenced counter exact while the leader is killed",
     function()
    local path, counter = H.path("ens-count"), H.path("ens-counter")
    local clients, locks, done, count = {}, {}, 0, 0
    for i = 1, 3 do
      clients[i] = connect()
      locks[i] = clients[i]:mutex(path)
    end
    local fns = {}
    for i = 1, 3 do
      fns[i] = function()
        for _ = 1, 10 do
          local m = locks[i]
          if m:acquire(60) then
            local v = tonumber((clients[i]:get(counter, 20))) or 0
            if m:fenced_set(counter, tostring(v + 1), 20) then
              count = count + 1
            end
            m:release()
          end
        end
        done = done + 1
      end
    end
    assert(clients[1]:set(counter, "0"))
    local old = assert(cl:leader())
    local stopped = false
    -- (H.run waits on one client; the others' changes are seen within
    -- its 50 ms tick)
    H.run(clients[1], fns, 120, function()
      if not stopped and count >= 5 then old:stop(); stopped = true end
    end)
    assert.is_true(stopped)
    assert.equal(3, done)
    old:start()
    assert(cl:wait_quorum(30))
    assert.equal(tostring(count), (clients[1]:get(counter, 10)))
    for i = 1, 3 do clients[i]:close() end
  end)
end)
