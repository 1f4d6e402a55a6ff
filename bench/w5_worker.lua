-- W5 (docs/performance.md): one process's memory over many acquire/release
-- cycles of one mutex.  `w5_worker.lua hosts checkpoints...`: after a
-- warm-up of 10,000 cycles, and after each checkpoint's total of cycles,
-- prints "cycles=<n> rss_kb=<x> lua_kb=<y>" (RSS from /proc/self/statm,
-- the Lua heap after a full collection).
local zklock = require "zklock"
local hosts = ...
local checkpoints = { select(2, ...) }

local PAGE_KB = 4
local function rss_kb()
  local fh = assert(io.open("/proc/self/statm"))
  local _, resident = fh:read("*n", "*n")
  fh:close()
  return resident * PAGE_KB
end

local zk = assert(zklock.connect(hosts, { session_timeout = 10 }))
local m = zk:mutex("/bench/w5")
local done = 0
local function run_to(n)
  while done < n do
    assert(m:acquire(30))
    assert(m:release())
    done = done + 1
  end
  collectgarbage()
  collectgarbage()
  print(("cycles=%d rss_kb=%d lua_kb=%.0f"):format(done, rss_kb(),
    collectgarbage("count")))
  io.stdout:flush()
end
run_to(10000)
for _, c in ipairs(checkpoints) do run_to(tonumber(c)) end
zk:close()
