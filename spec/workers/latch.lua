-- Leader election checker worker:
-- `latch.lua hosts path id log cycles holdms gate [broken]`.
-- Each cycle joins the election on `path`, waits to lead, stays leader for
-- `holdms` (checking has_leadership() all along), leaves (close), and
-- logs the interval "<start> <end>" it led (monotonic, system-wide).
-- "broken": a stand-in that lets two lead at once (testing.broken_mutex),
-- to prove the checker.
local zklock = require "zklock"
local core = require "zklock.core"
local W = dofile("spec/workers/common.lua")

local hosts, path, id, logfile, cycles, holdms, gate, broken = ...
cycles, holdms = tonumber(cycles), tonumber(holdms)
local zk = assert(zklock.connect(hosts, { session_timeout = 10, id = id }))
local log = assert(io.open(logfile, "w"))
W.wait_gate(gate)
for _ = 1, cycles do
  local t0, t1
  if broken then
    local m = require("zklock.testing").broken_mutex(zk, path, 2)
    assert(m:acquire(60))
    t0 = core.now()
    W.spin(holdms / 1000)
    t1 = core.now()
    m:release()
  else
    local latch = zk:leader_latch(path)
    assert(latch:start())
    assert(latch:await(60))
    t0 = core.now()
    local deadline = t0 + holdms / 1000
    while core.now() < deadline do
      assert(latch:has_leadership(), "leadership lost while leading")
    end
    t1 = core.now()
    assert(latch:has_leadership())
    latch:close()
  end
  log:write(("%.6f %.6f\n"):format(t0, t1))
end
log:close()
zk:close()
