-- Plug points: what other zklock modules hand the internal runtime (the
-- adapters zklock.ngx and zklock.loop, and zklock.election and
-- zklock.cohort).  A module registers a value at a named point; the rest
-- read it from `hooks`, which no one writes but `register`.  Not a public
-- interface.
local M = {}

local error, tostring, setmetatable = error, tostring, setmetatable

-- The points, and who registers there:
--   owner(co)        zklock.ngx: the owner key of coroutine co (nginx
--                    reuses a request's Lua thread for later requests, so
--                    there the key is per request)
--   held(lock, owner) zklock.ngx: after an owner takes a hold
--   dispatcher       zklock.ngx: callbacks run in its timer, not in waits
--   default_logger   zklock.ngx: the logger when the application sets none
--   step(client)     zklock.loop: `zk:step()`, once it is loaded (its
--                    attached clients' waits are its own)
--   events(client, kind, arg, attempt)  zklock.election: its part of
--                    dispatch -> how many callbacks ran; attempt: the
--                    serial of the lock attempt the event is about
--   elections(client) zklock.election: whether the client has latches
--   attempt_lost(client, attempt)  zklock.cohort: a lock attempt's hold
--                    ended without a release (its "lost" event)
local PLUGS = { owner = true, held = true, dispatcher = true,
  default_logger = true, step = true, events = true, elections = true,
  attempt_lost = true }
local values = {}

--- What is registered, by point name: read-only (set with `register`).
M.hooks = setmetatable({}, {
  __index = values,
  __newindex = function(_, k)
    error("zklock: hooks are read-only (register " .. tostring(k) ..
      " with register)", 2)
  end,
})

--- Register `value` at plug point `name` (nil takes it away).
function M.register(name, value)
  if not PLUGS[name] then
    error("zklock.rt.plug: no plug point " .. tostring(name), 2)
  end
  values[name] = value
end

return M
