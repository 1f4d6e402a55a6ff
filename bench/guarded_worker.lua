-- One guarded-counter bench client: `guarded_worker.lua hosts path node
-- cycles gate outfile mode`.  Each cycle adds one to the counter in node
-- `node` under the mutex at `path`: mode "plain" (acquire, zk:get, zk:set,
-- release) or "pipelined" (zklock.with_lock's update: the read rides with
-- the acquire, the write with the release).  Waits for the gate file;
-- writes "start end", then one cycle latency (seconds) per line.
local zklock = require "zklock"
local core = require "zklock.core"
local W = dofile("spec/workers/common.lua")
local hosts, path, node, cycles, gate, out, mode = ...
cycles = tonumber(cycles)
local zk = assert(zklock.connect(hosts, { session_timeout = 10 }))
local m = zk:mutex(path)
local function add(data) return tostring((tonumber(data) or 0) + 1) end
local cycle = mode == "plain" and function()
  assert(m:acquire(60))
  assert(zk:set(node, add((zk:get(node)))))
  assert(m:release())
end or function()
  assert(zklock.with_lock(m, { timeout = 60, update = node },
    function(data) return add(data), true end))
end
cycle() -- (the node and its parents exist; code is warm)
W.wait_gate(gate)
local lat = {}
local t0 = core.now()
for i = 1, cycles do
  local a = core.now()
  cycle()
  lat[i] = core.now() - a
end
local t1 = core.now()
local fh = assert(io.open(out, "w"))
fh:write(("%.6f %.6f\n"):format(t0, t1))
for i = 1, cycles do fh:write(("%.6f\n"):format(lat[i])) end
fh:close()
zk:close()
