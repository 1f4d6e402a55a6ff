-- Takes a lock, reports it in a file, then holds it until killed (or 120 s).
-- `hold.lua hosts path readyfile session_timeout`
local zklock = require "zklock"
local core = require "zklock.core"
local tcore = require "zklock.testing.core"
local hosts, path, ready, st = ...
local zk = assert(zklock.connect(hosts, { session_timeout = tonumber(st) }))
local m = zk:mutex(path)
assert(m:acquire(30))
local fh = assert(io.open(ready, "w"))
fh:write(m:node())
fh:close()
local deadline = core.now() + 120
while core.now() < deadline do tcore.sleep(0.2) end
