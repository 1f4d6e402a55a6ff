-- The read/write lock and the multi-lock, against a real standalone
-- ZooKeeper; properties about several processes are checked with worker
-- processes (spec/workers/{rw,multi}.lua) whose logged intervals are
-- examined afterwards; ordering inside one process with coroutines under
-- H.run.

local H = require "spec.helpers"

local it_yields = H.it_yields(it) -- (not under PUC Lua 5.1)
local run_workers = H.run_workers

local function overlaps(a, b) return a[1] < b[2] and b[1] < a[2] end

describe("zklock recipes", function()
  local srv, zk, zk2
  local setup, teardown = H.fixture(function(s, a, b)
    srv, zk, zk2 = s, a, b
  end)
  lazy_setup(setup)
  lazy_teardown(teardown)

  local function watching(c, path) return H.watching(srv, c, path) end

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
      if H.is54 then -- <close> releases it
        assert.is_false(assert(load([[
          local ml = ...
          do local held <close> = assert(ml:acquire(5)) end
          return ml:is_held()
        ]]))(ml))
        assert.same({}, H.lock_nodes(zk, pa))
      end
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
end)
