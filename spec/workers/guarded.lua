-- Guarded counter worker: `guarded.lua hosts path node cycles mode gate
-- [meet]`.  Each cycle adds one to the counter in ZooKeeper node `node`
-- under the mutex at `path`:
--   "pipelined": zklock.with_lock with `update` (the read rides with the
--                acquire, the write with the release);
--   "plain": acquire, zk:get, zk:set, release;
--   "broken": as pipelined, on testing.broken_mutex(2): two may hold at
--             once; with `meet`, the first cycle of each worker stays
--             inside until two are (W.meet), so that an update is lost
--             for certain.
--   "semaphore": zklock.with_lock with `update` under a semaphore of 3
--             (its holders share it: the write is conditional on the
--             version read, and fn runs again on a conflict); with
--             `meet`, the first call of each worker waits until three are
--             inside, so that conflicts happen for certain;
--   "blind":  the contrast, a semaphore of 3 whose leases read with the
--             acquire and write with the release unconditionally (as a
--             lease's release{ write = } does): updates are lost.
local zklock = require "zklock"
local testing = require "zklock.testing"
local W = dofile("spec/workers/common.lua")

local hosts, path, node, cycles, mode, gate, meet = ...
cycles = tonumber(cycles)

local zk = assert(zklock.connect(hosts, { session_timeout = 10 }))
local m = mode == "broken" and testing.broken_mutex(zk, path, 2)
  or (mode == "semaphore" or mode == "blind") and zk:semaphore(path, 3)
  or zk:mutex(path)
local n = (mode == "semaphore" or mode == "blind") and 3 or 2
local met = false
W.wait_gate(gate) -- start together
for i = 1, cycles do
  if mode == "blind" then
    local lease, d = assert(m:acquire(60, { read = node }))
    if meet and not met then
      met = true
      assert(W.meet(meet, n), "never " .. n .. " inside")
    end
    assert(lease:release{ write = node,
      data = tostring((tonumber(d) or 0) + 1) })
  elseif mode == "plain" then
    assert(m:acquire(60))
    local data = zk:get(node)
    assert(zk:set(node, tostring((tonumber(data) or 0) + 1)))
    assert(m:release())
  else
    assert(zklock.with_lock(m, { timeout = 60, update = node }, function(d)
        if i == 1 and meet and not met then
        met = true
        assert(W.meet(meet, n), "never " .. n .. " inside")
      end
      return tostring((tonumber(d) or 0) + 1), true
    end))
  end
end
zk:close()
