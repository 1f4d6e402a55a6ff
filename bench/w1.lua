-- W1 (docs/performance.md) in a process of its own, under the runtime
-- that runs it (lua5.4 or luajit; LUA_CPATH names that runtime's build):
--   w1.lua HOSTS CYCLES [cohort=off] [warm=N] [path=P] [linger=S] [ab=1]
-- connects, does N warm-up acquire+release cycles of one mutex (default
-- 100), then times CYCLES cycles and prints one line:
--   zklock.mutex.uncontended.<runtime>[.cohort_off] ops= ops_per_s=
--     p50_us= p99_us= cpu_us_per_cycle= lua_thread_cpu_us_per_cycle=
--     requests_per_cycle= notifications_per_cycle=
-- cpu_us_per_cycle is os.clock() over the loop: clock(), the CPU time of
-- the whole process (user+system, every thread: the Lua thread and the C
-- client's), under both runtimes; lua_thread_cpu_us_per_cycle the Lua
-- thread's alone (/proc/self/schedstat: the main thread's run time, ns).
-- With ab=1, two mutexes of the one client, cohorts on and off, take
-- turns in blocks of 50 cycles, CYCLES cycles each, and the line is
--   zklock.mutex.uncontended.<runtime>.cohort_ab ops= on_cpu_us_per_cycle=
--     off_cpu_us_per_cycle= on_lua_thread_us_per_cycle=
--     off_lua_thread_us_per_cycle=
-- (the same moment, the same threads: what cohorts cost, apart from the
-- drift between processes).  requests_per_cycle and
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

-- the Lua thread's CPU time so far (s): the main thread's schedstat
local function lua_thread_cpu()
  local fh = io.open("/proc/self/schedstat")
  local ns = fh and fh:read("*n")
  if fh then fh:close() end
  return (ns or 0) / 1e9
end

local zk = assert(zklock.connect(hosts))
if opt.ab then
  local B = 50
  local v = {
    { name = "on", m = zk:mutex(opt.path .. "-on"), cpu = 0, lua = 0 },
    { name = "off", m = zk:mutex(opt.path .. "-off", { cohort = false }),
      cpu = 0, lua = 0 },
  }
  for _, x in ipairs(v) do
    for _ = 1, tonumber(opt.warm) do assert(x.m:acquire()); x.m:release() end
  end
  for b = 1, math.ceil(cycles / B) do
    for k = 0, 1 do -- each goes first every other block
      local x = v[(b + k) % 2 + 1]
      local c0, l0 = os.clock(), lua_thread_cpu()
      for _ = 1, B do assert(x.m:acquire()); x.m:release() end
      x.lua = x.lua + lua_thread_cpu() - l0
      x.cpu = x.cpu + os.clock() - c0
    end
  end
  zk:close()
  local n = math.ceil(cycles / B) * B
  print(("%s.cohort_ab ops=%d on_cpu_us_per_cycle=%.1f " ..
    "off_cpu_us_per_cycle=%.1f on_lua_thread_us_per_cycle=%.1f " ..
    "off_lua_thread_us_per_cycle=%.1f"):format(name, n, v[1].cpu / n * 1e6,
    v[2].cpu / n * 1e6, v[1].lua / n * 1e6, v[2].lua / n * 1e6))
  return
end
local m = zk:mutex(opt.path, mopts)
for _ = 1, tonumber(opt.warm) do -- parents exist, code is warm
  assert(m:acquire())
  m:release()
end

local lat = {}
local s0 = zk:stats()
local l0, c0, t0 = lua_thread_cpu(), os.clock(), core.now()
for i = 1, cycles do
  local a = core.now()
  assert(m:acquire())
  m:release()
  lat[i] = core.now() - a
end
local t1, c1, l1 = core.now(), os.clock(), lua_thread_cpu()
local s1 = zk:stats()
zk:close()

if cycles == 0 then return end -- (bench/whole.lua: start-up alone)
table.sort(lat)
local function pct(p) return lat[math.max(1, math.ceil(#lat * p))] end
print(("%s ops=%d ops_per_s=%.1f p50_us=%.0f p99_us=%.0f " ..
  "cpu_us_per_cycle=%.1f lua_thread_cpu_us_per_cycle=%.1f " ..
  "requests_per_cycle=%.3f notifications_per_cycle=%.3f"):format(name,
  cycles, cycles / (t1 - t0), pct(0.5) * 1e6, pct(0.99) * 1e6,
  (c1 - c0) / cycles * 1e6, (l1 - l0) / cycles * 1e6,
  (s1.requests - s0.requests) / cycles,
  (s1.watch_events - s0.watch_events) / cycles))
