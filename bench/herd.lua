-- make bench, the herd line: WAITERS coroutines of one process queue on one
-- mutex held by another session; once all are queued, the server's watch
-- count (wchs), then the releases, each waiter releasing in turn: the
-- watch notifications the waiters' session got per release (exactly one
-- is the herd-free mark), and the hand-off rate.
local zklock = require "zklock"
local core = require "zklock.core"
local tcore = require "zklock.testing.core"

local WAITERS = tonumber(os.getenv("BENCH_HERD_WAITERS")) or 1000

return function(hosts, srv)
  local zk = assert(zklock.connect(hosts))
  local other = assert(zklock.connect(hosts))
  local path = "/bench/herd"
  local holder = other:mutex(path)
  assert(holder:acquire(10))
  -- (each waiter its own node: the per-request form; bench/cohort.lua
  -- has the same shape in a lock cohort)
  local m = zk:mutex(path, { cohort = false })
  collectgarbage()
  local c0, l0 = tcore.malloc_bytes(), collectgarbage("count") * 1024
  local cos, done = {}, 0
  for i = 1, WAITERS do
    cos[i] = coroutine.create(function()
      assert(m:acquire(600))
      assert(m:release())
      done = done + 1
    end)
  end
  zklock.set_waiter(function(c, gen, t)
    local co, main = coroutine.running()
    if co and not main then coroutine.yield() else c:_wait(gen, t) end
  end)
  local function round()
    local _, gen = zk:_poll()
    for _, co in ipairs(cos) do
      if coroutine.status(co) == "suspended" then
        local ok, err = coroutine.resume(co)
        if not ok then error(err) end
      end
    end
    zk:_wait(gen, 0.05)
  end
  local deadline = core.now() + 300
  while #assert(holder:participants(30)) < WAITERS + 1 do
    assert(core.now() < deadline, "the waiters never all queued")
    round()
  end
  -- every waiter's watches are set once its get is answered: wait for the
  -- server to count them (bounded)
  local watches
  repeat
    round()
    local text = srv:four_letter("wchs") or ""
    watches = tonumber(text:match("Total watches:%s*(%d+)"))
  until (watches and watches >= WAITERS + 1) or core.now() > deadline
  collectgarbage()
  -- C heap (the attempts, their requests and watches in the ZooKeeper
  -- client) and Lua heap (coroutines, owners) per queued waiter
  local c_per = (tcore.malloc_bytes() - c0) / WAITERS
  local lua_per = (collectgarbage("count") * 1024 - l0) / WAITERS
  local s0 = zk:_stats()
  local t0 = core.now()
  assert(holder:release())
  while done < WAITERS do
    assert(core.now() < deadline, "the waiters never all held")
    round()
  end
  local secs = core.now() - t0
  zklock.set_waiter(nil)
  local s1 = zk:_stats()
  local wakeups = (s1.watch_events - s1.own_events) -
    (s0.watch_events - s0.own_events)
  print(("herd.mutex waiters=%d server_watches=%s wakeups=%d " ..
    "wakeups_per_release=%.3f requests_per_handoff=%.2f handoffs_per_s=%.1f " ..
    "c_bytes_per_waiter=%.0f lua_bytes_per_waiter=%.0f")
    :format(WAITERS, tostring(watches), wakeups, wakeups / WAITERS,
      (s1.requests - s0.requests) / WAITERS, WAITERS / secs, c_per, lua_per))
  zk:close()
  other:close()
end
