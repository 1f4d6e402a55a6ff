-- Lock cohorts (docs/design.md, section 16), how a hold in a cohort
-- ends where it meets the rest: a write with a release that passes, a
-- hold ended in C before its waiter ran, a leader's timeout, collection,
-- revocation, a session renewed, a client closed, bad options (issue
-- 32's defects each have a spec here).  What the cohort specs share:
-- spec/cohort.lua.
local H = require "spec.helpers"
local C = require "spec.cohort"
local it_yields = H.it_yields(it)
local yield_until, step, finish = C.yield_until, C.step, C.finish
-- (until the spec ends)
local function by_hand() finally(C.by_hand()) end

describe("lock cohorts, how a hold ends", function()
  local srv, zk, zk2
  local fx = C.fixture(function(s, z, z2) srv, zk, zk2 = s, z, z2 end)
  lazy_setup(fx.setup)
  lazy_teardown(fx.teardown)
  local nodes, settle = fx.nodes, fx.settle

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
    local res_a, node_b, node_a, max_nodes = nil, nil, nil, 0
    H.run(zk, {
      function() res_a = { a:acquire(0.5) } end,
      function()
        yield_until(function() return a:local_waiters() == 1 end)
        assert(b:acquire(20))
        node_b = b:node()
        assert(b:release())
      end,
    }, 30, function()
      local all = nodes(path)
      max_nodes = math.max(max_nodes, #all)
      if not res_a then -- (the node a waits on, behind the holder's)
        for _, n in ipairs(all) do
          if n ~= holder:node() then node_a = n end
        end
      end
      if res_a and holder:is_held() then holder:release() end
    end)
    assert.equal("timeout", res_a[3])
    assert.is_string(node_b)
    -- the same node: it kept its place in the queue (a first waiter's
    -- too, which took its node as a per-request acquire does: issue 34)
    assert.equal(node_a, node_b)
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

  -- The first waiter of an idle cohort takes its node as a per-request
  -- acquire does (issue 34): the queue's sentinel is made for it only
  -- when a second waiter comes.  Its coroutine dropped while it waits
  -- behind another client's holder (nothing refers to it any more, as to
  -- a request nginx finalized, but nothing abandons the wait either),
  -- with its lock object kept: with nobody behind it, its node goes (the
  -- cohort, kept by that waiter alone, goes with it); with a waiter that
  -- came behind it, that one holds next, on the same client's one node.
  for _, behind in ipairs { false, true } do
    it_yields("a first waiter dropped while it waits " ..
       (behind and "hands its place to the waiter behind it" or
        "lets its node go, its lock object kept") .. " (issue 34)",
       function()
      local path = H.path("cohort-solo-gone")
      local holder = zk2:mutex(path)
      assert(holder:acquire(5))
      local m, m3 = zk:mutex(path), zk:mutex(path) -- (kept to the end)
      local res_x, dropped
      local gone = setmetatable({}, { __mode = "v" })
      local cos = {
        w = coroutine.create(function() m:acquire(30) end),
        x = behind and coroutine.create(function()
          res_x = { m3:acquire(20) }
          if res_x[1] then assert(m3:release()) end
        end) or nil,
      }
      gone[1] = cos.w
      local max_mine = 0
      local function look() -- this client's nodes, the holder's apart
        local n = #nodes(path)
        max_mine = math.max(max_mine, n - (holder:is_held() and 1 or 0))
        return n
      end
      run_dropping({ "w", "x" }, cos, 30, function()
        if not dropped then
          if look() == 2 and m:local_waiters() == (behind and 2 or 1) then
            cos.w = nil -- (w waits, first; nothing refers to it now)
            dropped = true
          end
          return false
        end
        collectgarbage()
        look()
        if gone[1] == nil and holder:is_held() then holder:release() end
        return res_x ~= nil
      end)
      if not behind then
        -- (run_dropping returned once nothing was left to run): our node
        -- goes while the holder still holds
        H.wait_until(function()
          collectgarbage()
          return gone[1] == nil and look() == 1
        end, 20, "w's node to go")
        assert.same({ holder:node() }, nodes(path))
        assert(holder:release())
      end
      assert.is_nil(gone[1], "w's coroutine was not collected")
      assert.is_true(max_mine <= 1, "nodes of this client: " .. max_mine)
      if behind then assert.equal(m3, res_x[1], tostring(res_x[2])) end
      H.wait_until(function() return #nodes(path) == 0 end, 10,
        "nodes left")
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

  it_yields("waiters of a client that renews an expired session go on " ..
     "waiting; the one whose node went with the session answers " ..
     "session_expired, as each per-request waiter does", function()
    -- (issue 32, defect 3: the waiters' new signals were refused while the
    -- timer thread opened the new session, a few ms, and they answered
    -- "client is closed" on a client that was not.  Three expiries: one
    -- may fall in a moment this process is not scheduled at all.)
    local proxy = H.testing.proxy(srv)
    local zkp = H.connect(proxy:connect_string(), { session_timeout = 1 })
    local N, P = 60, 3

    -- N cohort waiters and P per-request ones queue behind zk2's holds,
    -- the session expires and is renewed, then the holds go: what each
    -- waiter answered, and whether a signal was refused meanwhile
    local function expire_under_waiters(round)
      local path = H.path("cohort-renew")
      local plain = H.path("cohort-renew-plain")
      local holder, pholder = zk2:mutex(path), zk2:mutex(plain)
      assert(holder:acquire(5))
      assert(pholder:acquire(5))
      local probe = zkp:mutex(path)
      local res, pres, fns = {}, {}, {}
      for i = 1, N do
        fns[i] = function()
          local m = zkp:mutex(path)
          res[i] = { m:acquire(30) }
          if res[i][1] then assert(m:release()) end
        end
      end
      for i = 1, P do -- the reference: a node per waiter
        fns[N + i] = function()
          pres[i] = { zkp:mutex(plain, { cohort = false }):acquire(30) }
        end
      end
      local phase, refused, renewed0 = "queue", false, nil
      local ok, err = pcall(H.run, zkp, fns, 60, function()
        if phase == "queue" then
          -- all queued: the cohort's one node, and a node per plain waiter
          if probe:local_waiters() == N and #nodes(path) == 2 and
              #nodes(plain) == P + 1 then
            proxy:stall(true, true) -- silence: the server expires us
            renewed0 = zkp:stats().renewed
            phase = "stalled"
          end
        elseif phase == "stalled" then
          if #nodes(path) == 1 and #nodes(plain) == 1 then -- (expired)
            proxy:cut()
            proxy:stall(false, false) -- the client hears it, and renews
            -- the waiters run again only once the timer thread is opening
            -- the new session (a signal refused: before the fix), or has
            -- opened it
            local deadline = H.now() + 30
            -- (heard: the state says expired, or the timer thread has
            -- renewed already, between two looks)
            while zkp:state() ~= "expired" and
                zkp:stats().renewed == renewed0 do
              assert(H.now() < deadline, "the expiry was not heard")
              local _, gen = zkp:_poll()
              zkp:_wait(gen, 0.05)
            end
            while zkp:state() == "expired" do
              assert(H.now() < deadline, "the session was not renewed")
              if not zkp:_signal() then refused = true; break end
              -- (a nap, not a spin: under valgrind, which runs one thread
              -- at a time, a spinning thread starves zk2's I/O thread and
              -- its session expires)
              H.nap(0.001)
            end
            phase = "expired"
          end
        elseif phase == "expired" then
          -- renewed, and the next waiter queued a node in the new session
          if zkp:stats().renewed == round and #nodes(path) == 2 then
            assert(holder:release())
            assert(pholder:release())
            phase = "released"
          end
        end
      end)
      if phase ~= "released" then
        holder:release()
        pholder:release()
      end
      assert(ok, err)
      assert.same({}, nodes(path))
      assert.same({}, nodes(plain))
      return res, pres, refused
    end

    local ok, err = pcall(function()
      for round = 1, 3 do
        local res, pres, refused = expire_under_waiters(round)
        assert.equal("connected", zkp:state())
        assert.equal(round, zkp:stats().renewed)
        -- per-request: every waiter's node went with the session
        for i = 1, P do assert.equal("session_expired", pres[i][3]) end
        -- in the cohort: only the head had a node; the others go on
        -- waiting and hold in turn (none is told "closed": nobody closed)
        local codes = {}
        for i = 1, N do
          local code = res[i][1] and "held" or res[i][3]
          codes[code] = (codes[code] or 0) + 1
        end
        assert.same({ held = N - 1, session_expired = 1 }, codes)
        assert.is_false(refused, "a signal was refused during the renewal")
      end
    end)
    zkp:close()
    proxy:close()
    assert(ok, err)
  end)

  it_yields("a waiter passed the hold of a client closed before it ran " ..
     "answers closed", function()
    -- (issue 32, defect 5: it answered lock_lost; docs/api.md, "A closed
    -- client")
    local path = H.path("cohort-closed")
    local zk3 = H.connect(srv)
    local a, b = zk3:mutex(path), zk3:mutex(path)
    local passed, got
    H.run(zk3, {
      function()
        assert(a:acquire(5))
        yield_until(function() return a:local_waiters() == 1 end)
        passed = { a:release() } -- to b, with no request
        zk3:close() -- before b runs again
      end,
      function()
        coroutine.yield()
        got = { b:acquire(20) }
      end,
    }, 30)
    assert.same({ true }, passed)
    assert.same({ nil, "client is closed", "closed" }, got)
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
