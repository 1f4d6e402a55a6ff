-- Following the ensemble (docs/design.md, section 18; issue 35): an
-- ensemble with dynamic reconfiguration is moved, member by member, from
-- members 1-3 to members 4-6; a client that follows keeps its session and
-- its hold the whole way; one that does not (follow_ensemble = false)
-- loses its session once the last member it knows is gone.
local H = require "spec.helpers"

-- The servers of a connect string, as a sorted list.
local function set_of(s)
  local t = {}
  for hp in s:gmatch("[^,]+") do t[#t + 1] = hp end
  table.sort(t)
  return table.concat(t, ",")
end

describe("following the ensemble", function()
  local cl

  lazy_setup(function() cl = H.testing.cluster(3, { reconfig = true }) end)
  lazy_teardown(function() if cl then cl:close() end end)

  -- Waits until zk uses the cluster's members as its servers.
  local function follows(zk, what)
    H.wait_until(function()
      return set_of(zk:servers()) == set_of(cl.connect_string)
    end, 30, what)
  end

  -- Moves the ensemble to three new members as issue 35 names it (from
  -- members 1-3 to 4-6: add 4 and 5, remove 1, add 6, remove 2 and 3),
  -- calling step(what) after each change.
  local function move(step)
    local old = { cl.members[1], cl.members[2], cl.members[3] }
    assert(cl:add())
    step("added a fourth")
    assert(cl:add())
    step("added a fifth")
    assert(cl:remove(old[1]))
    step("removed the first")
    assert(cl:add())
    step("added a sixth")
    assert(cl:remove(old[2]))
    assert(cl:remove(old[3]))
    step("removed the rest")
    assert(cl:wait_quorum(30))
  end

  it("three processes pass a mutex while the ensemble moves to new " ..
     "members: exact count, no overlap, every session lives", function()
    local N = 3
    local path, file = H.path("follow-excl"), H.tmpname("counter")
    local gate, stop = H.tmpname("gate"), H.tmpname("stop")
    H.write(file, "0")
    local procs, logs = {}, {}
    for i = 1, N do
      logs[i] = H.tmpname("log")
      procs[i] = H.spawn("spec/workers/follow_counter.lua",
        cl.connect_string, path, file, logs[i], gate, stop)
    end
    local function lines(i)
      local fh = io.open(logs[i])
      if not fh then return 0 end
      local n = 0
      for _ in fh:lines() do n = n + 1 end
      fh:close()
      return n
    end
    -- every worker cycles some more after each change
    local function each_cycles(what)
      local before = {}
      for i = 1, N do before[i] = lines(i) end
      H.wait_until(function()
        for i = 1, N do
          if lines(i) < before[i] + 5 then return false end
        end
        return true
      end, 60, "every worker cycling after: " .. what)
    end
    H.write(gate, "go")
    each_cycles("the start")
    move(each_cycles)
    H.write(stop, "stop")
    local intervals, total_moves = {}, 0
    for i, p in ipairs(procs) do
      local status = p:wait(120)
      local out = p:output()
      assert(status == 0, "worker " .. i .. " failed: " .. out)
      total_moves = total_moves + tonumber(out:match("moves=(%d+)"))
      p:cleanup()
      for a, b in H.read(logs[i]):gmatch("(%S+) (%S+)") do
        intervals[#intervals + 1] = { tonumber(a), tonumber(b) }
      end
      os.remove(logs[i])
    end
    assert.is_true(#intervals > 0)
    assert.equal(1, H.max_overlap(intervals)) -- (never two inside at once)
    assert.equal(#intervals, tonumber(H.read(file)))
    assert.is_true(total_moves >= N * 5) -- (each change, each worker)
    os.remove(file); os.remove(gate); os.remove(stop)
  end)

  it("moves the servers with the members; the session and a hold live on",
    function()
      local path = H.path("follow")
      local zk = H.connect(cl.connect_string, { session_timeout = 6 })
      local fixed = H.connect(cl.connect_string,
        { session_timeout = 4, follow_ensemble = false })
      assert.is_true(H.zklock.features.follow_ensemble) -- (the C client
      -- make builds: tools/zkclient-follow.patch)
      local states = {}
      zk:on_state(function(s) states[#states + 1] = s end)
      local m, mf = zk:mutex(path .. "/a"), fixed:mutex(path .. "/b")
      assert(m:acquire(10))
      assert(mf:acquire(10))
      local sid, token = zk:session_id(), m:token()
      assert.equal(set_of(cl.connect_string), set_of(zk:servers()))
      move(function(what) follows(zk, what) end)
      -- the follower: the same session, its hold believed and real
      H.wait_until(function() zk:dispatch(); return zk:state() == "connected" end,
        30, "the follower connected")
      assert.equal(sid, zk:session_id())
      assert.is_true(m:is_held())
      assert.equal(token, m:token())
      local _, moves = zk:servers()
      assert.is_true(moves >= 5)
      assert.is_true(H.contains(states, "servers"))
      assert.is_true(m:release())
      -- the client that did not follow: nothing it knows is left; its
      -- hold ends (the timer's reckoning), and the server expired its
      -- session: its node is gone
      H.wait_until(function() return not mf:is_held() end, 30,
        "the fixed client's hold ended")
      local check = H.connect(cl.connect_string, { session_timeout = 6 })
      H.wait_until(function()
        return #H.lock_nodes(check, path .. "/b") == 0
      end, 30, "the fixed client's node gone with its session")
      assert.is_not.equal("connected", fixed:state())
      check:close()
      fixed:close()
      zk:close()
    end)

  it("the leader removed by reconfiguration while a lock is held and " ..
     "another waits: the holder keeps it, the waiter gets it after",
    function()
      local path = H.path("follow-leader")
      local zk1 = H.connect(cl.connect_string, { session_timeout = 6 })
      local zk2 = H.connect(cl.connect_string, { session_timeout = 6 })
      local holder, waiter = zk1:mutex(path), zk2:mutex(path)
      assert(holder:acquire(10))
      local t1 = holder:token()
      local leader = assert(cl:leader())
      local got, removed, released
      H.run(zk2, { function()
        got = { waiter:acquire(60) }
        if got[1] then got[2] = waiter:token(); waiter:release() end
      end }, 90, function()
        if not removed then
          local names = holder:participants(1)
          if names and #names == 2 then
            assert(cl:remove(leader))
            assert(cl:add())
            removed = true
          end
        elseif not released and cl:leader(0.1) then
          H.wait_until(function()
            zk1:dispatch()
            return zk1:state() == "connected"
          end, 30, "the holder connected")
          assert.is_true(holder:is_held())
          assert.is_true(holder:release())
          released = true
        end
      end)
      assert.equal(waiter, got[1])
      assert.is_true(got[2] > t1)
      assert.equal(0, zk1:stats().renewed)
      zk1:close()
      zk2:close()
    end)

  it("a client connected to an observer takes and releases locks and " ..
     "passes a barrier", function()
    local obs = assert(cl:add({ observer = true }))
    local path = H.path("observer")
    local zk = H.connect(obs.connect_string,
      { session_timeout = 6, follow_ensemble = false })
    local other = H.connect(cl.connect_string, { session_timeout = 6 })
    local m, m2 = zk:mutex(path .. "/m"), other:mutex(path .. "/m")
    assert(m:acquire(10))
    assert.is_nil((m2:acquire(0)))
    assert.is_true(m:release())
    assert(m2:acquire(10))
    assert.is_true(m2:release())
    local b = zk:barrier(path .. "/b")
    assert(b:set())
    assert.is_nil((b:wait(0)))
    assert(other:barrier(path .. "/b"):remove())
    assert.is_true(b:wait(10))
    zk:close()
    other:close()
    assert(cl:remove(obs))
  end)

  it("reads the configuration as followed: zk:servers() of a client " ..
     "that follows is the ensemble's", function()
    local zk = H.connect(cl.connect_string, { session_timeout = 6 })
    local conf = assert(cl:config())
    local hosts = assert(H.core.config_hosts(conf))
    H.wait_until(function() return set_of(zk:servers()) == set_of(hosts) end,
      10, "the servers of the configuration")
    zk:close()
  end)
end)
