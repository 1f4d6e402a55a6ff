-- Waiting: every wait polls a C object and sleeps until the session
-- reports a change (`await`), through the waiter installed now (blocking
-- by default; zklock.ngx's and zklock.loop's yield); their wake-up
-- entries; and what abandons a wait that zklock.ngx finds nginx dropped.
-- Owns the waiter and the abandon table.  Not a public interface.
local core = require "zklock.core"
local check = require "zklock.rt.check"
local plug = require "zklock.rt.plug"
local events = require "zklock.rt.events"
local guard = require "zklock.rt.guard"
check.internal_file()

local M = {}

local now = core.now
local hooks = plug.hooks
local dispatch = events.dispatch
local pcall, setmetatable = pcall, setmetatable

local function block(client, gen, timeout)
  return client:_wait(gen, timeout)
end
local waiter = block

--- Install `fn` (checked by zklock.set_waiter) as how zklock sleeps while
-- it waits; nil restores the blocking wait.
function M.set_waiter(fn)
  waiter = fn or block
end

--- The waiter installed now (zklock.loop chains to it).
function M.current_waiter()
  return waiter
end

--- Sleep as the current waiter does: (client, gen, timeout, obj).
function M.wait(...)
  return waiter(...)
end

-- ---------------------------------------------------------------------------
-- wake-up entries

-- Wake-up entries, zklock.ngx's and zklock.loop's: how a waiter learns
-- that its own object moved (the C core queues the entry's id).  A table
-- w keeps byid (id -> entry, weak values), entry_of (obj -> entry, weak
-- keys) and next_id; an entry is { id, ref = { obj } (weak) } and what its
-- owner keeps in it.  Nothing in it refers to the object strongly
-- (LuaJIT's weak keys are no ephemerons).
local MAX_WAKE_ID = 2 ^ 31 - 1 -- (the C side keeps an unsigned int)
local WEAK_KEYS = { __mode = "k" }
local WEAK_VALUES = { __mode = "v" }

--- Give entry e a fresh id in w and register it; returns e.
function M.new_entry(w, e)
  local id = w.next_id
  while w.byid[id] do id = id % MAX_WAKE_ID + 1 end -- (after a wrap-around)
  w.next_id = id % MAX_WAKE_ID + 1
  e.id, e.ref = id, setmetatable({}, WEAK_VALUES)
  w.byid[id] = e
  return e
end

--- The entry of obj in w, made with make(w) on obj's first wait; nil when
-- obj moved since `gen` (the caller looks again instead of waiting).
function M.entry_for(w, obj, gen, make)
  local e = w.entry_of[obj]
  if e then return e end
  e = make(w)
  e.ref[1] = obj
  w.entry_of[obj] = e
  -- from now on a change of obj queues e.id; anything before it shows in
  -- the change counter
  if obj:_wake(e.id) ~= gen then return nil end
  return e
end

-- ---------------------------------------------------------------------------
-- abandoned waits

-- Objects waited on -> what abandons that wait (weak keys): zklock.ngx
-- calls it for a request nginx finalized while it waited on the object,
-- instead of releasing or cancelling the object itself (a lock cohort's
-- waiter: its node is the cohort's, cohort.lua).
local abandoners = setmetatable({}, WEAK_KEYS)

--- A wait on `obj` that is abandoned calls fn() (nil: obj is released or
-- cancelled itself, the default).
function M.on_abandon(obj, fn)
  abandoners[obj] = fn
end

--- The wait on `obj` was abandoned (zklock.ngx): what on_abandon set
-- runs (under pcall) and true comes back; false when nothing was set.
function M.abandon(obj)
  local fn = abandoners[obj]
  if not fn then return false end
  pcall(fn)
  return true
end

-- ---------------------------------------------------------------------------
-- await

--- Poll obj (anything with poll() -> status, gen, ...) until it leaves
-- "pending"/"waiting", or the deadline passes ("timeout"); `first(obj)`,
-- if given, once it is queued or holds (on_queued: node.lua).  Like Curator,
-- a timeout bounds the wait behind other holders: the first create and
-- listing are always awaited (a try-lock with timeout 0 works), for at
-- most `slack` seconds more.
local function await(client, obj, deadline, slack, first)
  local queued = false
  while true do
    if not hooks.dispatcher then dispatch(client) end
    local st, gen, msg, code = obj:poll()
    -- (first: called once, when obj is queued or holds at once; it may
    -- raise, which ends the wait)
    if first and (st == "waiting" or st == "held") then
      local fn = first
      first = nil
      fn(obj)
    end
    if st == "waiting" then queued = true
    elseif st ~= "pending" then return st, msg, code end
    local left
    if deadline then
      left = deadline - now()
      if not queued and slack then left = left + slack end
      if left <= 0 then return "timeout" end
    end
    waiter(client, gen, left, obj)
  end
end
M.await = await

--- await for a lock attempt, with the attempt given up (its node deleted
-- at once) whenever the wait does not return.
function M.guarded_await(client, att, deadline, slack, first)
  return guard.guarded(function() att:release() end, await, client, att,
    deadline, slack, first)
end

return M
