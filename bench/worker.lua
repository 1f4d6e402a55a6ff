-- One benchmark client: `worker.lua hosts path cycles gate [outfile]`.
-- Waits for the gate file, then does `cycles` acquire+release cycles and
-- writes "start end" then one acquire latency (seconds) per line.
local zklock = require "zklock"
local core = require "zklock.core"
local W = dofile("spec/workers/common.lua")
local hosts, path, cycles, gate, out = ...
cycles = tonumber(cycles)
local zk = assert(zklock.connect(hosts, { session_timeout = 10 }))
local m = zk:mutex(path)
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
