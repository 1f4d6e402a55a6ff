-- Read/write lock checker worker:
-- `rw.lua hosts path R|W log cycles gate hold [meet readers]`.
-- Each cycle takes the read (R) or the write (W) lock, stays inside for
-- `hold` seconds (spinning), releases, and logs "<R|W> <start> <end>".
-- With `meet`, the `readers` readers first hold the read lock all at once
-- (W.meet) and the writers start only after that: readers sharing the lock
-- happens by construction, not by the machine's speed.
local zklock = require "zklock"
local core = require "zklock.core"
local W = dofile("spec/workers/common.lua")

local hosts, path, mode, logfile, cycles, gate, hold, meet, readers = ...
cycles, hold, readers = tonumber(cycles), tonumber(hold), tonumber(readers)
assert(mode == "R" or mode == "W", "mode must be R or W")

local zk = assert(zklock.connect(hosts, { session_timeout = 10 }))
local rw = zk:rwlock(path)
local lock = mode == "R" and rw.read or rw.write
local log = assert(io.open(logfile, "w"))
W.wait_gate(gate) -- start together
if meet and mode == "W" then
  assert(W.wait_lines(meet, readers), "the readers never met")
end
for i = 1, cycles do
  assert(lock:acquire(60))
  local t0 = core.now()
  if i == 1 and meet and mode == "R" then
    assert(W.meet(meet, readers), "never " .. readers .. " readers inside")
  end
  W.spin(hold)
  local t1 = core.now()
  assert(lock:is_held(), "lock lost while held")
  assert(lock:release())
  log:write(("%s %.6f %.6f\n"):format(mode, t0, t1))
  W.spin(hold / 2) -- let the others in between
end
log:close()
zk:close()
