-- Exclusion checker worker:
-- `counter.lua hosts path file log cycles mode gate`.
-- Each cycle takes the lock (mode "lock": a mutex; "linger": a mutex whose
-- released node lingers, lock caching; "semmutex": a semaphore mutex) or
-- not ("bypass"), reads the
-- shared counter file, pauses, writes it back plus one, and logs the
-- interval "<start> <end>" it spent inside (monotonic, system-wide).
local W = dofile("spec/workers/common.lua")

local hosts, path, file, logfile, cycles, mode, gate = ...
cycles = tonumber(cycles)

local zk = assert(W.connect(hosts, { session_timeout = 10 }))
local m = mode == "semmutex" and zk:semaphore_mutex(path)
  or zk:mutex(path, mode == "linger" and { linger = 30 } or nil)
local log = assert(io.open(logfile, "w"))
W.wait_gate(gate) -- start together
for _ = 1, cycles do
  if mode ~= "bypass" then assert(m:acquire(60)) end
  local t0, t1 = W.bump(file, function() W.spin(0.001) end)
  if mode ~= "bypass" then assert(m:release()) end
  log:write(("%.6f %.6f\n"):format(t0, t1))
end
log:close()
zk:close()
