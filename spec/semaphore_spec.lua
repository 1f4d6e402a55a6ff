-- The semaphore and the semaphore mutex (Curator InterProcessSemaphoreV2's
-- nodes and protocol: docs/design.md, section 4.10), against a real
-- standalone ZooKeeper; mutual exclusion and lease counts across worker
-- processes (spec/workers/lease.lua) whose logged intervals are examined
-- afterwards.

local H = require "spec.helpers"
local zklock = H.zklock

-- specs whose waits yield (H.run): pending under PUC Lua 5.1
local it_yields = H.it_yields(it) -- (not under PUC Lua 5.1)
local run_workers = H.run_workers

describe("zklock recipes", function()
  local srv, zk, zk2
  local setup, teardown = H.fixture(function(s, a, b)
    srv, zk, zk2 = s, a, b
  end)
  lazy_setup(setup)
  lazy_teardown(teardown)

  describe("semaphore", function()
    local WORKERS, CYCLES, HOLD, N = 6, 8, 0.03, 3

    -- WORKERS processes x CYCLES leases of a semaphore of `n`: every
    -- interval, and the most that were held at once.
    local function lease_checker(n)
      local path = H.path("sem")
      local meet = H.tmpname("meet") -- a full house, by construction
      local jobs = {}
      for i = 1, WORKERS do
        jobs[i] = { "spec/workers/lease.lua", srv.connect_string, path, n,
          "$LOG", CYCLES, "$GATE", HOLD, meet }
      end
      local intervals = {}
      for _, text in ipairs(run_workers(jobs)) do
        for a, b in text:gmatch("(%S+) (%S+)") do
          intervals[#intervals + 1] = { tonumber(a), tonumber(b) }
        end
      end
      os.remove(meet)
      return intervals, H.max_overlap(intervals)
    end

    it(("%d processes share %d leases: never more, and %d at once")
        :format(WORKERS, N, N), function()
      local intervals, max = lease_checker(N)
      assert.equal(WORKERS * CYCLES, #intervals) -- every waiter was served
      assert.is_true(max <= N, "held at once: " .. max)
      assert.equal(N, max) -- really concurrent, not one at a time
    end)

    it("the checker catches one lease too many", function()
      -- the same workload with N+1 leases: the checker must see N+1 at once,
      -- so it would catch a semaphore that let one more in
      local intervals, max = lease_checker(N + 1)
      assert.equal(WORKERS * CYCLES, #intervals)
      assert.is_true(max > N, "held at once: " .. max)
    end)

    it("hands out lease objects; release by lease or newest", function()
      local path = H.path("sem")
      local sem = zk:semaphore(path, 2)
      assert.is_false(sem:is_held())
      assert.is_nil(sem:token())
      local l1 = assert(sem:acquire(5))
      local l2 = assert(sem:acquire(5))
      assert.is_true(l1:is_held() and l2:is_held())
      assert.matches("/_c_%x+%-%x+%-%x+%-%x+%-%x+%-lease%-%d+$", l1:node())
      assert.is_true(l2:token() > l1:token())
      assert.equal(l2:token(), sem:token()) -- the newest
      assert.same({ l1:node(), l2:node() }, sem:participants())
      -- full: a third (another session) waits and times out
      local other = zk2:semaphore(path, 2)
      local r, _, code = other:acquire(0.2)
      assert.is_nil(r)
      assert.equal("timeout", code)
      assert.is_true(sem:release()) -- the newest: l2
      assert.is_false(l2:is_held())
      assert.is_true(l1:is_held())
      local l3 = assert(other:acquire(5))
      assert.is_true(sem:release(l1))
      assert.is_false(sem:is_held())
      assert.has_error(function() sem:release() end)
      assert.has_error(function() l1:release() end) -- twice
      assert.is_true(l3:release())
      assert.same({}, sem:participants())
    end)

    it("release() without a lease picks the newest even after " ..
      "collections", function()
        local path = H.path("sem")
        local sem = zk:semaphore(path, 10)
        local keep = {}
        ;(function()
          for i = 1, 6 do
            local l = assert(sem:acquire(5))
            if i == 1 or i == 6 then keep[#keep + 1] = l end
          end
        end)()
        collectgarbage()
        collectgarbage()
        assert.is_true(sem:release())
        local newest_released = not keep[2]:is_held()
        local oldest_kept = keep[1]:is_held()
        if keep[1]:is_held() then keep[1]:release() end
        if keep[2]:is_held() then keep[2]:release() end
        H.wait_until(function() return #H.lock_nodes(zk, path) == 0 end, 10,
          "the collected leases' nodes to go")
        assert.is_true(newest_released, "the newest lease is still held")
        assert.is_true(oldest_kept, "the oldest lease was released")
      end)

    it("frees the node of a lease that is garbage-collected", function()
      local path = H.path("sem")
      local sem = zk:semaphore(path, 1)
      ;(function() assert(sem:acquire(5)) end)() -- dropped at once
      assert.equal(1, #H.lock_nodes(zk, path))
      collectgarbage()
      collectgarbage()
      H.wait_until(function() return #H.lock_nodes(zk, path) == 0 end, 10,
        "the collected lease's node to go")
      local other = zk2:semaphore(path, 1)
      local l = assert(other:acquire(5))
      l:release()
    end)

    if H.is54 then
      it("releases a lease at the end of a <close> scope (Lua 5.4)", function()
        local path = H.path("sem")
        local sem = zk:semaphore(path, 1)
        local f = assert(load([[
          local sem = ...
          do
            local l <close> = assert(sem:acquire(5))
            assert(l:is_held())
          end
          return sem:is_held()
        ]]))
        assert.is_false(f(sem))
        assert.same({}, sem:participants())
      end)
    end

    it("rejects a bad number of leases", function()
      local path = H.path("sem")
      for _, bad in ipairs({ 0, -1, 1.5, "2", false }) do
        local ok, err = pcall(zk.semaphore, zk, path, bad)
        assert.is_false(ok, tostring(bad))
        assert.truthy(tostring(err):find("bad argument #2 to 'semaphore' (",
          1, true), err)
      end
      local ok, err = pcall(zk.semaphore, zk, path) -- nil
      assert.is_false(ok)
      assert.truthy(err:find("bad argument #2 to 'semaphore' (", 1, true))
      assert.truthy(zk:semaphore(path, 1))
    end)

    -- Curator InterProcessSemaphoreV2's layout: acquirers queue on the
    -- internal lock <path>/locks; leases live under <path>/leases
    local function queued(c, path)
      local ok, names = pcall(H.children, c, path .. "/locks")
      return ok and #names or 0
    end

    -- Has client c's session made a lease and its watches (a lease node's
    -- self watch shows in wchc; the children watch on the leases, sent
    -- just before it, does not show: wchc lists data watches only)?
    local function waits_on_leases(c, path)
      for _, p in ipairs(H.watches_by_session(srv)[c:session_id()] or {}) do
        if p:find(path .. "/leases/", 1, true) == 1 then return true end
      end
      return false
    end

    it_yields("herd-free: only the acquirer holding the internal lock " ..
        "waits on the leases", function()
      local n, W = 2, 4
      local path = H.path("sem")
      local sem = zk:semaphore(path, n)
      local held = { assert(sem:acquire(5)), assert(sem:acquire(5)) }
      local clients, fns, served = {}, {}, 0
      for k = 1, W do
        clients[k] = H.connect(srv) -- one fresh session per waiter
        fns[k] = function()
          -- queue strictly one after the other
          while queued(zk, path) ~= k - 1 do coroutine.yield() end
          local l = assert(clients[k]:semaphore(path, n):acquire(30))
          served = served + 1
          l:release()
        end
      end
      local checked = false
      H.run(zk, fns, 30, function()
        if checked or queued(zk, path) ~= W or
            not waits_on_leases(clients[1], path) then
          return
        end
        -- all queued: the first waiter made its lease and waits on the
        -- leases; every other one only on the internal lock.  (A waiter's
        -- watches are set by requests behind its create: until the server
        -- shows both, look again at the next turn; checked must come.)
        local per = H.watches_by_session(srv)
        for k = 2, W do
          if #(per[clients[k]:session_id()] or {}) < 2 then return end
        end
        for k = 2, W do
          assert.is_false(waits_on_leases(clients[k], path))
          local w = per[clients[k]:session_id()] or {}
          assert.equal(2, #w) -- the node ahead of it, and its own
          for _, p in ipairs(w) do
            assert.equal(1, p:find(path .. "/locks/", 1, true))
          end
        end
        assert.equal(n + 1, #sem:participants()) -- n held, one waiting
        checked = true
        held[1]:release()
        held[2]:release()
      end)
      assert.is_true(checked)
      assert.equal(W, served)
      for k = 1, W do clients[k]:close() end
      assert.same({}, sem:participants())
    end)

    it_yields("a lease released out of order goes to a waiter at once",
        function()
      local n = 2
      local path = H.path("sem")
      local sem = zk:semaphore(path, n)
      local a = assert(sem:acquire(5))
      local b = assert(sem:acquire(5))
      local wz = H.connect(srv) -- fresh: its watches show in wchc
      local other = wz:semaphore(path, n)
      local got, phase, deadline = {}, "queue", nil
      local fns = {}
      for k = 1, 2 do
        fns[k] = function()
          while queued(zk, path) ~= k - 1 do coroutine.yield() end
          local l = assert(other:acquire(20))
          got[#got + 1] = { waiter = k, while_a_held = a:is_held() }
          while phase ~= "done" do coroutine.yield() end
          l:release()
        end
      end
      H.run(wz, fns, 30, function()
        if phase == "queue" and queued(zk, path) == 2 and
            waits_on_leases(wz, path) then
          -- a, b hold; w1 made its lease and waits; w2 waits behind it.
          -- b (not the oldest) goes: a lease is free
          b:release()
          phase, deadline = "freed", H.now() + 5
        elseif phase == "freed" and (got[1] or H.now() > deadline) then
          -- (after 5 s give up; a goes so that everyone finishes)
          phase = "done"
          a:release()
        end
      end)
      wz:close()
      assert.equal(2, #got) -- everyone served in the end
      -- the point: the first was served while `a` was still held
      assert.is_true(got[1].while_a_held,
        "the free lease stayed idle until the other holder released")
    end)
  end)

  -- -------------------------------------------------------------------------
  describe("semaphore_mutex", function()
    it("is not reentrant: the holder's second acquire waits", function()
      local path = H.path("smx")
      local sm = zk:semaphore_mutex(path)
      assert.equal(sm, sm:acquire(5))
      assert.matches("%-lease%-%d+$", sm:participants()[1])
      local t0 = H.now()
      local r, msg, code = sm:acquire(0.3) -- the same coroutine
      assert.is_nil(r)
      assert.equal("timeout", code)
      assert.is_string(msg)
      assert.is_true(H.now() - t0 >= 0.3)
      assert.is_true(sm:is_held())
      assert.equal(1, #sm:participants()) -- the failed attempt left nothing
      -- and another session is kept out too
      r, msg, code = zk2:semaphore_mutex(path):acquire(0.2)
      assert.is_string(msg)
      assert.is_nil(r)
      assert.equal("timeout", code)
      assert.is_true(sm:release())
      assert.same({}, sm:participants())
    end)

    it("may be released by another coroutine", function()
      local path = H.path("smx")
      local sm = zk:semaphore_mutex(path)
      assert(sm:acquire(5))
      local ok, r = coroutine.wrap(function()
        return pcall(sm.release, sm)
      end)()
      assert.is_true(ok, r)
      assert.is_true(r)
      assert.is_false(sm:is_held())
      assert.same({}, sm:participants())
      local other = zk2:semaphore_mutex(path)
      assert.equal(other, other:acquire(1))
      other:release()
    end)

    it("works with with_lock", function()
      local sm = zk:semaphore_mutex(H.path("smx"))
      local a, b = zklock.with_lock(sm, 5, function(x)
        assert.is_true(sm:is_held())
        return x * 2, "done"
      end, 21)
      assert.same({ 42, "done" }, { a, b })
      assert.is_false(sm:is_held())
      assert.same({}, sm:participants())
      local e = {}
      local ok, err = pcall(zklock.with_lock, sm, 5, function() error(e) end)
      assert.is_false(ok)
      assert.equal(e, err)
      assert.is_false(sm:is_held())
    end)
  end)

  -- -------------------------------------------------------------------------
end)
