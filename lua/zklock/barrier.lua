--- Barriers: the barrier (Curator DistributedBarrier) and the double
-- barrier (the ZooKeeper recipe), both carried out by C operations.
-- Loading this module adds `barrier` and `double_barrier` to the client
-- methods.
-- @module zklock.barrier
local core = require "zklock.core"
local R = require "zklock.runtime"
R.internal_file()

local box, unbox = core.box, core.unbox
local client_methods = core.client_methods
local pcall = pcall
local argerror, checked = R.argerror, R.checked
local check_path, check_count = R.check_path, R.check_count
local check_timeout = R.check_timeout
local call_op, succeeded = R.call_op, R.succeeded

local Barrier = { __name = "zklock.barrier" }
Barrier.__index = Barrier

--- A barrier (Curator DistributedBarrier): `set()` raises it, `wait()`
-- blocks while it stands, `remove()` lets everyone through.
function client_methods:barrier(path)
  if not core.is_client(self) then
    argerror(1, "barrier", "zklock client expected")
  end
  check_path(path, 1, "barrier")
  return box(Barrier, { client = self, path = path })
end

local function barrier_fields(self, fname)
  return checked(self, Barrier, fname, "barrier")
end

--- Raise the barrier (a persistent node; parents as containers).
-- @return true, or nil, msg, code
function Barrier:set()
  local b = barrier_fields(self, "set")
  return succeeded(call_op(b.client, b.client:session_timeout(), "_create",
    b.path, nil, "persistent"))
end

--- Take the barrier down.  @return true, or nil, msg, code
function Barrier:remove()
  local b = barrier_fields(self, "remove")
  return succeeded(call_op(b.client, b.client:session_timeout(), "_delete",
    b.path))
end

--- Wait while the barrier stands, at most `timeout` seconds.
-- @return true, or nil, "timeout", "timeout" (or another failure)
function Barrier:wait(timeout)
  local b = barrier_fields(self, "wait")
  timeout = check_timeout(timeout, 1, "wait")
  return succeeded(call_op(b.client, timeout, "_wait_gone", b.path))
end

local DoubleBarrier = { __name = "zklock.double_barrier" }
DoubleBarrier.__index = DoubleBarrier

--- A double barrier (the ZooKeeper recipe): `enter()` returns once
-- `members` have entered; `leave()` once all have left.  Every wake-up is
-- checked again (no early return on a spurious wake-up); a timed-out enter
-- removes its node; more than `members` may enter.
function client_methods:double_barrier(path, members)
  if not core.is_client(self) then
    argerror(1, "double_barrier", "zklock client expected")
  end
  check_path(path, 1, "double_barrier", R.RECIPE_PATH_MAX)
  check_count(members, 2, "double_barrier", "members")
  return box(DoubleBarrier, { client = self, path = path, members = members,
    ours = path .. "/" .. core.uuid(), entered = false })
end

-- Dropped while entered: take our member node back (asynchronously), so
-- the others' leave() does not wait for it until our session ends.
function DoubleBarrier.__gc(self)
  local d = unbox(self)
  if d and d.entered then pcall(d.client._delete, d.client, d.ours) end
end

local function db_fields(self, fname)
  return checked(self, DoubleBarrier, fname, "double barrier")
end

-- enter or leave: `entered` is the state it needs before, the opposite after
local function db_step(self, fname, timeout, entered)
  local d = db_fields(self, fname)
  timeout = check_timeout(timeout, 1, fname)
  if d.entered ~= entered then
    argerror(1, fname, (entered and "not entered " or "already entered ")
      .. d.path)
  end
  local ok, msg, code = call_op(d.client, timeout, "_db", fname, d.path,
    d.ours, d.members)
  if not ok then return nil, msg, code end
  d.entered = not entered
  return true
end

--- Enter; waits until `members` have entered.  @return true, or nil, msg,
-- code ("timeout": our node is removed again)
function DoubleBarrier:enter(timeout)
  return db_step(self, "enter", timeout, false)
end

--- Leave; waits until every member has left.  @return true, or nil, msg,
-- code
function DoubleBarrier:leave(timeout)
  return db_step(self, "leave", timeout, true)
end

return { Barrier = Barrier, DoubleBarrier = DoubleBarrier }
