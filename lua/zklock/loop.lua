--- Waits in any Lua event loop: what zklock.cqueues, zklock.luv and
-- zklock.copas are made of, and how to write the same for another loop.
--
--     local loop = require "zklock.loop"
--     loop.attach(zk, driver)   -- zk's waits now suspend coroutines
--
-- A client attached to a driver keeps one descriptor, `zk:fd()`, that the
-- C core makes readable whenever something changed for this client (a
-- watch fired, a request completed, the connection's state moved, a
-- callback is owed) and when the earliest deadline of a waiting coroutine
-- has passed.  The loop watches it and calls `zk:step()` when it is
-- readable: that wakes exactly the coroutines whose lock or operation
-- moved (or whose time ran out) and runs the callbacks owed.  No polling,
-- and no timer of the loop's own.  Design: docs/design.md, "Event loops";
-- use: docs/api.md, "Waiting in an event loop".
--
-- A driver is a table:
--   current()      the token of the calling coroutine when it may suspend
--                  in this loop (nil: it may not; the wait blocks)
--   suspend(tok)   suspend the calling coroutine until resume(tok)
--   resume(tok)    make it run again (from zk:step(); may run it now)
--   watch(fd, fn)  call fn() whenever fd is readable; returns a function
--                  that stops watching
--   spawn(fn)      run fn() in a new coroutine of the loop (callbacks)
-- @module zklock.loop
local core = require "zklock.core"
local check = require "zklock.rt.check"
local plug = require "zklock.rt.plug"
local log = require "zklock.rt.log"
local guard = require "zklock.rt.guard"
local events = require "zklock.rt.events"
local wait_rt = require "zklock.rt.wait"
local session = require "zklock.rt.session"
require "zklock.client" -- (every client method, for the clients it opens)
check.internal_file() -- (bad arguments point past this file, at the caller)

local M = {}

local now = core.now
local guarded = guard.guarded
local argerror = check.argerror
local pairs, ipairs, type, pcall = pairs, ipairs, type, pcall
local setmetatable, getmetatable, error = setmetatable, getmetatable, error
local WEAK_KEYS = { __mode = "k" }
local WEAK_VALUES = { __mode = "v" }

-- client -> w: { client, driver, stop (the watch's), byid (id -> entry,
-- weak values), entry_of (obj -> entry, weak keys), any (waits without
-- an object), waiting (rec -> its entry, every suspended wait), next_id,
-- deadline (the earliest armed, or nil) }
-- An entry is { id, ref = { obj } (weak), recs = { [rec] = true } }; a
-- rec is one suspended wait: { tok, deadline, done }.
local clients = setmetatable({}, WEAK_KEYS)
local installed = false -- our waiter (installed by the first attach)
-- the waiter before ours: for every client not attached, and the calls
-- outside a loop's coroutines (the default one blocks the thread)
local prev_waiter

-- A wake-up entry (rt/wait.lua) with the waits suspended on it.
local function new_entry(w)
  return wait_rt.new_entry(w, { recs = {} })
end

-- Arm the C core's deadline byte for `d` when it is the earliest.
local function arm(w, d)
  if not w.deadline or d < w.deadline then
    w.deadline = d
    w.client:_wake_by(d)
  end
end

-- A wait's record, out of its entry and the loop's list.
local function unlist(w, e, rec)
  e.recs[rec] = nil
  w.waiting[rec] = nil
end

-- ... and over: nobody resumes it.
local function forget(w, e, rec)
  unlist(w, e, rec)
  rec.done = true
end

-- The waiter zklock calls (zklock.set_waiter) while this module is loaded.
local function wait(client, gen, timeout, obj)
  local w = clients[client]
  local tok = w and not w.closed and w.driver.current()
  if not tok then return prev_waiter(client, gen, timeout, obj) end
  local e
  if type(obj) == "userdata" then
    e = wait_rt.entry_for(w, obj, gen, new_entry)
    if not e then return end -- (obj moved meanwhile: look again)
  else
    e = w.any
    local _, g = client:_poll()
    if g ~= gen then return end
  end
  local rec = { tok = tok }
  if timeout then
    rec.deadline = now() + timeout
    arm(w, rec.deadline)
  end
  e.recs[rec] = true
  w.waiting[rec] = e
  -- (a coroutine closed while suspended, or an error out of the driver:
  -- its record goes too)
  guarded(function() forget(w, e, rec) end, w.driver.suspend, tok)
  forget(w, e, rec)
end

-- The recs of e, taken out of it (and of w.waiting), onto list `out`.
local function take_recs(w, e, out)
  for rec in pairs(e.recs) do
    unlist(w, e, rec)
    out[#out + 1] = rec
  end
end

-- Waits whose deadline has passed, taken out; the next deadline armed.
local function expire(w, out)
  local t, earliest = now(), nil
  for rec, e in pairs(w.waiting) do
    local d = rec.deadline
    if d and d <= t then
      unlist(w, e, rec)
      out[#out + 1] = rec
    elseif d and (not earliest or d < earliest) then
      earliest = d
    end
  end
  w.deadline = earliest
  w.client:_wake_by(earliest or 0)
end

local step -- (below)

-- Stop watching the descriptor of a client that closed (before its
-- descriptor is closed in turn: a loop must not poll a closed one).
local function unwatch(w)
  w.closed = true
  clients[w.client] = nil -- (LuaJIT's weak keys keep a value's key alive)
  local stop = w.stop
  w.stop = nil
  if stop then stop() end
end

-- zk:close() and `<close>` stop the loop's watch at once (zk:step() also
-- notices a close, but the loop may never step again: a program ending).
local wrapped = false
local function wrap_close(client)
  if wrapped then return end
  wrapped = true
  local mt = getmetatable(client)
  local methods = mt.__index
  local c_close = methods.close
  local function close(self, ...)
    c_close(self, ...)
    local w = clients[self]
    if w and not w.closed then
      -- the waiting coroutines learn of it now ("closed"), and the watch
      -- stops.  The close's byte is left unread: a watch parked on the
      -- descriptor (cqueues's, copas's) wakes on it and ends.
      local ok, err = pcall(step, w, true)
      unwatch(w)
      if not ok then error(err, 0) end
    end
  end
  methods.close = close
  if mt.__close then mt.__close = close end
end

step = function(w, keep_bytes)
  local client = w.client
  if not keep_bytes then client:_drain() end
  local ids, all = client:_ready()
  local woken = {}
  if all then
    for _, e in pairs(w.byid) do take_recs(w, e, woken) end
  else
    for _, id in ipairs(ids) do
      local e = w.byid[id]
      if e then take_recs(w, e, woken) end
    end
  end
  take_recs(w, w.any, woken)
  if w.deadline and w.deadline <= now() then expire(w, woken) end
  -- the coroutines, then the callbacks owed (state listeners, revocation,
  -- lost holds) in a task of the loop's own: a callback may wait, which
  -- would suspend this step (the loop's watch) for good.  A failure is
  -- raised after all have had their turn.
  local ok, err = true, nil
  local resume = w.driver.resume
  for _, rec in ipairs(woken) do
    if not rec.done then
      rec.done = true
      local rok, rerr = pcall(resume, rec.tok)
      if not rok and ok then ok, err = false, rerr end
    end
  end
  log.drain_log()
  local evs = client:_events()
  if evs then
    local sok, serr = pcall(w.driver.spawn, function()
      events.dispatch(client, evs)
    end)
    if not sok and ok then ok, err = false, serr end
  end
  if not w.closed and client:state() == "closed" then unwatch(w) end
  if not ok then error(err, 0) end
  return #woken
end

--- Attach client `zk` to an event loop's `driver` (see the module's
-- description): from now on a wait of zk's objects in a coroutine of that
-- loop suspends the coroutine instead of blocking the thread.  A client
-- is attached once.
-- @return zk, or nil, message, code
function M.attach(client, driver)
  check.check_client(client, "attach")
  if type(driver) ~= "table" then
    argerror(2, "attach", "driver table expected, got " .. type(driver))
  end
  for _, k in ipairs { "current", "suspend", "resume", "watch", "spawn" } do
    if type(driver[k]) ~= "function" then
      argerror(2, "attach", "driver." .. k .. " must be a function")
    end
  end
  if clients[client] then
    argerror(1, "attach", "this client is attached already")
  end
  local fd, msg, code = client:fd()
  if not fd then return nil, msg, code end
  local w = {
    client = client, driver = driver,
    byid = setmetatable({}, WEAK_VALUES),
    entry_of = setmetatable({}, WEAK_KEYS),
    -- (strong: a coroutine suspended here may have no other reference,
    -- luv's and copas's; nor its lock, but from the coroutine's stack)
    waiting = {},
    next_id = 1,
  }
  w.any = new_entry(w)
  w.byid[w.any.id] = nil -- (taken on every step, kept by w)
  clients[client] = w
  wrap_close(client)
  if not installed then
    prev_waiter = wait_rt.current_waiter()
    wait_rt.set_waiter(wait)
    installed = true
  end
  local stop = driver.watch(fd, function() return step(w) end)
  w.stop = stop
  return client
end

--- Wake the coroutines whose wait on `zk` ended and run the callbacks it
-- owes; what `zk:fd()` being readable asks for.  An adapter's watch calls
-- it; call it yourself when you watch the descriptor yourself.
-- @return how many waits it ended
function M.step(client)
  local w = clients[client]
  if not w then return events.step(client) end
  return step(w)
end
plug.register("step", M.step) -- (zk:step(), from now on)

--- A driver's `current` for a loop that runs any coroutine it is given
-- (luv, copas): the calling coroutine, unless it is the main one.
function M.running()
  local co, main = coroutine.running()
  if co and not main then return co end
end

--- This client's wait machinery, for tests and monitoring: `attached`,
-- `watching` (the loop watches its descriptor), `entries` (objects with
-- a wake-up entry), `waiting` (coroutines suspended in a wait), `deadline`
-- (the earliest armed, monotonic seconds, or nil).
function M.stats(client)
  local w = clients[client]
  if not w then return { attached = false, watching = false, entries = 0,
    waiting = 0 } end
  local entries, waiting = 0, 0
  for _ in pairs(w.byid) do entries = entries + 1 end
  for _ in pairs(w.waiting) do waiting = waiting + 1 end
  return { attached = true, watching = w.stop ~= nil, entries = entries,
    waiting = waiting, deadline = w.deadline }
end

--- Open a session attached to `driver`, waiting for it as the caller can
-- (suspended in a coroutine of the loop, else blocking).
-- @param driver the loop's driver (see the module's description)
-- @param hosts as `zklock.connect`
-- @param opts as `zklock.connect`
-- @param[opt] fname the calling function's name, for argument errors
-- @return client, or nil, message, code
function M.connect(driver, hosts, opts, fname)
  local client, ct, code = session.open(hosts, opts, fname or "connect")
  if not client then return nil, ct, code end
  local ok, msg, mcode = M.attach(client, driver)
  if not ok then
    client:close()
    return nil, msg, mcode
  end
  return session.finish_connect(client, hosts, ct)
end

return M
