-- A holder that hangs with its session alive:
-- `busy.lua hosts path max_hold spin readyfile resultfile`.
-- Acquires the mutex with max_hold, writes "<token> <acquired at>" to
-- readyfile (whole, by rename), spins for `spin` seconds without a
-- syscall, then writes "<spin end> <is_held> <release code>".
local zklock = require "zklock"
local core = require "zklock.core"
local W = dofile("spec/workers/common.lua")

local hosts, path, max_hold, spin, ready, result = ...
local zk = assert(zklock.connect(hosts, { session_timeout = 10 }))
local m = zk:mutex(path)
assert(m:acquire(30, { max_hold = tonumber(max_hold) }))
local t0 = core.now()
local fh = assert(io.open(ready .. ".tmp", "w"))
fh:write(("%d %.6f\n"):format(m:token(), t0))
fh:close()
assert(os.rename(ready .. ".tmp", ready))
W.spin(tonumber(spin))
local t1 = core.now()
local held = m:is_held()
local ok, _, code = m:release()
fh = assert(io.open(result .. ".tmp", "w"))
fh:write(("%.6f %s %s\n"):format(t1, tostring(held),
  ok and "released" or tostring(code)))
fh:close()
assert(os.rename(result .. ".tmp", result))
zk:close()
