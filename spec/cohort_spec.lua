-- Lock cohorts (docs/design.md, section 16): the waiters of one client on
-- one mutex or write lock queue locally in front of one node, and a
-- release passes the hold to the next of them with no request, up to
-- `pass_limit` passes once a remote contender is seen.  Exclusion across
-- processes with cohorts (shared and per-request objects, faults): the
-- chaos run (spec/chaos_spec.lua) and the event-loop checker
-- (spec/loops_spec.lua), whose processes run several coroutines each.
local H = require "spec.helpers"
local it_yields = H.it_yields(it)

describe("lock cohorts", function()
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

  -- The server's last zxid (srvr): its write transactions so far, within
  -- one epoch.
  local function zxid()
    local hex = (srv:four_letter("srvr") or ""):match("Zxid: 0x(%x+)")
    return tonumber(hex, 16)
  end

  -- (inside H.run: wait for cond, yielding to the other coroutines)
  local function yield_until(cond, secs)
    local deadline = H.now() + (secs or 10)
    while not cond() do
      assert(H.now() < deadline, "timed out waiting for a condition")
      coroutine.yield()
    end
  end

  -- Coroutines driven by hand (not H.run: it resumes every one each round,
  -- and each wait in them runs zk's callbacks): zklock's waits yield in a
  -- coroutine, block in the main one, until the spec ends.
  local function by_hand()
    H.zklock.set_waiter(function(cl, gen, t)
      local co, ismain = coroutine.running()
      if co and not ismain then coroutine.yield() else cl:_wait(gen, t) end
    end)
    finally(function() H.zklock.set_waiter(nil) end)
  end
  local function step(co)
    local ok, err = coroutine.resume(co)
    if not ok then error(debug.traceback(co, err), 0) end
  end
  -- resume the coroutines until all have ended (bounded)
  local function finish(cos)
    H.wait_until(function()
      local live = false
      for _, co in ipairs(cos) do
        if coroutine.status(co) == "suspended" then step(co) end
        live = live or coroutine.status(co) ~= "dead"
      end
      return not live
    end, 30, "the coroutines to end")
  end

  -- Two round trips on the session of `client` that run none of its
  -- callbacks (an op polled by hand): a watch event the server sent it
  -- before them has been handled after the first, and the read C sent on
  -- that event answered before the second.  So a revocation written (by
  -- another session) before is queued in C, its callback not run.
  local function settle(client)
    for _ = 1, 2 do
      local op = assert(client:_children("/zklock-spec", "all"))
      H.wait_until(function() return op:poll() == "done" end, 10,
        "a round trip")
    end
  end

  it_yields("queues a client's waiters in front of one node, FIFO, and " ..
     "passes the hold with no request", function()
    local path = H.path("cohort")
    local holder = zk2:mutex(path)
    assert(holder:acquire(5))
    local N = 40
    local shared = zk:mutex(path)
    local order, fns, tokens = {}, {}, {}
    for i = 1, N do
      fns[i] = function()
        -- (half on the shared object, half on objects of their own: one
        -- cohort either way)
        local m = i % 2 == 0 and shared or zk:mutex(path)
        yield_until(function() return shared:local_waiters() == i - 1 end)
        assert(m:acquire(30))
        order[#order + 1] = i
        tokens[#tokens + 1] = { m:token() }
        assert(m:release())
      end
    end
    local kinds0 = zk:stats().kinds.mutex or { acquires = 0, passes = 0 }
    local most, r0 = 0, nil
    H.run(zk, fns, 60, function()
      local n = #nodes(path)
      most = math.max(most, n)
      -- all queued: the holder's node and one of ours
      if not r0 and shared:local_waiters() == N and n == 2 then
        r0 = zxid()
        holder:release()
      end
    end)
    local writes = zxid() - r0
    assert.equal(2, most)
    local order_expected = {}
    for i = 1, N do order_expected[i] = i end
    assert.same(order_expected, order)
    -- one node for them all: the first hold came through ZooKeeper, the
    -- other N - 1 were passed: the server wrote the holder's delete and
    -- our node's, not N creates and deletes
    assert.is_true(writes <= 3, "write transactions: " .. writes)
    -- metrics: the passes counted apart, of the acquires
    local kinds = zk:stats().kinds.mutex
    assert.equal(N, kinds.acquires - kinds0.acquires)
    assert.equal(N - 1, kinds.passes - kinds0.passes)
    assert.is_nil(tokens[1][2]) -- (the hold that took the node: pass 0)
    for i = 2, N do
      assert.equal(tokens[1][1], tokens[i][1])
      assert.equal(i - 1, tokens[i][2]) -- the pass
    end
    assert.same({}, nodes(path))
  end)

  it_yields("cohort = false gives each waiter a node of its own", function()
    local path = H.path("nocohort")
    local holder = zk2:mutex(path)
    assert(holder:acquire(5))
    local m = zk:mutex(path, { cohort = false })
    local fns, seen = {}, nil
    for i = 1, 4 do
      fns[i] = function() assert(m:acquire(30)); assert(m:release()) end
    end
    H.run(zk, fns, 30, function()
      if not seen and #nodes(path) == 5 then
        seen = m:local_waiters()
        holder:release()
      end
    end)
    assert.equal(0, seen)
    -- a client's default: off for every lock it makes
    local zk3 = assert(H.zklock.connect(srv.connect_string,
      { cohort = false }))
    local m3 = zk3:mutex(path)
    assert(m3:acquire(5))
    assert.equal(0, m3:local_waiters())
    assert(m3:release())
    zk3:close()
  end)

  it_yields("a remote contender waits at most pass_limit local passes",
      function()
    local path = H.path("fair")
    local LIMIT = 3
    local remote = zk2:mutex(path)
    local probe = zk:mutex(path, { pass_limit = LIMIT })
    local last, holds, stop = {}, {}, false
    local listed, remote_held
    local fns = {}
    for i = 1, 4 do
      fns[i] = function()
        local m = zk:mutex(path, { pass_limit = LIMIT })
        while not stop do
          assert(m:acquire(30))
          local token, pass = m:token()
          last[token] = math.max(last[token] or 0, pass or 0)
          holds[#holds + 1] = { token, pass or 0 }
          coroutine.yield() -- (the hold spans a round)
          assert(m:release())
        end
      end
    end
    fns[#fns + 1] = function()
      -- once the locals pass the hold around, queue from another client
      yield_until(function() return #holds >= 3 end)
      assert(remote:acquire(30))
      remote_held = true
      stop = true
      assert(remote:release())
    end
    H.run(zk, fns, 60, function()
      -- the remote node, listed through the cohort's own session: its
      -- watch event came first, so the cohort has seen it; the node and
      -- pass the cohort is at then
      if not listed and not remote_held and #H.lock_nodes(zk, path) == 2 then
        local st = require("zklock.lock.cohort").stats(H.core.unbox(probe))
        listed = { token = st.token, seq = st.pass }
      end
    end)
    assert.is_table(listed)
    assert.is_true(remote_held)
    -- passes of that node made after the listing, before the remote held
    local passed = (last[listed.token] or 0) - listed.seq
    assert.is_true(passed <= LIMIT,
      ("%d local passes after the remote contender queued"):format(passed))
    -- tokens: (czxid, pass) pairs increase
    for k = 2, #holds do
      local a, b = holds[k - 1], holds[k]
      assert.is_true(b[1] > a[1] or (b[1] == a[1] and b[2] > a[2]))
    end
  end)

  it_yields("hands the value written with a release to the next holder " ..
     "that reads it, with no request", function()
    local path, node = H.path("cohort-guard"), H.path("cohort-guarded")
    local m1, m2 = zk:mutex(path), zk:mutex(path)
    local got, requests, first, r0
    H.run(zk, {
      function()
        assert(m1:acquire(5, { read = node }))
        first = true
        yield_until(function() return m1:local_waiters() == 1 end)
        assert(m1:release({ write = node, data = "from the first" }))
        r0 = zk:stats().requests
        -- passed on: the first's hold has ended, its fenced writes are
        -- refused here, before any request
        assert.is_false(m1:is_held())
        assert.has_error(function() m1:fenced_set(node, "stale") end)
      end,
      function()
        yield_until(function() return first end)
        local _, data, version = assert(m2:acquire(20, { read = node }))
        requests = zk:stats().requests - r0
        got = { data, version }
        assert(m2:release())
      end,
    }, 30)
    -- (from the first's release on: no request, no read)
    assert.same({ "from the first", 0 }, got)
    assert.equal(0, requests)
    assert.same({ "from the first", 0 }, { zk:get(node) })
  end)

  it_yields("hands on only the last holder's write: a hold in between " ..
     "that wrote otherwise leaves nothing to hand on", function()
    -- (the chaos run found it: a stale value handed on, a lost update)
    local path, node = H.path("cohort-stale"), H.path("cohort-stale-data")
    local a, b, c = zk:mutex(path), zk:mutex(path), zk:mutex(path)
    local got
    H.run(zk, {
      function()
        assert(a:acquire(5, { read = node }))
        yield_until(function() return a:local_waiters() == 2 end)
        assert(a:release({ write = node, data = "1" }))
      end,
      function()
        coroutine.yield()
        assert(b:acquire(20))
        assert(b:fenced_set(node, "2"))
        assert(b:release())
      end,
      function()
        coroutine.yield()
        coroutine.yield()
        local _, data = assert(c:acquire(20, { read = node }))
        got = data
        assert(c:release())
      end,
    }, 30)
    assert.equal("2", got)
  end)

  it_yields("a holder past its max_hold lets the next waiter hold, on a " ..
     "new node", function()
    local path = H.path("cohort-maxhold")
    local stuck, next_ = zk:mutex(path), zk:mutex(path)
    local t1, t2, rel
    H.run(zk, {
      function()
        assert(stuck:acquire(5, { max_hold = 0.3 }))
        t1 = stuck:token()
        yield_until(function() return t2 ~= nil end)
        rel = { stuck:release() }
      end,
      function()
        yield_until(function() return t1 ~= nil end)
        assert(next_:acquire(20))
        t2 = next_:token()
        assert(next_:release())
      end,
    }, 30)
    assert.is_true(t2 > t1)
    assert.same({ nil, "lock lost", "lock_lost" }, rel)
  end)

  it_yields("a write with a release that will pass, applied while the " ..
     "hold ended, answers true, never lock_lost", function()
    -- (issue 32, defect 1) the release writes with fenced_set, waits,
    -- then releases; here the hold passes the max_hold it was passed with
    -- during that wait: the server is paused, so the write is answered
    -- only after C has ended the hold, and applied (our node's delete is
    -- sent behind it)
    local path, node = H.path("cohort-write-ended"),
      H.path("cohort-write-ended-data")
    assert(zk:set(node, "before")) -- (one multi: check our node, set)
    local a, b, c = zk:mutex(path), zk:mutex(path), zk:mutex(path)
    local ready, paused, resumed, b_lost, rel = false, false, false, false
    b:on_lost(function() b_lost = true end)
    finally(function() if paused and not resumed then srv:resume() end end)
    H.run(zk, {
      function()
        assert(a:acquire(5))
        yield_until(function() return a:local_waiters() == 2 end)
        ready = true
        yield_until(function() return paused end)
        -- passed to b with no request; b's max_hold runs from here
        assert(a:release())
      end,
      function()
        assert(b:acquire(20, { max_hold = 0.5 }))
        -- (c waits behind: the release will pass)
        rel = { b:release({ write = node, data = "from b" }) }
      end,
      function()
        coroutine.yield()
        assert(c:acquire(20))
        assert(c:release())
      end,
    }, 30, function()
      if ready and not paused then
        srv:pause()
        paused = true
      elseif paused and b_lost and not resumed then
        -- (C ended b's hold while its write waited for an answer)
        srv:resume()
        resumed = true
      end
    end)
    local data, version = zk:get(node)
    assert.equal("from b", data) -- applied
    assert.is_true(rel[1] == true, ("the write was applied, yet the " ..
      "release answered %s, %s, %s"):format(tostring(rel[1]),
      tostring(rel[2]), tostring(rel[3])))
    assert.equal(version, rel[2])
    assert.same({}, nodes(path))
  end)

  it_yields("a hold passed on and ended in C before its waiter ran is not " ..
     "returned by the acquire", function()
    -- (issue 32, defect 6) w's max_hold runs from the pass; C ends the
    -- hold before w runs, and its node's delete waits for an answer (the
    -- server is paused): "pending" to att:poll().  Under zklock.ngx the
    -- lost event runs in its timer, not in w's wait: here it is taken from
    -- C and kept until the end.
    local path = H.path("cohort-passed-ended")
    local h, w = zk:mutex(path), zk:mutex(path)
    local res, held_after, rel
    local paused, evs = false, {}
    finally(function() if paused then srv:resume() end end)
    by_hand()
    assert(h:acquire(5))
    local co = coroutine.create(function()
      res = { w:acquire(20, { max_hold = 0.2 }) }
      held_after = w:is_held()
      if res[1] then rel = { w:release() } end
    end)
    step(co) -- queued in the cohort, behind h's hold
    assert.equal(1, h:local_waiters())
    srv:pause()
    paused = true
    assert(h:release()) -- passed to w, with no request
    H.wait_until(function()
      for _, ev in ipairs(zk:_events() or {}) do evs[#evs + 1] = ev end
      for _, ev in ipairs(evs) do
        if ev[1] == "lost" then return true end
      end
    end, 10, "C to end the passed hold")
    step(co) -- w runs
    srv:resume()
    paused = false
    finish({ co })
    require("zklock.rt.events").dispatch(zk, evs)
    assert.is_nil(res[1], ("the acquire returned the lock; then " ..
      "is_held() %s, release() %s"):format(tostring(held_after),
      tostring(rel and rel[3])))
    assert.equal("lock_lost", res[3])
    assert.same({}, nodes(path))
  end)

  it_yields("a leader that times out leaves the node to the next waiter",
      function()
    local path = H.path("cohort-leader")
    local holder = zk2:mutex(path)
    assert(holder:acquire(5))
    local a, b = zk:mutex(path), zk:mutex(path)
    local res_a, node_b, max_nodes = nil, nil, 0
    H.run(zk, {
      function() res_a = { a:acquire(0.5) } end,
      function()
        yield_until(function() return a:local_waiters() == 1 end)
        assert(b:acquire(20))
        node_b = b:node()
        assert(b:release())
      end,
    }, 30, function()
      max_nodes = math.max(max_nodes, #nodes(path))
      if res_a and holder:is_held() then holder:release() end
    end)
    assert.equal("timeout", res_a[3])
    assert.is_string(node_b)
    assert.equal(2, max_nodes) -- the holder's, and the cohort's one
  end)

  it_yields("a held lock collected without a release passes to the next " ..
     "waiter", function()
    local path = H.path("cohort-gc")
    local got
    H.run(zk, {
      function()
        local m = zk:mutex(path)
        assert(m:acquire(5))
        yield_until(function() return m:local_waiters() == 1 end)
        m = nil -- luacheck: ignore (dropped while held)
      end,
      function()
        local other = zk:mutex(path)
        coroutine.yield()
        got = other:acquire(20)
        assert(other:release())
      end,
    }, 30, function() collectgarbage() end)
    assert.is_truthy(got)
    assert.same({}, nodes(path))
  end)

  -- H.run over named coroutines, resumed in `order` each round, which
  -- tick() may drop (cos[name] = nil: nothing refers to it any more, as
  -- to a request nginx finalized while it waited); tick() returning true
  -- ends the run.
  local function run_dropping(order, cos, timeout, tick)
    H.zklock.set_waiter(function(c, gen, t)
      local co, ismain = coroutine.running()
      if co and not ismain then coroutine.yield() else c:_wait(gen, t) end
    end)
    local deadline = H.now() + timeout
    local ok, err = pcall(function()
      while true do
        local live = 0
        local _, gen = zk:_poll()
        for _, name in ipairs(order) do
          local co = cos[name]
          if co and coroutine.status(co) == "suspended" then
            local okr, e = coroutine.resume(co)
            if not okr then error(debug.traceback(co, e), 0) end
          end
          if co and coroutine.status(co) ~= "dead" then live = live + 1 end
        end
        if live == 0 or tick() then return end
        assert(H.now() < deadline, "coroutines did not finish")
        zk:_wait(gen, 0.05)
      end
    end)
    H.zklock.set_waiter(nil)
    collectgarbage("restart")
    if not ok then error(err, 2) end
  end

  for _, behind in ipairs { true, false } do
    it_yields("a hold handed on while the collector finalizes the first " ..
       "waiter's sentinel goes to the next live waiter, or the node goes " ..
       "(issue 32, defect 4; " .. (behind and "a waiter behind it)" or
       "nobody behind it)"), function()
      -- The race, made deterministic.  Waiter w queues first, x behind it
      -- (or nobody), and then w's coroutine is dropped while it waits (a
      -- request nginx finalized before it ran): its sentinel is garbage,
      -- and the collector is stopped so that nothing finalizes it early.
      -- The holder h then releases.  The release chooses w, the head, to
      -- hand on to, and asks the attempt whether contenders came
      -- (att:contenders(), which pushes a string when the directory
      -- changed: the collector may take a step right there).  A call hook
      -- on that C function, in h's release only, runs a full collection
      -- at that very point: w's sentinel's finalizer runs between the
      -- choice of w and its grant.  It marks w gone and fires x, or, with
      -- nobody behind, lets the node go.  The grant must not go to w:
      -- before the fix it did (x saw a holder, waited, and timed out; the
      -- node stayed, held by nobody), or the release raised, its node gone
      -- under it.
      local path = H.path("cohort-gc-head")
      local m1, m2, m3 = zk:mutex(path), zk:mutex(path), zk:mutex(path)
      local contenders =
        debug.getregistry()["zklock.attempt"].__index.contenders
      local held, release, rel, res_x, collected
      local gone = setmetatable({}, { __mode = "v" }) -- w's coroutine
      local cos = {
        h = coroutine.create(function()
          assert(m1:acquire(5))
          held = true
          while not release do coroutine.yield() end
          debug.sethook(function()
            if debug.getinfo(2, "f").func == contenders then
              collectgarbage()
              -- (w's coroutine, and so its sentinel, collected here)
              if collected == nil then collected = gone[1] == nil end
            end
          end, "c")
          rel = { m1:release() }
          debug.sethook()
          collectgarbage("restart")
        end),
        w = coroutine.create(function() m2:acquire(30) end),
        x = behind and coroutine.create(function()
          res_x = { m3:acquire(5) }
          if res_x[1] then assert(m3:release()) end
        end) or nil,
      }
      gone[1] = cos.w
      run_dropping({ "h", "w", "x" }, cos, 30, function()
        if held and not release and
            m1:local_waiters() == (behind and 2 or 1) then
          collectgarbage("stop")
          cos.w = nil -- (w waits, queued first; nothing refers to it now)
          release = true
        end
      end)
      assert.is_true(collected, "w's sentinel was not finalized in the " ..
        "hand-on: the race was not forced")
      assert.same({ true }, rel)
      if behind then assert.equal(m3, res_x[1], tostring(res_x[2])) end
      assert.same({}, nodes(path))
    end)
  end

  it_yields("a revoked hold is not passed: the revoker holds next",
      function()
    local path = H.path("cohort-revoke")
    local order = {}
    local m, w = zk:mutex(path), zk:mutex(path)
    m:on_revoke(function(l) order[#order + 1] = "revoked"; l:release() end)
    local remote = zk2:mutex(path)
    local held = false
    H.run(zk, {
      function()
        assert(m:acquire(5))
        held = true
        -- a local waiter queued first, a remote contender after it
        yield_until(function()
          return m:local_waiters() == 1 and #nodes(path) == 2
        end)
        assert.equal(1, H.zklock.revoke(zk2, path))
      end,
      function()
        coroutine.yield()
        assert(w:acquire(20))
        order[#order + 1] = "local"
        assert(w:release())
      end,
      function()
        yield_until(function() return held and m:local_waiters() == 1 end)
        assert(remote:acquire(20))
        order[#order + 1] = "remote"
        assert(remote:release())
      end,
    }, 30)
    assert.same({ "revoked", "remote", "local" }, order)
  end)

  it_yields("a hold asked to revoke while its holder is busy is not " ..
     "passed: the revoker holds next", function()
    -- (issue 32, defect 2) the revocation is read, its event queued in C,
    -- and the holder, running no callback, releases the plain way
    local path = H.path("cohort-revoke-busy")
    local order = {}
    local m, w = zk:mutex(path), zk:mutex(path)
    m:on_revoke(function(l) order[#order + 1] = "revoked"; l:release() end)
    local remote = zk2:mutex(path)
    by_hand()
    assert(m:acquire(5))
    local cw = coroutine.create(function()
      assert(w:acquire(20))
      order[#order + 1] = "local"
      assert(w:release())
    end)
    local cr = coroutine.create(function()
      assert(remote:acquire(20)) -- (its waits run zk2's callbacks only)
      order[#order + 1] = "remote"
      assert(remote:release())
    end)
    step(cw) -- a local waiter, queued in the cohort
    assert.equal(1, m:local_waiters())
    step(cr) -- a remote contender, queued behind m's node
    H.wait_until(function() return #nodes(path) == 2 end, 10,
      "the remote node")
    assert.equal(1, H.zklock.revoke(zk2, path))
    settle(zk) -- (the revoke event is queued, on_revoke not run)
    assert(m:release())
    finish({ cw, cr })
    assert.same({ "remote", "local" }, order)
    assert.same({}, nodes(path))
  end)

  it("refuses bad options with a clear error", function()
    assert.has_error(function() zk:mutex("/x", { cohort = 1 }) end,
      "bad argument #2 to 'mutex' (cohort must be a boolean)")
    assert.has_error(function() zk:mutex("/x", { pass_limit = -1 }) end,
      "bad argument #2 to 'mutex' (pass_limit must be an integer >= 0)")
    assert.has_error(function()
      zk:semaphore_mutex("/x", { cohort = true })
    end, "bad argument #2 to 'semaphore_mutex' (a semaphore does not " ..
      "queue in a cohort (cohort): see docs/api.md, Cohorts)")
    assert.has_error(function()
      H.zklock.connect(srv.connect_string, { pass_limit = 1.5 })
    end, "bad argument #2 to 'connect' (pass_limit must be an integer >= 0)")
  end)
end)
