-- Exclusion checker worker for the event-loop adapters:
-- `loop_counter.lua hosts path file log cycles loop gate`.
-- Two coroutines of event loop `loop` ("cqueues", "luv", "copas") each run
-- `cycles` cycles: take the mutex (the wait suspends the coroutine and
-- the loop runs on), read the shared counter file, give the loop a
-- millisecond (the other coroutine may run: only the lock keeps it out),
-- write it back plus one, release; each logs the interval "<start> <end>"
-- it spent inside (monotonic, system-wide).  A timer of the loop counts
-- its ticks meanwhile; the worker prints "ticks=N".
local core = require "zklock.core"
local W = dofile("spec/workers/common.lua")
local loops = dofile("spec/loops.lua")

local hosts, path, file, logfile, cycles, name, gate = ...
cycles = tonumber(cycles)

local L = loops.new(name)
local zk = assert(L.connect(hosts, { session_timeout = 10 }))
local log = assert(io.open(logfile, "w"))
local ticks, done = 0, 0
W.wait_gate(gate) -- start together
for _ = 1, 2 do
  L.spawn(function()
    local m = zk:mutex(path)
    for _ = 1, cycles do
      assert(m:acquire(60))
      local t0, t1 = W.bump(file, function() L.sleep(0.001) end)
      assert(m:release())
      log:write(("%.6f %.6f\n"):format(t0, t1))
    end
    done = done + 1
  end)
end
L.every(0.01, function() ticks = ticks + 1 end)
if not L.run_until(function() return done == 2 end, 60) then
  local st, t = require("zklock.loop").stats(zk), {}
  for k, v in pairs(st) do t[#t + 1] = k .. "=" .. tostring(v) end
  error("cycles not done: " .. table.concat(t, " ") .. " now=" .. core.now())
end
log:close()
zk:close()
L.finish()
print("ticks=" .. ticks)
