-- One benchmark client: `worker.lua hosts path cycles gate [outfile
-- [leases | linger=S]]`.  Waits for the gate file, then does `cycles`
-- acquire+release cycles of a mutex (or of a semaphore of `leases`; or of
-- a mutex whose released node lingers up to S seconds: zklock.mutex.c8.
-- linger) and writes "start end" then one acquire latency (seconds) per
-- line.
local zklock = require "zklock"
local core = require "zklock.core"
local W = dofile("spec/workers/common.lua")
local hosts, path, cycles, gate, out, leases = ...
cycles = tonumber(cycles)
local zk = assert(zklock.connect(hosts, { session_timeout = 10 }))
local linger = leases and tonumber(leases:match("^linger=(.+)$"))
if linger then leases = nil end
local m = zk:mutex(path, { linger = linger })
if leases then -- a semaphore's lease per cycle, through the same calls
  local sem = zk:semaphore(path, tonumber(leases))
  local lease
  m = {
    acquire = function(_, t) lease = sem:acquire(t); return lease end,
    release = function() return lease:release() end,
  }
end
W.wait_gate(gate) -- start together
local lat = {}
local t0 = core.now()
for i = 1, cycles do
  local a = core.now()
  assert(m:acquire(60))
  lat[i] = core.now() - a
  assert(m:release())
end
local t1 = core.now()
local fh = out and assert(io.open(out, "w")) or io.stdout
fh:write(("%.6f %.6f\n"):format(t0, t1))
for i = 1, cycles do fh:write(("%.6f\n"):format(lat[i])) end
if out then fh:close() end
zk:close()
