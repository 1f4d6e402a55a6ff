-- Leader election under faults:
-- `leader.lua hosts path id logfile stopfile session_timeout [broken]`.
-- Joins a leader latch; each term it leads it logs "B <t0>" at once, then
-- "E <t_last>" when has_leadership() first answers false (t_last: the last
-- moment it answered true), flushed line by line: a SIGKILLed leader
-- leaves a "B" without "E", which the spec ends at the kill.  Once
-- stopfile exists and it has led at least once, it leaves (close) and
-- exits.  "broken": a stand-in that lets two lead at once.
local zklock = require "zklock"
local core = require "zklock.core"
local tcore = require "zklock.testing.core"

local hosts, path, id, logfile, stopfile, st, broken = ...
local zk = assert(zklock.connect(hosts, { session_timeout = tonumber(st),
  id = id }))
local log = assert(io.open(logfile, "w"))
local function say(s) log:write(s, "\n"); log:flush() end
local function stopping()
  local fh = io.open(stopfile)
  if fh then fh:close() end
  return fh ~= nil
end

local led, deadline = 0, core.now() + 240
if broken then
  local m = require("zklock.testing").broken_mutex(zk, path, 2)
  while led < 3 do
    assert(m:acquire(60))
    local t0 = core.now()
    say(("B %.6f"):format(t0))
    while core.now() < t0 + 0.05 do end
    say(("E %.6f"):format(core.now()))
    m:release()
    led = led + 1
    tcore.sleep(0.01)
  end
else
  local latch = zk:leader_latch(path)
  assert(latch:start())
  while not (stopping() and led > 0) do
    assert(core.now() < deadline, "never done")
    if latch:await(0.2) and latch:has_leadership() then
      local t_last = core.now()
      say(("B %.6f"):format(t_last))
      while latch:has_leadership() do
        t_last = core.now()
        if stopping() then break end
        tcore.sleep(0.002)
      end
      say(("E %.6f"):format(t_last))
      led = led + 1
      if stopping() then break end
    end
  end
  latch:close()
end
log:close()
zk:close()
