-- Read/write lock checker worker:
-- `rw.lua hosts path R|W log cycles gate hold`.
-- Each cycle takes the read (R) or the write (W) lock, stays inside for
-- `hold` seconds (spinning), releases, and logs "<R|W> <start> <end>".
local zklock = require "zklock"
local core = require "zklock.core"
local W = dofile("spec/workers/common.lua")

local hosts, path, mode, logfile, cycles, gate, hold = ...
cycles, hold = tonumber(cycles), tonumber(hold)
assert(mode == "R" or mode == "W", "mode must be R or W")

local zk = assert(zklock.connect(hosts, { session_timeout = 10 }))
local rw = zk:rwlock(path)
local lock = mode == "R" and rw.read or rw.write
local log = assert(io.open(logfile, "w"))
W.wait_gate(gate) -- start together
for _ = 1, cycles do
  assert(lock:acquire(60))
  local t0 = core.now()
  W.spin(hold)
  local t1 = core.now()
  assert(lock:is_held(), "lock lost while held")
  assert(lock:release())
  log:write(("%s %.6f %.6f\n"):format(mode, t0, t1))
  W.spin(hold / 2) -- let the others in between
end
log:close()
zk:close()
