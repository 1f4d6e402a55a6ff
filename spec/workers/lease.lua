-- Semaphore checker worker:
-- `lease.lua hosts path max_leases log cycles gate hold [meet]`.
-- Each cycle takes a lease of a semaphore of `max_leases`, stays inside for
-- `hold` seconds (spinning, no syscall), gives it back and logs the
-- interval "<start> <end>" it held the lease (monotonic, system-wide).
-- With `meet` (a file), the first lease of every worker is also held until
-- `max_leases` workers are inside at once (W.meet), so that a full house
-- happens by construction, not by the machine's speed.
local zklock = require "zklock"
local core = require "zklock.core"
local W = dofile("spec/workers/common.lua")

local hosts, path, max_leases, logfile, cycles, gate, hold, meet = ...
max_leases, cycles, hold = tonumber(max_leases), tonumber(cycles),
  tonumber(hold)

local zk = assert(zklock.connect(hosts, { session_timeout = 10 }))
local sem = zk:semaphore(path, max_leases)
local log = assert(io.open(logfile, "w"))
W.wait_gate(gate) -- start together
for i = 1, cycles do
  local lease = assert(sem:acquire(60))
  local t0 = core.now()
  if i == 1 and meet then
    assert(W.meet(meet, max_leases), "never " .. max_leases .. " inside")
  end
  W.spin(hold)
  local t1 = core.now()
  assert(lease:is_held(), "lease lost while held")
  assert(lease:release())
  log:write(("%.6f %.6f\n"):format(t0, t1))
end
log:close()
zk:close()
