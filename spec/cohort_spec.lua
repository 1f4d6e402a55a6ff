-- Lock cohorts (docs/design.md, section 16): the waiters of one client on
-- one mutex or write lock queue locally in front of one node, and a
-- release passes the hold to the next of them with no request, up to
-- `pass_limit` passes once a remote contender is seen.  How a cohort's
-- hold ends (writes, revocation, expiry, collection, close):
-- cohort_ends_spec.lua; what both share: spec/cohort.lua.  Exclusion
-- across processes with cohorts (shared and per-request objects,
-- faults): the chaos run (spec/chaos_spec.lua) and the event-loop
-- checker (spec/loops_spec.lua), whose processes run several coroutines
-- each.
local H = require "spec.helpers"
local C = require "spec.cohort"
local it_yields = H.it_yields(it)
local yield_until = C.yield_until

describe("lock cohorts", function()
  local srv, zk, zk2
  local fx = C.fixture(function(s, z, z2) srv, zk, zk2 = s, z, z2 end)
  lazy_setup(fx.setup)
  lazy_teardown(fx.teardown)
  local nodes, zxid = fx.nodes, fx.zxid

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
end)
