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
        local st = require("zklock.cohort").stats(H.core.unbox(probe))
        listed = { token = st.token, seq = st.seq }
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
      local phase, refused = "queue", false
      local ok, err = pcall(H.run, zkp, fns, 60, function()
        if phase == "queue" then
          -- all queued: the cohort's one node, and a node per plain waiter
          if probe:local_waiters() == N and #nodes(path) == 2 and
              #nodes(plain) == P + 1 then
            proxy:stall(true, true) -- silence: the server expires us
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
            while zkp:state() ~= "expired" do
              assert(H.now() < deadline, "the expiry was not heard")
              local _, gen = zkp:_poll()
              zkp:_wait(gen, 0.05)
            end
            while zkp:state() == "expired" do
              assert(H.now() < deadline, "the session was not renewed")
              if not zkp:_signal() then refused = true; break end
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
