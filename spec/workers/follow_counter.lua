-- Exclusion checker worker while the ensemble moves (spec/follow_spec.lua):
-- `follow_counter.lua hosts path file log gate stop`.
-- Cycles until the file `stop` exists: takes the mutex, bumps the shared
-- counter file, checks the hold is still believed, releases (each must
-- answer true), and logs "<start> <end>" of its time inside.  Exits 0
-- only if its one session lived through it all (never renewed, never
-- lost) and zk:servers() followed the ensemble ("moves=N" on stdout).
local W = dofile("spec/workers/common.lua")

local hosts, path, file, logfile, gate, stop = ...

local zk = assert(W.connect(hosts, { session_timeout = 8 }))
local sid = zk:session_id()
local m = zk:mutex(path)
local log = assert(io.open(logfile, "w"))
log:setvbuf("line")
local function stopped()
  local f = io.open(stop)
  if f then f:close() end
  return f ~= nil
end
W.wait_gate(gate) -- start together
while not stopped() do
  assert(m:acquire(60))
  local t0, t1 = W.bump(file, function() W.spin(0.002) end)
  assert(m:is_held(), "hold lost under the worker")
  assert(m:release())
  log:write(("%.6f %.6f\n"):format(t0, t1))
end
log:close()
assert(zk:session_id() == sid, "the session changed")
assert(zk:stats().renewed == 0, "a session was renewed")
local _, moves = zk:servers()
io.write(("moves=%d\n"):format(moves))
zk:close()
