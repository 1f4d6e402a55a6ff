-- The recipes beyond the mutex, against a real standalone ZooKeeper:
-- semaphore, semaphore mutex, read/write lock, multi-lock, barrier, double
-- barrier and revocation.  Properties that are about several processes are
-- checked with worker processes (spec/workers/{lease,rw,multi,dbarrier}.lua)
-- whose logged intervals are examined afterwards; ordering inside one
-- process is checked with coroutines under H.run.

local H = require "spec.helpers"
local zklock = H.zklock

local unpack = table.unpack or unpack
-- specs whose waits yield (H.run): pending under PUC Lua 5.1
local it_yields = H.it_yields(it) -- (not under PUC Lua 5.1)
-- specs of callbacks given arguments: a known bug under PUC Lua 5.1

local run_workers = H.run_workers

local function overlaps(a, b) return a[1] < b[2] and b[1] < a[2] end

local function contains(list, x)
  for _, v in ipairs(list) do if v == x then return true end end
  return false
end

-- Member nodes of a double barrier are named by a bare uuid.
local function is_member(name)
  return name:match("^%x+%-%x+%-%x+%-%x+%-%x+$") ~= nil and #name == 36
end

describe("zklock recipes", function()
  local srv, zk, zk2
  local db_dirs, barrier_nodes = {}, {}

  -- a session that is only asked about through wchc: fresh, no stray watches
  local function watching(c, path)
    local w = H.watches_by_session(srv)[c:session_id()]
    return w ~= nil and contains(w, path)
  end

  local function members(c, path)
    local n = 0
    for _, name in ipairs(H.children(c, path)) do
      if is_member(name) then n = n + 1 end
    end
    return n
  end

  lazy_setup(function()
    srv = H.testing.server()
    zk = H.connect(srv)
    zk2 = H.connect(srv)
  end)

  lazy_teardown(function()
    local ok, err = true, nil
    if srv then
      ok, err = pcall(function()
        H.assert_no_orphans(srv)
        -- what lock markers do not cover: double-barrier members and
        -- "ready" nodes, and the barriers' persistent nodes
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
      end)
    end
    if zk then zk:close() end
    if zk2 then zk2:close() end
    if srv then srv:close() end
    if not ok then error(err, 0) end
  end)

  -- -------------------------------------------------------------------------
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
        -- leases; every other one only on the internal lock
        for k = 2, W do
          assert.is_false(waits_on_leases(clients[k], path))
          local w = H.watches_by_session(srv)[clients[k]:session_id()] or {}
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
  describe("rwlock", function()
    it("processes: readers share, a writer overlaps nobody", function()
      local path = H.path("rw")
      local meet = H.tmpname("meet") -- the 4 readers inside together first
      local jobs = {}
      for i = 1, 6 do
        jobs[i] = { "spec/workers/rw.lua", srv.connect_string, path,
          i <= 4 and "R" or "W", "$LOG", 8, "$GATE", 0.03, meet, 4 }
      end
      local reads, writes = {}, {}
      for _, text in ipairs(run_workers(jobs)) do
        for m, a, b in text:gmatch("(%u) (%S+) (%S+)") do
          local list = m == "R" and reads or writes
          list[#list + 1] = { tonumber(a), tonumber(b) }
        end
      end
      os.remove(meet)
      assert.equal(32, #reads)
      assert.equal(16, #writes)
      assert.is_true(H.max_overlap(reads) >= 2,
        "readers never held the lock together")
      for i, w in ipairs(writes) do
        for _, r in ipairs(reads) do
          assert.is_false(overlaps(w, r), "a writer overlapped a reader")
        end
        for j, w2 in ipairs(writes) do
          assert.is_true(i == j or not overlaps(w, w2), "writers overlapped")
        end
      end
      assert.same({}, H.lock_nodes(zk, path))
    end)

    it("uses Curator's node names", function()
      local path = H.path("rw")
      local rw = zk:rwlock(path)
      assert(rw.read:acquire(5))
      assert.matches("/_c_%x+%-%x+%-%x+%-%x+%-%x+%-__READ__%d+$",
        rw.read:node())
      rw.read:release()
      assert(rw.write:acquire(5))
      assert.matches("/_c_%x+%-%x+%-%x+%-%x+%-%x+%-__WRIT__%d+$",
        rw.write:node())
      rw.write:release()
    end)

    it_yields("a waiting writer holds back a reader that comes after it",
        function()
      local path = H.path("rw")
      local rw1 = zk:rwlock(path)
      local wc, rc = H.connect(srv), H.connect(srv) -- fresh: watched via wchc
      local rww, rwr = wc:rwlock(path), rc:rwlock(path)
      assert(rw1.read:acquire(5)) -- R1 holds
      local order = {}
      local fns = {
        function() -- W queues behind R1
          assert(rww.write:acquire(20))
          order[#order + 1] = "W in"
          order[#order + 1] = "W out"
          rww.write:release()
        end,
        function() -- R2 comes after W
          while #rw1:participants() ~= 2 do coroutine.yield() end
          assert(rwr.read:acquire(20))
          order[#order + 1] = "R2 in"
          rwr.read:release()
        end,
      }
      local released = false
      H.run(zk, fns, 30, function()
        if released or #rw1:participants() ~= 3 then return end
        local parts = rw1:participants()
        -- R2 waits: it watches the writer (not R1), and W watches R1
        H.wait_until(function()
          return watching(rc, parts[2]) and watching(wc, parts[1])
        end, 10, "R2 watching the waiting writer")
        assert.is_nil(order[1])
        released = true
        order[#order + 1] = "R1 out"
        rw1.read:release()
      end)
      assert.same({ "R1 out", "W in", "W out", "R2 in" }, order)
      wc:close(); rc:close()
    end)

    it("downgrade: the write holder takes the read lock, then lets go of " ..
       "writing", function()
      local path = H.path("rw")
      local rw, other = zk:rwlock(path), zk2:rwlock(path)
      assert(rw.write:acquire(5))
      assert.equal(rw.read, rw.read:acquire(1)) -- at once, no self-deadlock
      assert.is_true(rw.read:is_held() and rw.write:is_held())
      assert.is_true(rw.write:release())
      assert.is_true(rw.read:is_held())
      -- now a plain reader: readers join, writers wait
      assert(other.read:acquire(1))
      other.read:release()
      local r, _, code = other.write:acquire(0.3)
      assert.is_nil(r)
      assert.equal("timeout", code)
      assert.is_true(rw.read:release())
      assert(other.write:acquire(2))
      other.write:release()
      assert.same({}, rw.read:participants())
    end)

    it_yields("downgrade does not deadlock with another writer queued",
        function()
      local path = H.path("rw")
      local rw, other = zk:rwlock(path), zk2:rwlock(path)
      assert(rw.write:acquire(5))
      local w2_in = false
      local downgraded = false
      H.run(zk2, {
        function()
          assert(other.write:acquire(20))
          w2_in = true
          other.write:release()
        end,
      }, 30, function()
        if downgraded or #rw.write:participants() ~= 2 then return end
        -- W2 queued behind us: taking the read lock must not wait for it
        local t0 = H.now()
        assert.equal(rw.read, rw.read:acquire(2))
        assert.is_true(H.now() - t0 < 1)
        assert.is_true(rw.write:release())
        assert.is_true(rw.read:release())
        downgraded = true
      end)
      assert.is_true(downgraded)
      assert.is_true(w2_in) -- and the queued writer got its turn
      assert.same({}, rw.read:participants())
    end)

    it_yields("downgrade: a queued writer waits for the downgraded reader",
        function()
        local path = H.path("rw")
        local rw, other = zk:rwlock(path), zk2:rwlock(path)
        assert(rw.write:acquire(5))
        local order, phase, until_t = {}, "queue", nil
        H.run(zk2, {
          function()
            assert(other.write:acquire(20))
            order[#order + 1] = "W2 in"
            other.write:release()
            while phase ~= "done" do coroutine.yield() end
          end,
        }, 30, function()
          if phase == "queue" and #rw.write:participants() == 2 then
            assert(rw.read:acquire(2))
            assert(rw.write:release())
            order[#order + 1] = "downgraded"
            phase, until_t = "reading", H.now() + 0.5
          elseif phase == "reading" and H.now() > until_t then
            -- still reading: W2 must not have come in meanwhile
            order[#order + 1] = "R1 out"
            rw.read:release()
            phase = "done"
          end
        end)
        if rw.read:is_held() then rw.read:release() end
        assert.same({ "downgraded", "R1 out", "W2 in" }, order)
      end)

    it("upgrade raises: release the read lock first", function()
      local path = H.path("rw")
      local rw = zk:rwlock(path)
      assert(rw.read:acquire(5))
      local ok, err = pcall(rw.write.acquire, rw.write, 1)
      assert.is_false(ok)
      assert.matches("release the read lock first", err)
      assert.is_false(rw.write:is_held())
      assert.equal(1, #rw.read:participants()) -- no write node was made
      assert.is_true(rw.read:release())
      -- reentrant per coroutine, both kinds
      assert(rw.write:acquire(5)); assert(rw.write:acquire(5))
      assert.equal(1, #rw.write:participants())
      rw.write:release(); rw.write:release()
      assert.same({}, rw.write:participants())
    end)
  end)

  -- -------------------------------------------------------------------------
  describe("multilock", function()
    it("two processes taking {A,B} and {B,A} 50 times each both finish",
        function()
      local pa, pb = H.path("multiA"), H.path("multiB")
      local texts = run_workers({
        { "spec/workers/multi.lua", srv.connect_string, pa, pb, "AB", "$LOG",
          50, "$GATE" },
        { "spec/workers/multi.lua", srv.connect_string, pa, pb, "BA", "$LOG",
          50, "$GATE" },
      }, 60)
      local intervals = {}
      for _, text in ipairs(texts) do
        for a, b in text:gmatch("(%S+) (%S+)") do
          intervals[#intervals + 1] = { tonumber(a), tonumber(b) }
        end
      end
      assert.equal(100, #intervals)
      assert.equal(1, H.max_overlap(intervals)) -- both locks: one at a time
    end)

    it("(the workload deadlocks when the locks are taken in the given order)",
        function()
      -- the same two workers, taking the mutexes one by one as given: the
      -- checker above is only meaningful if this can deadlock
      local pa, pb = H.path("multiA"), H.path("multiB")
      local texts = run_workers({
        { "spec/workers/multi.lua", srv.connect_string, pa, pb, "AB", "$LOG",
          50, "$GATE", "naive" },
        { "spec/workers/multi.lua", srv.connect_string, pa, pb, "BA", "$LOG",
          50, "$GATE", "naive" },
      }, 60)
      assert.truthy((texts[1] .. texts[2]):find("deadlock"),
        "the naive order never deadlocked")
    end)

    it("holds all or nothing: a timeout leaves nothing held", function()
      local pa, pb = H.path("multiA"), H.path("multiB")
      local a, b = zk:mutex(pa), zk:mutex(pb)
      local ml = zk:multilock({ b, a })
      -- the other session holds, in turn, the lock taken last and first
      for _, busy in ipairs({ pb, pa }) do
        local holder = zk2:mutex(busy)
        assert(holder:acquire(5))
        local t0 = H.now()
        local r, msg, code = ml:acquire(0.3)
        local took = H.now() - t0
        assert.is_nil(r)
        assert.equal("timeout", code)
        assert.is_string(msg)
        assert.is_true(took >= 0.3 and took < 3, "took " .. took)
        assert.is_false(ml:is_held())
        assert.is_nil(ml:token())
        assert.is_false(a:is_held())
        assert.is_false(b:is_held())
        assert.same({ holder:node() }, H.lock_nodes(zk, busy))
        local free = busy == pa and pb or pa
        assert.same({}, H.lock_nodes(zk, free))
        holder:release()
      end
      -- free: both, tokens and participants per lock
      assert.equal(ml, ml:acquire(5))
      assert.is_true(ml:is_held())
      local tokens = ml:token()
      assert.equal(2, #tokens)
      assert.is_number(tokens[1])
      local parts = ml:participants()
      assert.same({ a:node() }, parts[pa])
      assert.same({ b:node() }, parts[pb])
      assert.is_true(ml:release())
      assert.is_false(a:is_held() or b:is_held())
    end)

    it_yields("has one deadline for the whole set", function()
      local pa, pb = H.path("multiA"), H.path("multiB")
      local first, second = pa < pb and pa or pb, pa < pb and pb or pa
      local h1, h2 = zk2:mutex(first), zk2:mutex(second)
      assert(h1:acquire(5)); assert(h2:acquire(5))
      local ml = zk:multilock({ zk:mutex(pa), zk:mutex(pb) })
      local result, took, t0
      H.run(zk, {
        function()
          t0 = H.now()
          result = { ml:acquire(0.9) }
          took = H.now() - t0
        end,
      }, 20, function()
        -- the first lock frees up after 0.6 s; the second never does
        if t0 and h1:is_held() and H.now() - t0 > 0.6 then h1:release() end
      end)
      assert.is_nil(result[1])
      assert.equal("timeout", result[3])
      -- 0.9 s in all, not 0.6 s + 0.9 s for the second lock
      assert.is_true(took >= 0.9 and took < 1.35, "took " .. took)
      assert.is_false(ml:is_held())
      h2:release()
      assert.same({}, H.lock_nodes(zk, pa))
      assert.same({}, H.lock_nodes(zk, pb))
    end)
  end)

  -- -------------------------------------------------------------------------
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
      end
      collectgarbage()
      collectgarbage()
      H.wait_until(function() return members(zk, path) == 0 end, 10,
        "the dropped member's node to go")
      assert.is_true(zk:barrier(path .. "/ready"):remove())
    end)
  end)

  -- -------------------------------------------------------------------------
  describe("revocation", function()
    it("runs the callback once per request, in Lua, inside " ..
        "dispatch",
        function()
      local path = H.path("revoke")
      local m = zk:mutex(path)
      local calls, in_dispatch, got_lock = 0, {}, {}
      local release_next = false
      m:on_revoke(function(l)
        calls = calls + 1
        got_lock[calls] = l
        in_dispatch[calls] = debug.traceback():find("dispatch") ~= nil
        if release_next then assert.is_true(l:release()) end
      end)
      assert(m:acquire(5))
      assert.equal(1, zklock.revoke(zk2, path))
      assert.equal(0, calls) -- queued, not run on a ZooKeeper thread
      assert.equal(1, zk:dispatch(5))
      assert.equal(1, calls)
      assert.equal(m, got_lock[1])
      assert.is_true(in_dispatch[1])
      assert.equal(0, zk:dispatch(0.3)) -- once per request
      assert.is_true(m:is_held()) -- the callback did not release
      -- a second request: a second call
      assert.equal(1, zklock.revoke(zk2, path))
      assert.equal(1, zk:dispatch(5))
      assert.equal(2, calls)
      assert.equal(0, zk:dispatch(0.3))
      -- a third, whose callback releases the lock for the holder
      release_next = true
      assert.equal(1, zklock.revoke(zk2, path))
      assert.equal(1, zk:dispatch(5))
      assert.equal(3, calls)
      assert.is_false(m:is_held())
      assert.same({}, m:participants())
      local other = zk2:mutex(path)
      assert.equal(other, other:acquire(1))
      other:release()
    end)

    it_yields("release inside the callback acts for the holding coroutine",
        function()
      local path = H.path("revoke")
      local m = zk:mutex(path):on_revoke(function(l)
        assert.is_true(l:release())
      end)
      local phase, ran = "start", 0
      H.run(zk, {
        function()
          assert(m:acquire(5))
          phase = "holding"
          while m:is_held() do coroutine.yield() end -- until revoked
        end,
      }, 20, function()
        if phase == "holding" then
          -- the main coroutine does not hold it; the callback still may
          assert.is_false(m:is_held())
          assert.equal(1, zklock.revoke(zk2, path))
          phase = "asked"
        elseif phase == "asked" then
          ran = ran + zk:dispatch(0.05)
        end
      end)
      assert.equal(1, ran)
      assert.same({}, m:participants())
    end)

    it("reaches semaphore holders on Curator's leases", function()
      local path = H.path("revoke")
      -- a semaphore mutex's holder hears it, like a mutex's
      local sm = zk:semaphore_mutex(path):on_revoke(function(l)
        assert.is_true(l:release())
      end)
      assert(sm:acquire(5))
      assert.equal(1, zklock.revoke(zk2, path))
      assert.equal(1, zk:dispatch(5))
      assert.is_false(sm:is_held())
      assert.same({}, sm:participants())
      -- the holders of a semaphore of 2: both leases are asked
      local spath = H.path("revoke")
      local sem = zk:semaphore(spath, 2)
      local a, b = assert(sem:acquire(5)), assert(sem:acquire(5))
      assert.equal(2, zklock.revoke(zk2, spath, 2))
      for _, l in ipairs { a, b } do
        assert.equal("__REVOKE__", (zk2:get(l:node())))
      end
      assert.is_true(a:release())
      assert.is_true(b:release())
      assert.equal(0, zklock.revoke(zk2, spath, 2))
    end)

    it("revoke returns 0 for a free lock", function()
      local path = H.path("revoke")
      assert.equal(0, zklock.revoke(zk2, path)) -- never used
      local m = zk:mutex(path)
      assert(m:acquire(5)); m:release()
      assert.equal(0, zklock.revoke(zk2, path)) -- used, free again
    end)
  end)
end)
