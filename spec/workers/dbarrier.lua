-- Double barrier member: `dbarrier.lua hosts path members log gate
-- delay_enter delay_leave`.  After the gate it waits `delay_enter` s, logs
-- "arrive <t>", enters, logs "entered <t>", works `delay_leave` s, logs
-- "leave <t>", leaves, and logs "left <t>" (monotonic, system-wide).
local core = require "zklock.core"
local tcore = require "zklock.testing.core"
local W = dofile("spec/workers/common.lua")

local hosts, path, members, logfile, gate, d_enter, d_leave = ...
members, d_enter, d_leave = tonumber(members), tonumber(d_enter),
  tonumber(d_leave)

local function delay(s) -- staggering only: nothing waits on it
  local t = core.now() + s
  while core.now() < t do tcore.sleep(0.01) end
end

local zk = assert(W.connect(hosts, { session_timeout = 10 }))
local db = zk:double_barrier(path, members)
local log = assert(io.open(logfile, "w"))
local function note(what)
  log:write(("%s %.6f\n"):format(what, core.now()))
  log:flush()
end
W.wait_gate(gate) -- start together
delay(d_enter)
note("arrive")
assert(db:enter(30))
note("entered")
delay(d_leave)
note("leave")
assert(db:leave(30))
note("left")
log:close()
zk:close()
