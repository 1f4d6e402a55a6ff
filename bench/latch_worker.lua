-- One participant of the failover benchmark (bench/failover.lua):
-- `latch_worker.lua hosts path outfile releasefile session_timeout`.
-- Joins a leader latch and writes "joined"; once leading, appends
-- "leading <t>"; when releasefile appears, appends "closed <t>" and leaves
-- (close).  Times: core.now(), the clock of the other processes.
local zklock = require "zklock"
local core = require "zklock.core"
local tcore = require "zklock.testing.core"
local hosts, path, out, release, st = ...
local zk = assert(zklock.connect(hosts, { session_timeout = tonumber(st) }))
local latch = zk:leader_latch(path)
local function say(s)
  local fh = assert(io.open(out, "a"))
  fh:write(s, "\n")
  fh:close()
end
assert(latch:start())
say("joined")
assert(latch:await(300))
say(("leading %.6f"):format(core.now()))
local deadline = core.now() + 300
while not io.open(release) do
  assert(core.now() < deadline, "never released")
  tcore.sleep(0.001)
end
say(("closed %.6f"):format(core.now()))
latch:close()
zk:close()
