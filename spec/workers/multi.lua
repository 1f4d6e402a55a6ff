-- Multi-lock worker: `multi.lua hosts pathA pathB order log iterations gate
-- [naive]`.  `order` is "AB" or "BA": the order in which the two mutexes
-- are handed to zk:multilock.  Each iteration takes both, spins a little,
-- releases, and logs "<start> <end>".  With "naive" it takes the mutexes
-- one by one in the given order instead (what multilock must not do), with
-- a short timeout, and logs "deadlock" and stops the first time it gives up.
local zklock = require "zklock"
local core = require "zklock.core"
local W = dofile("spec/workers/common.lua")

local hosts, pa, pb, order, logfile, iterations, gate, naive = ...
iterations = tonumber(iterations)

local zk = assert(zklock.connect(hosts, { session_timeout = 10 }))
local a, b = zk:mutex(pa), zk:mutex(pb)
local list = order == "AB" and { a, b } or { b, a }
local ml = zk:multilock(list)
local log = assert(io.open(logfile, "w"))
W.wait_gate(gate) -- start together
for _ = 1, iterations do
  if naive == "naive" then
    assert(list[1]:acquire(30))
    W.spin(0.002)
    if list[2]:acquire(0.5) then
      list[2]:release()
    else
      log:write("deadlock\n")
      list[1]:release()
      break -- shown once is enough
    end
    list[1]:release()
  else
    assert(ml:acquire(30))
    local t0 = core.now()
    assert(a:is_held() and b:is_held(), "multilock holds only part")
    W.spin(0.001)
    local t1 = core.now()
    assert(ml:release())
    log:write(("%.6f %.6f\n"):format(t0, t1))
  end
end
log:close()
zk:close()
