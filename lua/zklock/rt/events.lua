-- Owners and callbacks.  The owner key of the calling coroutine (and the
-- owner a callback acts for); the callbacks C queued on ZooKeeper's
-- threads, run here in Lua, in order, one queue per client: a hold's
-- on_revoke and on_lost (the holds watched for them, by attempt serial),
-- the connection-state listeners (zk:on_state), and what zklock.election
-- and zklock.cohort registered (rt/plug.lua).  Owns those tables: others
-- go through watch_hold, add_state_listener and their kin.  Not a public
-- interface.
local core = require "zklock.core"
local check = require "zklock.rt.check"
local plug = require "zklock.rt.plug"
local log = require "zklock.rt.log"
check.internal_file()

local M = {}

local unbox = core.unbox
local hooks = plug.hooks
local drain_log, report = log.drain_log, log.report
local ipairs, pairs, select, setmetatable, xpcall =
  ipairs, pairs, select, setmetatable, xpcall
local co_running = coroutine.running
local unpack = table.unpack or unpack

local MAIN = {} -- owner key of the main coroutine (LuaJIT's running() is nil)
local WEAK_KEYS = { __mode = "k" }
local WEAK_VALUES = { __mode = "v" }

-- ---------------------------------------------------------------------------
-- owners

-- While a callback runs on behalf of a lock's owner, it acts as that owner
-- (so `lock:release()` inside `on_revoke` releases the right hold).
-- Keyed by the coroutine running the callback: a callback that waits (and
-- so yields to a scheduler) must not lend its owner to other coroutines.
local acting = setmetatable({}, WEAK_KEYS)

-- why the owner is lent: co -> { "revoke" | "lost" (a callback, with the
-- serial of the attempt it is about) | "ended" }
local acting_why = setmetatable({}, WEAK_KEYS)

--- The owner key of the calling coroutine.
function M.me()
  local co = co_running() or MAIN
  local a = acting[co]
  if a then return a end
  local owner = hooks.owner
  if owner then return owner(co) end
  return co
end

local function pack(...) return { n = select("#", ...), ... } end

-- Run fn(...) acting as `owner`, for `why`; returns ok, err (xpcall's).
local function act(owner, why, fn, ...)
  local co = co_running() or MAIN
  local saved, saved_why = acting[co], acting_why[co]
  acting[co], acting_why[co] = owner, why
  local args, n = { ... }, select("#", ...)
  local ok, err = xpcall(function() return fn(unpack(args, 1, n)) end,
    debug.traceback)
  acting[co], acting_why[co] = saved, saved_why
  return ok, err
end

--- Why the calling code acts for an owner not its own: "revoke" or "lost"
-- inside those callbacks (and the serial of the attempt the event is
-- about), "ended" for an owner that is gone; nil: itself.
function M.acting_why()
  local w = acting_why[co_running() or MAIN]
  if w then return w[1], w[2] end
end

--- Run fn(...) as the callback running now, but about hold `about` (an
-- attempt serial): a multilock's callback letting go of every member,
-- each of whose holds then ends for its owner as in its own callback
-- (its owner hears lock_lost, not that it holds nothing).  Outside a
-- callback, fn(...) as it is.  Returns fn's results; its error goes on.
function M.acting_about(about, fn, ...)
  local co = co_running() or MAIN
  local w = acting_why[co]
  if not w or about == nil then return fn(...) end
  acting_why[co] = { w[1], about }
  local r = pack(pcall(fn, ...))
  acting_why[co] = w
  if not r[1] then error(r[2], 0) end
  return unpack(r, 2, r.n)
end

--- Release every level of `co`'s hold of `lock` on its behalf (zklock.ngx:
-- the request that took it has ended).  Returns whether it held it.
function M.release_owner(lock, co)
  local f = unbox(lock)
  if not (f and f.owners and f.owners[co]) then return false end
  local ok, err = act(co, { "ended" }, function()
    while f.owners[co] do lock:release() end
  end)
  if not ok then report("release on behalf of an ended coroutine", err) end
  return true
end

--- Does `co` hold `lock`?
function M.holds(lock, co)
  local f = unbox(lock)
  return f ~= nil and f.owners ~= nil and f.owners[co] ~= nil
end

--- The client of a lock object, or nil.
function M.client_of(lock)
  local f = unbox(lock)
  return f and f.client
end

-- ---------------------------------------------------------------------------
-- holds with callbacks

-- client -> { attempt serial -> { lock =, owner =, from = } (weak
-- values) }: the holds with on_revoke or on_lost callbacks; an event
-- names the attempt it is about
local with_callbacks = setmetatable({}, WEAK_KEYS)

--- Hold `key` (its attempt's serial) of `lock` (a lock object, or a
-- semaphore's lease), by `owner`, hears its events from now on: the
-- `revoke_fn` and `lost_fn` of `from` (default: lock's fields) run as
-- `fn(lock)`, and those of every multilock in from.groups (weak keys: the
-- multilock objects a lock is a member of) as `fn(multilock, lock)`
-- while the owner holds that multilock.  None is kept alive by it.
function M.watch_hold(client, key, lock, owner, from)
  local reg = with_callbacks[client]
  if not reg then
    reg = {}
    with_callbacks[client] = reg
  end
  reg[key] = setmetatable({ lock = lock, owner = owner, from = from },
    WEAK_VALUES)
end

--- Hold `key` hears no more events (its hold ended).
function M.unwatch_hold(client, key)
  local reg = with_callbacks[client]
  if reg then reg[key] = nil end
end

-- ---------------------------------------------------------------------------
-- connection-state listeners (zk:on_state)

-- client -> { fn, ... }; and client -> the last state told to them
local state_listeners = setmetatable({}, WEAK_KEYS)
local last_state = setmetatable({}, WEAK_KEYS)

--- `fn(new, old)` hears client's state changes, after those before it.
function M.add_state_listener(client, fn)
  local list = state_listeners[client]
  if not list then
    list = {}
    state_listeners[client] = list
  end
  list[#list + 1] = fn
end

--- Every listener of client goes.
function M.clear_state_listeners(client)
  state_listeners[client] = nil
end

-- Tell the listeners of client: fn(new, old), in order, each under pcall.
local function notify_state(client, new)
  local old = last_state[client]
  -- ("servers": following the ensemble moved the servers; news, not a
  -- state: the state stays, and is told as `old`)
  if new ~= "servers" then last_state[client] = new end
  local n = 0
  for _, fn in ipairs(state_listeners[client] or {}) do
    local ok, err = xpcall(function() return fn(new, old) end,
      debug.traceback)
    n = n + 1
    if not ok then report("on_state", err) end
  end
  return n
end

-- ---------------------------------------------------------------------------
-- dispatch

-- client -> the events of the dispatch running now, { i = next, n = count }
-- (a callback that waits dispatches again: it carries on down the same
-- queue, so events run in the order they came, newer ones last)
local queues = setmetatable({}, WEAK_KEYS)

local function run_event(client, reg, ev)
  local n = 0
  if ev[1] == "state" then n = n + notify_state(client, ev[2]) end
  if ev[1] == "lost" and hooks.attempt_lost then
    hooks.attempt_lost(client, ev[3]) -- (a lock cohort's node: cohort.lua)
  end
  if hooks.events then n = n + hooks.events(client, ev[1], ev[2], ev[3]) end
  local r = reg and ev[3] and reg[ev[3]] -- (by the attempt's serial)
  local f = r and (r.from or unbox(r.lock))
  local key = ev[1] == "revoke" and "revoke_fn" or ev[1] == "lost" and
    "lost_fn"
  if not (f and key and r.owner ~= nil) then return n end
  local fn = f[key]
  if fn then
    local ok, err = act(r.owner, { ev[1], ev[3] }, fn, r.lock)
    n = n + 1
    if not ok then report("on_" .. ev[1], err) end
  end
  -- the multilocks the owner holds this lock through (zklock.multilock)
  for ml in pairs(f.groups or {}) do
    local m = unbox(ml)
    local gfn = m and m[key]
    if gfn and m.owners[r.owner] and r.lock then
      local ok, err = act(r.owner, { ev[1], ev[3] }, gfn, ml, r.lock)
      n = n + 1
      if not ok then report("multilock on_" .. ev[1], err) end
    end
  end
  return n
end

--- Run the callbacks `client` has queued (or those of `evs`, taken from
-- it already); returns how many ran.  Re-entered (a callback waits, and
-- the wait dispatches), it goes on with the outer call's queue, in order.
local function dispatch(client, evs)
  drain_log() -- (once a logger is set)
  evs = evs or client:_events()
  local q = queues[client]
  if not q then
    if not evs then return 0 end
    q = { i = 1, n = 0 }
    queues[client] = q
  end
  for _, ev in ipairs(evs or {}) do
    q.n = q.n + 1
    q[q.n] = ev
  end
  local n = 0
  while q.i <= q.n do
    local ev = q[q.i]
    q[q.i] = nil
    q.i = q.i + 1
    n = n + run_event(client, with_callbacks[client], ev)
  end
  q.i, q.n = 1, 0 -- (drained: whoever ran the last event)
  return n
end
M.dispatch = dispatch

--- `zk:step()` for a client no event loop attached (zklock.loop's do the
-- rest): the wake-up bytes read and, the ready list being zk:fd()'s
-- alone (zklock.ngx reads its own), taken; then the callbacks owed run.
-- Returns 0, the waits it ended.
function M.step(client)
  check.check_client(client, "step")
  if client:_drain() then client:_ready() end
  dispatch(client)
  return 0
end

return M
