-- make bench, event loops (docs/performance.md): 1,000 coroutines of one
-- loop, in one process, queued on one lock held by another client; once
-- all are queued the holder lets go and they take it in turn.  Printed:
-- hand-offs/s over the drain, and the lag of a 10 ms timer of the same
-- loop (how late it ran) while they waited, p50/p99/max.
--   loops.<loop>       through the adapter (zklock.cqueues, .luv, .copas)
--   loops.<loop>.poll  the peer: the same loop, the waits polling every
--                      10 ms (what a loop does without a descriptor)
-- `lua bench/loops.lua HOSTS LOOP MODE [N]`; bench/run.sh runs cqueues and
-- luv under Lua 5.4, copas under LuaJIT (Debian's copas is for 5.1/5.2;
-- copas 1.x has no timers: no polling peer, the loop's own step is the
-- clock).
local core = require "zklock.core"
local zklock = require "zklock"
local loops = dofile("spec/loops.lua")

local hosts, name, mode, n = ...
n = tonumber(n) or 1000
local path = ("/bench/loops-%s-%s-%d"):format(name, mode, os.time())

local L = loops.new(name)
local zk
if mode == "poll" then
  zk = assert(zklock.connect(hosts))
  zklock.set_waiter(function(client, gen, timeout)
    local co, main = coroutine.running()
    if not co or main then return client:_wait(gen, timeout) end
    L.sleep(math.min(timeout or 0.01, 0.01))
  end)
else
  zk = assert(L.connect(hosts))
end

-- the holder: another client, in the main thread (its waits block)
local other = assert(zklock.connect(hosts))
local hm = other:mutex(path)
assert(hm:acquire(30))
-- how many nodes the lock has: asked without blocking the loop (a
-- listing in flight, looked at on each turn)
local listing
local function all_queued()
  if not listing then listing = assert(other:_children(path, "all")) end
  if listing:poll() == "pending" then return false end
  local names = listing:result()
  listing = nil
  return names ~= nil and #names == n + 1
end

local done, last_at = 0, nil
for _ = 1, n do
  L.spawn(function()
    -- (each its own node: the wake-up of every waiter through the loop
    -- is measured, not a lock cohort's passes: bench/cohort.lua)
    local m = zk:mutex(path, { cohort = false })
    assert(m:acquire(600))
    assert(m:release())
    done = done + 1
    last_at = core.now()
  end)
end

-- the timer's lag (how late it runs) while the coroutines wait
local lags, expect = {}, nil
L.every(0.01, function()
  local t = core.now()
  if expect and done < n then lags[#lags + 1] = math.max(0, t - expect) end
  expect = t + 0.01
end)
assert(L.run_until(all_queued, 600), "not queued")
local released_at = core.now()
assert(hm:release())
assert(L.run_until(function() return done == n end, 600), "not drained")
zk:close()
L.finish()
other:close()

table.sort(lags)
local function pct(p)
  if #lags == 0 then return 0 end
  return lags[math.max(1, math.ceil(#lags * p))] * 1000
end
local label = "loops." .. name .. (mode == "poll" and ".poll" or "")
print(("%s coroutines=%d handoffs_per_s=%.0f drain_s=%.2f timer_ticks=%d " ..
  "timer_lag_p50_ms=%.2f timer_lag_p99_ms=%.2f timer_lag_max_ms=%.2f")
  :format(label, n, n / (last_at - released_at), last_at - released_at,
    #lags, pct(0.5), pct(0.99), (lags[#lags] or 0) * 1000))
