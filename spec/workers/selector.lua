-- Leader selector worker: `selector.lua hosts path id log cycles holdms gate`.
-- A requeued selector whose turns last `holdms` (spinning, checking its
-- leadership); logs "<start> <end>" per turn; leaves after `cycles`.
local zklock = require "zklock"
local core = require "zklock.core"
local W = dofile("spec/workers/common.lua")

local hosts, path, id, logfile, cycles, holdms, gate = ...
cycles, holdms = tonumber(cycles), tonumber(holdms)
local zk = assert(zklock.connect(hosts, { session_timeout = 10, id = id }))
local lines = {}
local sel = zk:leader_selector(path, function(s)
  local t0 = core.now()
  while core.now() < t0 + holdms / 1000 do
    assert(s:has_leadership(), "leadership lost while leading")
  end
  lines[#lines + 1] = ("%.6f %.6f\n"):format(t0, core.now())
end)
W.wait_gate(gate)
assert(sel:start())
local deadline = core.now() + 120
while sel:turns() < cycles do
  assert(core.now() < deadline, "turns not all had in time")
  zk:dispatch(0.05)
end
sel:close()
local fh = assert(io.open(logfile, "w"))
fh:write(table.concat(lines))
fh:close()
zk:close()
