-- The barrier and the double barrier, against a real standalone
-- ZooKeeper; members are worker processes (spec/workers/dbarrier.lua)
-- where the property is about several processes.

local H = require "spec.helpers"

local unpack = table.unpack or unpack
local run_workers = H.run_workers

local contains = H.contains

-- Member nodes of a double barrier are named by a bare uuid.
local function is_member(name)
  return name:match("^%x+%-%x+%-%x+%-%x+%-%x+$") ~= nil and #name == 36
end

describe("zklock recipes", function()
  local srv, zk, zk2
  local db_dirs, barrier_nodes = {}, {}
  -- what lock markers do not cover: double-barrier members and "ready"
  -- nodes, and the barriers' persistent nodes
  local function no_leftovers()
    local c = H.connect(srv)
    for _, dir in ipairs(db_dirs) do
      local left = H.children(c, dir)
      assert(#left == 0, "left under the double barrier " .. dir ..
        ": " .. table.concat(left, ", "))
    end
    for _, node in ipairs(barrier_nodes) do
      local parent, name = node:match("^(.*)/([^/]+)$")
      assert(not contains(H.children(c, parent), name),
        "barrier node left: " .. node)
    end
    c:close()
  end
  local setup, teardown = H.fixture(function(s, a, b)
    srv, zk, zk2 = s, a, b
  end, no_leftovers)
  lazy_setup(setup)
  lazy_teardown(teardown)

  local function watching(c, path) return H.watching(srv, c, path) end

  local function members(c, path)
    local n = 0
    for _, name in ipairs(H.children(c, path)) do
      if is_member(name) then n = n + 1 end
    end
    return n
  end

  describe("barrier", function()
    it("no waiter passes before remove, all pass after", function()
      local path = H.path("bar")
      barrier_nodes[#barrier_nodes + 1] = path
      local b = zk:barrier(path)
      assert.is_true(b:set())
      local W = 4
      local clients, passed, fns = {}, {}, {}
      for i = 1, W do
        clients[i] = H.connect(srv) -- fresh: their watches show in wchc
        fns[i] = function()
          assert.is_true(clients[i]:barrier(path):wait(20))
          passed[i] = H.now()
        end
      end
      local removed_at
      H.run(zk, fns, 30, function()
        if removed_at then return end
        for i = 1, W do
          if not watching(clients[i], path) then return end
        end
        -- everyone waits on the barrier: nobody is through
        assert.is_nil(next(passed))
        removed_at = H.now()
        assert.is_true(b:remove())
      end)
      assert.is_number(removed_at)
      for i = 1, W do
        assert.is_number(passed[i])
        assert.is_true(passed[i] >= removed_at)
        clients[i]:close()
      end
    end)

    it("wait times out with nil, 'timeout', 'timeout' while it stands",
        function()
      local path = H.path("bar")
      barrier_nodes[#barrier_nodes + 1] = path
      local b = zk:barrier(path)
      assert.is_true(b:wait(1)) -- never set: nothing to wait for
      assert.is_true(b:set())
      local t0 = H.now()
      local r, msg, code = zk2:barrier(path):wait(0.3)
      local took = H.now() - t0
      assert.same({ nil, "timeout", "timeout" }, { r, msg, code })
      assert.is_true(took >= 0.3 and took < 3, "took " .. took)
      assert.is_true(b:remove())
      assert.is_true(zk2:barrier(path):wait(1))
      assert.is_true(b:remove()) -- as Curator's: true when it is not there
    end)
  end)

  -- -------------------------------------------------------------------------
  describe("double barrier", function()
    it("3 member processes: nobody enters before all arrived, nobody " ..
       "leaves before all left", function()
      local path = H.path("dbar")
      db_dirs[#db_dirs + 1] = path
      local jobs = {}
      -- staggered: they arrive 0.4 s apart and leave in the reverse order
      for i = 1, 3 do
        jobs[i] = { "spec/workers/dbarrier.lua", srv.connect_string, path, 3,
          "$LOG", "$GATE", (i - 1) * 0.4, (3 - i) * 0.4 }
      end
      local t = { arrive = {}, entered = {}, leave = {}, left = {} }
      for _, text in ipairs(run_workers(jobs, 60)) do
        for what, at in text:gmatch("(%a+) (%S+)") do
          local list = t[what]
          list[#list + 1] = tonumber(at)
        end
      end
      for _, what in ipairs({ "arrive", "entered", "leave", "left" }) do
        assert.equal(3, #t[what], what)
      end
      local function max(l) return math.max(unpack(l)) end
      local function min(l) return math.min(unpack(l)) end
      assert.is_true(min(t.entered) >= max(t.arrive),
        "a member entered before the last arrived")
      assert.is_true(min(t.left) >= max(t.leave),
        "a member left before the last called leave")
      assert.same({}, H.children(zk, path)) -- members and ready gone
    end)

    it("a timed-out member, spurious events, then a 4th member after ready",
        function()
      local path = H.path("dbar")
      db_dirs[#db_dirs + 1] = path
      barrier_nodes[#barrier_nodes + 1] = path .. "/unrelated"
      local clients = {}
      for i = 1, 4 do clients[i] = H.connect(srv) end
      -- alone, a member gives up: its node goes with it
      local quitter = zk2:double_barrier(path, 3)
      local t0 = H.now()
      local r, msg, code = quitter:enter(0.3)
      assert.same({ nil, "timeout", "timeout" }, { r, msg, code })
      assert.is_true(H.now() - t0 >= 0.3)
      assert.equal(0, members(zk, path))

      local go, entered, left, called_leave = {}, {}, {}, {}
      local fns = {}
      for i = 1, 4 do
        fns[i] = function()
          while not go[i] do coroutine.yield() end
          local db = clients[i]:double_barrier(path, 3)
          assert.is_true(db:enter(20))
          entered[i] = H.now()
          while not go.leave do coroutine.yield() end
          called_leave[i] = H.now()
          assert.is_true(db:leave(20))
          left[i] = H.now()
        end
      end
      go[1], go[2] = true, true
      local phase, check_until, sent = "two", nil, nil
      H.run(zk, fns, 40, function()
        if phase == "two" then
          -- two of three are in and wait for "ready" with a children
          -- watch on the directory (the quitter's node must not count as
          -- the third).  (wchc lists data watches only: that each has sent
          -- its listing is what can be seen; an event before the watch is
          -- set shows in that listing instead, which is the same test)
          if members(zk, path) ~= 2 or clients[1]:_stats().requests < 2 or
              clients[2]:_stats().requests < 2 then return end
          sent = { clients[1]:_stats().requests, clients[2]:_stats().requests }
          -- spurious events: an unrelated node appears in the directory,
          -- and the connection drops (a restart: the sessions survive), so
          -- the members wake up without "ready"
          assert.is_true(zk:barrier(path .. "/unrelated"):set())
          srv:restart()
          phase = "reconnect"
        elseif phase == "reconnect" then
          -- back, and waiting for "ready" again
          if clients[1]:state() ~= "connected" or
              clients[2]:state() ~= "connected" or
              clients[1]:_stats().requests <= sent[1] or
              clients[2]:_stats().requests <= sent[2] then
            assert.is_nil(next(entered))
            return
          end
          phase, check_until = "spurious", H.now() + 0.3
        elseif phase == "spurious" then
          assert.is_nil(next(entered)) -- nobody through
          if H.now() > check_until then go[3], phase = true, "three" end
        elseif phase == "three" then
          if not (entered[1] and entered[2] and entered[3]) then return end
          assert.truthy(contains(H.children(zk, path), "ready"))
          go[4], phase = true, "four" -- more than `members` may enter
        elseif phase == "four" and entered[4] then
          go.leave, phase = true, "leave"
        end
      end)
      for i = 1, 4 do
        assert.is_number(entered[i])
        assert.is_number(left[i])
        -- none left before every member had called leave
        for j = 1, 4 do assert.is_true(left[i] >= called_leave[j]) end
      end
      assert.equal(0, members(zk, path))
      assert.falsy(contains(H.children(zk, path), "ready"))
      assert.is_true(zk:barrier(path .. "/unrelated"):remove())
      for i = 1, 4 do clients[i]:close() end
      assert.same({}, H.children(zk, path))
    end)

    it("a member dropped while entered gives its node back on collection",
       function()
      local path = H.path("dbgc")
      do
        local db = zk:double_barrier(path, 1)
        assert.is_true(db:enter(5))
        assert.equal(1, members(zk, path))
        assert.has_error(function() db:enter(1) end,
          "bad argument #1 to 'enter' (already entered " .. path .. ")")
      end
      collectgarbage()
      collectgarbage()
      H.wait_until(function() return members(zk, path) == 0 end, 10,
        "the dropped member's node to go")
      assert.is_true(zk:barrier(path .. "/ready"):remove())
    end)
  end)

  -- -------------------------------------------------------------------------
end)
