-- Holds a lock until it is frozen (SIGSTOP) past its session timeout and
-- resumed, then reports what it saw in `result` as "key=value" lines.
-- `lost.lua hosts path ready result session_timeout renew fenced_path`
local zklock = require "zklock"
local core = require "zklock.core"
local tcore = require "zklock.testing.core"
local hosts, path, ready, result, st, renew, fpath = ...
st = tonumber(st)
local zk = assert(zklock.connect(hosts, { session_timeout = st,
  renew_session = renew == "1" }))
local m = zk:mutex(path)
local lost_calls, held_in_cb = 0, nil
m:on_lost(function(l)
  lost_calls = lost_calls + 1
  held_in_cb = l:is_held()
end)
assert(m:acquire(30))
local session = zk:session_id()
local token = m:token()
assert(m:fenced_set(fpath, "holder-before"))
local fh = assert(io.open(ready .. ".tmp", "w"))
fh:write(token)
fh:close()
assert(os.rename(ready .. ".tmp", ready)) -- seen whole or not at all

local out = {}
local function put(k, v) out[#out + 1] = k .. "=" .. tostring(v) end
-- The freeze falls somewhere from the start of the last call answered true
-- to the end of the first answered false: a gap that long means no true
-- answer came after the freeze.
local last_true, first_false = core.now(), nil
local deadline = core.now() + 120
while core.now() < deadline do
  local t = core.now()
  if not m:is_held() then first_false = core.now(); break end
  last_true = t
  tcore.sleep(0.005)
end
put("gap", first_false and first_false - last_true)
-- on_lost is queued by the timer thread, run at the next dispatch
local t = core.now() + 30
while lost_calls == 0 and core.now() < t do zk:dispatch(0.1) end
put("lost_calls", lost_calls)
put("held_in_cb", held_in_cb)
local v, _, code = m:fenced_set(fpath, "holder-after")
put("fenced", v and "ok" or code)
local r1, _, c1 = m:release()
put("release", r1 and "ok" or c1)
-- a new hold (of another lock: the waiter holds ours): on a new session
-- when renewing
m = zk:mutex(path .. "-again")
local got, _, gcode = m:acquire(20)
if not got and gcode == "session_expired" and renew == "1" then
  -- started before the client learned that its session had expired (the
  -- resumed process races its own IO thread): that acquire fails with
  -- session_expired, as documented; the next one waits for the new session
  got, _, gcode = m:acquire(20)
end
put("reacquire", got and "ok" or gcode)
put("new_session", got and zk:session_id() ~= session)
put("new_token_higher", got and m:token() > token)
if got then m:release() end
put("state", zk:state())
put("renewed", zk:stats().renewed)
zk:close()
fh = assert(io.open(result .. ".tmp", "w"))
fh:write(table.concat(out, "\n"), "\n")
fh:close()
assert(os.rename(result .. ".tmp", result))
