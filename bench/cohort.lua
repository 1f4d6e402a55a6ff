-- make bench, the lock cohort lines (docs/performance.md, "Lock cohorts"):
--   cohort.handoffs       WAITERS coroutines of one process queued on one
--                         mutex held by another session; once all are
--                         queued it is given up: hand-offs/s, requests
--                         per hand-off, the lock's nodes while they queue
--                         (the herd.mutex shape, in a cohort)
--   cohort.handoffs.per_request  the same with cohort = false
--   cohort.handoffs.on_queued, .per_request.on_queued  both with every
--                         acquire's on_queued (issue 36: no change)
--   cohort.fairness       LOCALS coroutines take and give the lock back
--                         without pause while another session queues for
--                         it ROUNDS times: the local passes made after its
--                         node was listed (through the cohort's own
--                         session, so after the cohort could see it) and
--                         before it held, at most, counted by the passes'
--                         tokens (node, pass); never above pass_limit
local zklock = require "zklock"
local core = require "zklock.core"
local cohort = require "zklock.lock.cohort" -- (the pass count: stats)

local WAITERS = tonumber(os.getenv("BENCH_HERD_WAITERS")) or 1000
local LOCALS, ROUNDS, LIMIT = 8, 20, 3

-- A cooperative scheduler: every suspended coroutine is resumed each round,
-- then the thread sleeps until zk's next change (at most 50 ms).
local function scheduler(zk)
  local cos = {}
  zklock.set_waiter(function(c, gen, t)
    local co, main = coroutine.running()
    if co and not main then coroutine.yield() else c:_wait(gen, t) end
  end)
  local S = {}
  function S.spawn(fn) cos[#cos + 1] = coroutine.create(fn) end
  function S.round()
    local _, gen = zk:_poll()
    local live = 0
    for _, co in ipairs(cos) do
      if coroutine.status(co) == "suspended" then
        local ok, err = coroutine.resume(co)
        if not ok then error(err) end
      end
      if coroutine.status(co) ~= "dead" then live = live + 1 end
    end
    zk:_wait(gen, 0.05)
    return live
  end
  function S.done() zklock.set_waiter(nil) end
  return S
end

-- (tell: every acquire with on_queued, issue 36: its place counted)
local function handoffs(hosts, tag, opts, tell)
  local zk = assert(zklock.connect(hosts))
  local other = assert(zklock.connect(hosts))
  local path = "/bench/cohort-" .. tag
  local holder = other:mutex(path, { cohort = false })
  assert(holder:acquire(10))
  local m = zk:mutex(path, opts)
  local S = scheduler(zk)
  local done, told = 0, 0
  local aopts = tell and { on_queued = function() told = told + 1 end }
  for _ = 1, WAITERS do
    S.spawn(function()
      assert(m:acquire(600, aopts))
      assert(m:release())
      done = done + 1
    end)
  end
  local deadline = core.now() + 300
  local function queued()
    local n = #assert(holder:participants(30)) - 1
    return math.max(n, m:local_waiters()), n
  end
  local q, nodes = queued()
  while q < WAITERS do
    assert(core.now() < deadline, "the waiters never all queued")
    S.round()
    q, nodes = queued()
  end
  local s0 = zk:_stats()
  local t0 = core.now()
  assert(holder:release())
  while done < WAITERS do
    assert(core.now() < deadline, "the waiters never all held")
    S.round()
  end
  local secs = core.now() - t0
  local s1 = zk:_stats()
  S.done()
  local rate = WAITERS / secs
  if tell then assert(told == WAITERS, "on_queued told " .. told) end
  print(("cohort.handoffs%s waiters=%d lock_nodes=%d handoffs_per_s=%.1f " ..
    "requests_per_handoff=%.3f"):format(tag == "on" and "" or "." .. tag,
    WAITERS, nodes, rate, (s1.requests - s0.requests) / WAITERS))
  zk:close()
  other:close()
  return rate
end

local function fairness(hosts)
  local zk = assert(zklock.connect(hosts))
  local remote_zk = assert(zklock.connect(hosts))
  local path = "/bench/cohort-fair"
  local remote = remote_zk:mutex(path, { cohort = false })
  local S = scheduler(zk)
  local probe = zk:mutex(path, { pass_limit = LIMIT })
  local stop = false
  local last = {} -- token -> the highest pass of that node seen
  for _ = 1, LOCALS do
    S.spawn(function()
      local m = zk:mutex(path, { pass_limit = LIMIT })
      while not stop do
        assert(m:acquire(60))
        local token, pass = m:token()
        last[token] = math.max(last[token] or 0, pass or 0)
        coroutine.yield() -- (the hold spans a round)
        assert(m:release())
      end
    end)
  end
  local most, waits = 0, {}
  local listed_at, wanted = nil, false
  S.spawn(function()
    for _ = 1, ROUNDS do
      wanted = true
      assert(remote:acquire(60))
      wanted = false
      if listed_at then -- (not listed before it held: nothing passed it)
        -- passes of the node the cohort had then, made after the listing
        local n = math.max(0, (last[listed_at.token] or 0) - listed_at.seq)
        waits[#waits + 1] = n
        most = math.max(most, n)
      end
      listed_at = nil
      coroutine.yield()
      assert(remote:release())
      for _ = 1, 3 do coroutine.yield() end -- (the locals go on a while)
    end
    stop = true
  end)
  local deadline = core.now() + 300
  while S.round() > 0 do
    assert(core.now() < deadline, "the fairness run did not end")
    -- the remote node, listed through the cohort's session: its watch
    -- event came first, so the cohort has seen it
    if wanted and not listed_at then
      local names = assert(probe:participants(10))
      local st = cohort.stats(core.unbox(probe))
      if #names >= 2 and st.token then
        listed_at = { token = st.token, seq = st.pass }
      end
    end
  end
  S.done()
  table.sort(waits)
  print(("cohort.fairness locals=%d contenders=%d pass_limit=%d " ..
    "max_local_passes_waited=%d median=%d (target <= pass_limit)"):format(
    LOCALS, ROUNDS, LIMIT, most, waits[math.ceil(#waits / 2)] or -1))
  zk:close()
  remote_zk:close()
end

return function(hosts)
  local on = handoffs(hosts, "on", nil)
  local off = handoffs(hosts, "per_request", { cohort = false })
  print(("ratio cohort.handoffs/cohort.handoffs.per_request=%.1f " ..
    "(target >= 5)"):format(on / off))
  -- on_queued (issue 36) costs no request: the same hand-offs with it on
  local told = handoffs(hosts, "on_queued", nil, true)
  local told_off = handoffs(hosts, "per_request.on_queued",
    { cohort = false }, true)
  print(("ratio cohort.handoffs.on_queued/cohort.handoffs=%.3f " ..
    "cohort.handoffs.per_request.on_queued/cohort.handoffs.per_request=%.3f " ..
    "(target ~1: no change)"):format(told / on, told_off / off))
  fairness(hosts)
end
