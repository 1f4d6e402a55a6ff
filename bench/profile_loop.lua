-- The profiled process of bench/profile.lua (make profile): W1's loop,
-- acquire+release of one mutex, under the runtime that runs it.
--   profile_loop.lua HOSTS CYCLES [cohort=off] [modes=plain,alloc,count,
--     sample] [ctl=FIFO ack=FIFO] [path=P]
-- After 200 warm-up cycles it runs CYCLES cycles once per mode and prints
-- one `key=value` line per mode:
--   plain   the loop as W1 runs it: wall and process CPU (os.clock) per
--           cycle; per thread, its CPU per cycle (sum_exec_runtime of
--           /proc/PID/task/TID/schedstat, ns) and its context switches
--           per cycle (voluntary and not, /proc/.../status).  Threads by
--           creation order: main (the Lua thread), then the ZooKeeper
--           client's IO and completion threads, then zklock's timer
--           (bench/profile.lua checks the order against perf's stacks).
--           With ctl= and ack=, perf's control FIFOs: the loop is
--           bracketed by "enable" and "disable" (perf record -D -1).
--   alloc   the collector stopped: bytes allocated per cycle
--           (collectgarbage("count")).
--   count   VM instructions per cycle, exact (a count hook every
--           instruction), in all and per function (`count_fn fn=FILE:LINE
--           instructions=`, LINE where it is defined); under LuaJIT,
--           with the JIT off: interpreted bytecodes.
--   sample  a count hook every 97 instructions: per file (module), the
--           share of the Lua thread's VM instructions that ran in its
--           functions ("self"), the share of samples where one of its
--           functions is on the stack ("incl"), and the bytes allocated
--           since the previous sample, charged to the running file
--           (collector stopped).  Lines `sample file=... self=...`.
local zklock = require "zklock"
local core = require "zklock.core"

local hosts, cycles = ...
cycles = tonumber(cycles)
local opt = { modes = "plain,alloc,count,sample", path = "/bench/profile" }
for i = 3, select("#", ...) do
  local k, v = select(i, ...):match("^(%w+)=(.*)$")
  assert(k, "bad option " .. tostring(select(i, ...)))
  opt[k] = v
end
local runtime = jit and "luajit" or ("lua" .. _VERSION:match("%d+%.%d+"))
local cohort = opt.cohort ~= "off"

local zk = assert(zklock.connect(hosts))
local m = zk:mutex(opt.path, { cohort = cohort })
local function loop(n)
  for _ = 1, n do
    assert(m:acquire())
    m:release()
  end
end
loop(200)

local PID = core.pid()
local function slurp(name)
  local fh = io.open(name)
  if not fh then return nil end
  local s = fh:read("*a")
  fh:close()
  return s
end
local function threads()
  local fh = assert(io.popen("ls /proc/" .. PID .. "/task"))
  local tids = {}
  for l in fh:lines() do tids[#tids + 1] = tonumber(l) end
  fh:close()
  table.sort(tids)
  return tids
end
local ROLES = { "main", "io", "completion", "timer" }
local function thread_state(tids)
  local st = {}
  for i, tid in ipairs(tids) do
    local dir = ("/proc/%d/task/%d/"):format(PID, tid)
    local ns = tonumber((slurp(dir .. "schedstat") or "0"):match("^(%d+)"))
    local status = slurp(dir .. "status") or ""
    st[i] = { ns = ns,
      vol = tonumber(status:match("\nvoluntary_ctxt_switches:%s*(%d+)")) or 0,
      invol = tonumber(status:match("nonvoluntary_ctxt_switches:%s*(%d+)"))
        or 0 }
  end
  return st
end

local modes = {}

function modes.plain()
  local tids = threads()
  local ctl = opt.ctl and assert(io.open(opt.ctl, "w"))
  local ack = opt.ack and assert(io.open(opt.ack, "r"))
  if ack then ack:setvbuf("no") end
  local function perf(cmd)
    if not ctl then return end
    ctl:write(cmd, "\n")
    ctl:flush()
    repeat -- perf acknowledges with "ack\n" and a NUL: to the newline
      local c = assert(ack:read(1), "perf did not acknowledge")
    until c == "\n"
  end
  local s0, b0 = zk:stats(), thread_state(tids)
  perf("enable")
  local c0, t0 = os.clock(), core.now()
  loop(cycles)
  local t1, c1 = core.now(), os.clock()
  perf("disable")
  local b1, s1 = thread_state(tids), zk:stats()
  if ctl then ctl:close(); ack:close() end
  local out = { ("plain runtime=%s cohort=%s cycles=%d wall_us=%.1f " ..
    "cpu_us=%.1f requests=%.3f notifications=%.3f tids=%s"):format(runtime,
    cohort and "on" or "off", cycles, (t1 - t0) / cycles * 1e6,
    (c1 - c0) / cycles * 1e6, (s1.requests - s0.requests) / cycles,
    (s1.watch_events - s0.watch_events) / cycles, table.concat(tids, ",")) }
  for i in ipairs(tids) do
    out[#out + 1] = (" %s_cpu_us=%.1f %s_cs=%.3f %s_ics=%.3f"):format(
      ROLES[i] or ("t" .. i), (b1[i].ns - b0[i].ns) / 1e3 / cycles,
      ROLES[i] or ("t" .. i), (b1[i].vol - b0[i].vol) / cycles,
      ROLES[i] or ("t" .. i), (b1[i].invol - b0[i].invol) / cycles)
  end
  print(table.concat(out))
end

function modes.alloc()
  collectgarbage()
  collectgarbage("stop")
  local k0 = collectgarbage("count")
  loop(cycles)
  local k1 = collectgarbage("count")
  collectgarbage("restart")
  collectgarbage()
  print(("alloc runtime=%s cohort=%s cycles=%d bytes=%.0f"):format(runtime,
    cohort and "on" or "off", cycles, (k1 - k0) * 1024 / cycles))
end

function modes.count()
  if jit then jit.off(); jit.flush() end
  local n, fns, getinfo = 0, {}, debug.getinfo
  debug.sethook(function()
    local info = getinfo(2, "S")
    local fn = info.short_src .. ":" .. info.linedefined
    fns[fn] = (fns[fn] or 0) + 1
    n = n + 1
  end, "", 1)
  loop(cycles)
  debug.sethook()
  if jit then jit.on() end
  print(("count runtime=%s cohort=%s cycles=%d instructions=%.1f%s"):format(
    runtime, cohort and "on" or "off", cycles, n / cycles,
    jit and " (interpreted, JIT off)" or ""))
  local fl = {}
  for f, c in pairs(fns) do fl[#fl + 1] = { f, c } end
  table.sort(fl, function(a, b) return a[2] > b[2] end)
  for _, x in ipairs(fl) do
    print(("count_fn runtime=%s cohort=%s fn=%s instructions=%.1f"):format(
      runtime, cohort and "on" or "off", x[1], x[2] / cycles))
  end
end

function modes.sample()
  if jit then jit.off(); jit.flush() end
  local self, incl, bytes, n = {}, {}, {}, 0
  collectgarbage()
  collectgarbage("stop")
  local last = collectgarbage("count")
  local getinfo = debug.getinfo
  local seen = {}
  debug.sethook(function()
    local k = collectgarbage("count")
    local top = getinfo(2, "S").short_src
    n = n + 1
    self[top] = (self[top] or 0) + 1
    bytes[top] = (bytes[top] or 0) + (k - last) * 1024
    for f in pairs(seen) do seen[f] = nil end
    local level = 2
    while true do
      local info = getinfo(level, "S")
      if not info then break end
      seen[info.short_src] = true
      level = level + 1
    end
    for f in pairs(seen) do incl[f] = (incl[f] or 0) + 1 end
    last = collectgarbage("count") -- (the hook's own tables left out)
  end, "", 97)
  loop(cycles)
  debug.sethook()
  collectgarbage("restart")
  collectgarbage()
  if jit then jit.on() end
  local files = {}
  for f in pairs(incl) do files[#files + 1] = f end
  table.sort(files, function(a, b)
    return (self[a] or 0) > (self[b] or 0)
      or ((self[a] or 0) == (self[b] or 0) and incl[a] > incl[b])
  end)
  for _, f in ipairs(files) do
    print(("sample runtime=%s cohort=%s file=%s self=%.3f incl=%.3f " ..
      "bytes=%.0f"):format(runtime, cohort and "on" or "off", f,
      (self[f] or 0) / n, incl[f] / n, (bytes[f] or 0) / cycles))
  end
end

for mode in opt.modes:gmatch("[^,]+") do
  assert(modes[mode], "unknown mode " .. mode)()
  io.stdout:flush()
end
zk:close()
