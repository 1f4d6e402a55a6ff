-- One contender of the torture run (spec/torture.lua).
-- `torture.lua hosts path counter log cycles session_timeout mode gate
--  deadline work faults_done`: takes the lock (mode "lock"; "broken": a mutex that ignores
-- its predecessors, to prove the checker) `cycles` times, and each time
-- reads the counter and writes it back plus one with a fenced write.  The
-- log holds, per line (monotonic times, system-wide clock):
--   H <acquired> <last time is_held() was true> <token>   one per hold
--   P <token> <value>                                      a fenced write sent
--   W <zxid> <token> <value> ok|lost|unknown               ... and its outcome
--   F <code>                                               a failed acquire
--   D <holds>                                              finished
local zklock = require "zklock"
local core = require "zklock.core"
local tcore = require "zklock.testing.core"
local W = dofile("spec/workers/common.lua")

local hosts, path, counter, logfile, cycles, st, mode, gate, deadline, work,
  faults_done = ...
cycles, st, deadline = tonumber(cycles), tonumber(st), tonumber(deadline)
work = tonumber(work) or 0

local log = assert(io.open(logfile, "a"))
log:setvbuf("line")
local zk = assert(zklock.connect(hosts, { session_timeout = st,
  connect_timeout = 30 }))
local m = mode == "broken" and
  require("zklock.testing").broken_mutex(zk, path, 1000)
  or zk:mutex(path)
W.wait_gate(gate)

local holds = 0
-- at least `cycles` holds, and on until the injector is through with its
-- faults (so that every kind falls while workers contend), within deadline
local function more()
  if holds < cycles then return true end
  local fh = faults_done and io.open(faults_done)
  if fh then fh:close(); return false end
  return true
end

while more() and core.now() < deadline do
  local got, _, code = m:acquire(st * 5)
  if not got then
    log:write("F ", tostring(code), "\n")
  else
    local t_acq = core.now()
    local token = m:token() or 0
    local last = t_acq
    -- the time is read before asking: is_held() answers for a moment at
    -- or after it, so [t_acq, last] lies inside the hold
    local function check()
      local t = core.now()
      if m:is_held() then last = t end
    end
    local data = zk:get(counter, st)
    check()
    if data then
      local v = (tonumber(data) or 0) + 1
      tcore.sleep(work) -- the work done under the lock
      log:write(("P %s %d\n"):format(tostring(token), v)) -- about to
      local ok, zxid, wcode = m:fenced_set(counter, tostring(v), st * 3)
      local what = ok and "ok" or wcode == "lock_lost" and "lost" or
        "unknown"
      log:write(("W %s %s %d %s\n"):format(ok and tostring(zxid) or "0",
        tostring(token), v, what))
    end
    check()
    log:write(("H %.6f %.6f %s\n"):format(t_acq, last, tostring(token)))
    m:release()
    holds = holds + 1
  end
end
log:write("D ", holds, "\n")
log:close()
zk:close()
