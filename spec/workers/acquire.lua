-- Waits for a lock and writes how that ended to a file:
-- `acquire.lua hosts path resultfile session_timeout timeout`
local zklock = require "zklock"
local hosts, path, result, st, timeout = ...
local zk = assert(zklock.connect(hosts, { session_timeout = tonumber(st) }))
local m = zk:mutex(path)
local ok, msg, code = m:acquire(tonumber(timeout))
local fh = assert(io.open(result .. ".tmp", "w"))
fh:write(ok and "held" or ("%s|%s"):format(code, msg))
fh:close()
os.rename(result .. ".tmp", result)
if ok then m:release() end
zk:close()
