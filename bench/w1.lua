-- W1 (docs/performance.md) in a process of its own, under the runtime
-- that runs it (lua5.4 or luajit; LUA_CPATH names that runtime's build):
--   w1.lua HOSTS CYCLES [cohort=off] [warm=N] [path=P] [linger=S]
-- connects, does N warm-up acquire+release cycles of one mutex (default
-- 100), then times CYCLES cycles and prints one line:
--   zklock.mutex.uncontended.<runtime>[.cohort_off] ops= ops_per_s=
--     p50_us= p99_us= cpu_us_per_cycle= requests_per_cycle=
--     notifications_per_cycle=
-- cpu_us_per_cycle is os.clock() over the loop: clock(), the CPU time of
-- the whole process (user+system, every thread: the Lua thread and the C
-- client's), under both runtimes.  requests_per_cycle and
-- notifications_per_cycle come from the client's own counters
-- (zk:stats(): `requests`, requests sent, and `watch_events`, watch
-- notifications received, own_events included).  bench/whole.lua runs it
-- with warm=0 as the whole-process check.
local zklock = require "zklock"
local core = require "zklock.core"

local hosts, cycles = ...
cycles = tonumber(cycles)
assert(hosts and cycles, "usage: w1.lua HOSTS CYCLES [cohort=off] [warm=N] "
  .. "[path=P] [linger=S]")
local opt = { warm = 100, path = "/bench/w1" }
for i = 3, select("#", ...) do
  local k, v = select(i, ...):match("^(%w+)=(.*)$")
  assert(k, "bad option " .. tostring(select(i, ...)))
  opt[k] = v
end
local runtime = jit and "luajit" or ("lua" .. _VERSION:match("%d+%.%d+"))
local name = "zklock.mutex.uncontended." .. runtime
local mopts = {}
if opt.cohort == "off" then
  mopts.cohort = false
  name = name .. ".cohort_off"
end
if opt.linger then
  mopts.linger = tonumber(opt.linger)
  name = name .. ".linger"
end

local zk = assert(zklock.connect(hosts))
local m = zk:mutex(opt.path, mopts)
for _ = 1, tonumber(opt.warm) do -- parents exist, code is warm
  assert(m:acquire())
  m:release()
end

local lat = {}
local s0 = zk:stats()
local c0, t0 = os.clock(), core.now()
for i = 1, cycles do
  local a = core.now()
  assert(m:acquire())
  m:release()
  lat[i] = core.now() - a
end
local t1, c1 = core.now(), os.clock()
local s1 = zk:stats()
zk:close()

if cycles == 0 then return end -- (bench/whole.lua: start-up alone)
table.sort(lat)
local function pct(p) return lat[math.max(1, math.ceil(#lat * p))] end
print(("%s ops=%d ops_per_s=%.1f p50_us=%.0f p99_us=%.0f " ..
  "cpu_us_per_cycle=%.1f requests_per_cycle=%.3f " ..
  "notifications_per_cycle=%.3f"):format(name, cycles, cycles / (t1 - t0),
  pct(0.5) * 1e6, pct(0.99) * 1e6, (c1 - c0) / cycles * 1e6,
  (s1.requests - s0.requests) / cycles,
  (s1.watch_events - s0.watch_events) / cycles))
