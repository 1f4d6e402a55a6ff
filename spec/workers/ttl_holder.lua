-- A holder on a TTL node (spec/ttl_spec.lua):
-- `ttl_holder.lua hosts path id ttl readyfile [then]`.
-- Takes the mutex at `path` on a TTL node of `ttl` seconds as participant
-- `id` (a 2 s session), writes "<token> <waited>" to `readyfile` (the
-- token's string form; seconds the acquire took), then: "hold" (the
-- default) holds until killed (at most 120 s); "release" releases and
-- exits.
local W = dofile("spec/workers/common.lua")
local core = require "zklock.core"
local tcore = require "zklock.testing.core"

local hosts, path, id, ttl, ready, after = ...
local zk = assert(W.connect(hosts, { session_timeout = 2, id = id }))
local m = zk:mutex(path, { ttl = tonumber(ttl) })
local t0 = core.now()
assert(m:acquire(30))
assert(m:is_held())
local fh = assert(io.open(ready .. ".tmp", "w"))
fh:write(("%s %.3f\n"):format(m:token("string"), core.now() - t0))
fh:close()
assert(os.rename(ready .. ".tmp", ready))
if after == "release" then
  assert(m:release())
  zk:close()
  return
end
local deadline = core.now() + 120
while core.now() < deadline and m:is_held() do tcore.sleep(0.1) end
error("the hold ended: " .. tostring(m:is_held()))
