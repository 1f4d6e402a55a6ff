-- Semaphore checker worker:
-- `lease.lua hosts path max_leases log cycles gate hold`.
-- Each cycle takes a lease of a semaphore of `max_leases`, stays inside for
-- `hold` seconds (spinning, no syscall), gives it back and logs the
-- interval "<start> <end>" it held the lease (monotonic, system-wide).
local zklock = require "zklock"
local core = require "zklock.core"

local hosts, path, max_leases, logfile, cycles, gate, hold = ...
max_leases, cycles, hold = tonumber(max_leases), tonumber(cycles),
  tonumber(hold)

local function spin(s)
  local t = core.now() + s
  while core.now() < t do end
end

local zk = assert(zklock.connect(hosts, { session_timeout = 10 }))
local sem = zk:semaphore(path, max_leases)
local log = assert(io.open(logfile, "w"))
-- start together: wait (bounded) for the parent to open the gate
local deadline = core.now() + 60
while not io.open(gate) do
  assert(core.now() < deadline, "gate never opened")
  os.execute("sleep 0.01")
end
for _ = 1, cycles do
  local lease = assert(sem:acquire(60))
  local t0 = core.now()
  spin(hold)
  local t1 = core.now()
  assert(lease:is_held(), "lease lost while held")
  assert(lease:release())
  log:write(("%.6f %.6f\n"):format(t0, t1))
end
log:close()
zk:close()
