-- A plain waiter: `waiter.lua hosts path readyfile donefile`.  Connects,
-- writes readyfile, takes the mutex (waiting up to 60 s), writes donefile
-- (whole, by rename), releases.
local zklock = require "zklock"
local hosts, path, ready, done = ...
local zk = assert(zklock.connect(hosts, { session_timeout = 10 }))
local function write(file)
  local fh = assert(io.open(file .. ".tmp", "w"))
  fh:write("ok\n")
  fh:close()
  assert(os.rename(file .. ".tmp", file))
end
local m = zk:mutex(path)
write(ready)
assert(m:acquire(60))
write(done)
assert(m:release())
zk:close()
