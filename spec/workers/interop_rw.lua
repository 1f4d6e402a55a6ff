-- The zklock side of interop_spec's read/write spec:
-- `interop_rw.lua hosts path read|write logfile cycles holdms gate`,
-- logging "<R|W> <start> <end>" per cycle like the Curator peer.
local zklock = require "zklock"
local core = require "zklock.core"
local tcore = require "zklock.testing.core"
local hosts, path, mode, logfile, cycles, holdms, gate = ...
local zk = assert(zklock.connect(hosts, { session_timeout = 10 }))
local rw = zk:rwlock(path)
local l = mode == "write" and rw.write or rw.read
local tag = mode == "write" and "W" or "R"
local deadline = core.now() + 150
while true do
  local fh = io.open(gate)
  if fh then fh:close() break end
  assert(core.now() < deadline, "gate never opened")
  tcore.sleep(0.01)
end
local lines = {}
for _ = 1, tonumber(cycles) do
  assert(l:acquire(60))
  local t0 = core.now()
  tcore.sleep(tonumber(holdms) / 1000)
  local t1 = core.now()
  assert(l:release())
  lines[#lines + 1] = ("%s %.6f %.6f\n"):format(tag, t0, t1)
end
local fh = assert(io.open(logfile, "w"))
fh:write(table.concat(lines))
fh:close()
zk:close()
