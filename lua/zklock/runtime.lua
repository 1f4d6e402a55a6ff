--- zklock's internal runtime as one read-only table, for the lock files
-- that still read `R.x` (lock.lua, cohort.lua, rwlock.lua, fenced.lua,
-- holders.lua, semaphore.lua, multilock.lua): each entry is the very
-- function or constant of the module that owns it, under lua/zklock/rt/
-- (check, plug, log, guard, events, wait, op, session).  Other files
-- require those modules by name; so should these, once they are
-- reworked.  Nothing writes into it (it raises), and a per-client table
-- shows here only as a read-only view.  Not a public interface.
-- @module zklock.runtime
local check = require "zklock.rt.check"
local plug = require "zklock.rt.plug"
local guard = require "zklock.rt.guard"
local events = require "zklock.rt.events"
local wait = require "zklock.rt.wait"
local op = require "zklock.rt.op"
local session = require "zklock.rt.session"

local error, tostring, setmetatable = error, tostring, setmetatable

local function refuse(_, k)
  error("zklock.runtime is read-only (" .. tostring(k) .. "): call the " ..
    "module that owns it (lua/zklock/rt/)", 2)
end

-- A read-only view of a per-client table: view[client] is get(client).
local function view(get)
  return setmetatable({}, { __newindex = refuse,
    __index = function(_, client) return get(client) end })
end

local R = {
  WEAK_KEYS = { __mode = "k" }, WEAK_VALUES = { __mode = "v" },
  -- check.lua
  internal_file = check.internal_file, argerror = check.argerror,
  RECIPE_PATH_MAX = check.RECIPE_PATH_MAX, check_path = check.check_path,
  options = check.options, check_options = check.check_options,
  check_count = check.check_count, check_timeout = check.check_timeout,
  checked = check.checked, check_data = check.check_data,
  -- plug.lua
  register = plug.register, hooks = plug.hooks,
  -- guard.lua
  guarded = guard.guarded,
  -- events.lua
  me = events.me, acting_why = events.acting_why,
  watch_hold = events.watch_hold, unwatch_hold = events.unwatch_hold,
  -- wait.lua
  await = wait.await, guarded_await = wait.guarded_await,
  on_abandon = wait.on_abandon,
  -- op.lua
  closed = op.closed, grace = op.grace, call_op = op.call_op,
  not_acquired = op.not_acquired, ended_at_once = op.ended_at_once,
  -- session.lua
  session_leaving = session.session_leaving,
  check_cohort = session.check_cohort,
  COHORT_DEFAULT = session.COHORT_DEFAULT,
  PASS_LIMIT_DEFAULT = session.PASS_LIMIT_DEFAULT,
  renews = view(session.renews), ids = view(session.id_of),
  cohort_defaults = view(session.cohort_defaults),
}

return setmetatable({}, { __index = R, __newindex = refuse })
