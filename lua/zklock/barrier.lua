-- Barriers: the barrier (Curator DistributedBarrier) and the double
-- barrier (the ZooKeeper recipe), both carried out by C operations.
-- Loading this module adds `barrier` and `double_barrier` to the client
-- methods.  (The doc comments below are on zklock's page of the
-- reference: config.ld.)

--- @module zklock
local core = require "zklock.core"
local check = require "zklock.rt.check"
local op = require "zklock.rt.op"
check.internal_file()

local box, unbox = core.box, core.unbox
local client_methods = core.client_methods
local pcall = pcall
local argerror, checked = check.argerror, check.checked
local check_path, check_count = check.check_path, check.check_count
local check_timeout = check.check_timeout
local call_op, succeeded = op.call_op, op.succeeded

local Barrier = { __name = "zklock.barrier" }
Barrier.__index = Barrier

--- @type Client

--- A barrier (Curator's `DistributedBarrier`): `set()` raises it, `wait()`
-- blocks while it stands, `remove()` lets everyone through.
-- @string path the barrier's node
-- @return a barrier (see Barrier)
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

--- A barrier, as `zk:barrier(path)` returns it.
-- @type Barrier

--- Raise the barrier (a persistent node; parents as containers).
-- @return true, or nil, message, code
function Barrier:set()
  local b = barrier_fields(self, "set")
  return succeeded(call_op(b.client, b.client:session_timeout(), "_create",
    b.path, nil, "persistent"))
end

--- Take the barrier down.  As Curator's, true when it was not there.
-- @return true, or nil, message, code
function Barrier:remove()
  local b = barrier_fields(self, "remove")
  return succeeded(call_op(b.client, b.client:session_timeout(), "_delete",
    b.path))
end

--- Wait while the barrier stands, at most `timeout` seconds.
-- @tparam[opt] number timeout seconds (nil: for ever)
-- @return true once it is gone, or nil, `"timeout"`, `"timeout"` (or
--  another failure)
function Barrier:wait(timeout)
  local b = barrier_fields(self, "wait")
  timeout = check_timeout(timeout, 1, "wait")
  return succeeded(call_op(b.client, timeout, "_wait_gone", b.path))
end

local DoubleBarrier = { __name = "zklock.double_barrier" }
DoubleBarrier.__index = DoubleBarrier

--- @type Client

--- A double barrier (the ZooKeeper recipe): `enter()` returns once
-- `members` have entered; `leave()` once all have left.  Every wake-up is
-- checked again (no early return on a spurious wake-up); more than
-- `members` may enter.
-- @string path the barrier's directory
-- @int members how many must enter (1 to 2^31 - 1)
-- @return a double barrier (see DoubleBarrier)
function client_methods:double_barrier(path, members)
  if not core.is_client(self) then
    argerror(1, "double_barrier", "zklock client expected")
  end
  check_path(path, 1, "double_barrier", check.RECIPE_PATH_MAX)
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

--- A double barrier, as `zk:double_barrier(path, members)` returns it.
-- One collected while entered deletes its member node.
-- @type DoubleBarrier

--- Enter, and wait until `members` have entered.  Entering twice raises.
-- @tparam[opt] number timeout seconds (nil: for ever)
-- @return true, or nil, message, code (`"timeout"`: our node is removed
--  again)
function DoubleBarrier:enter(timeout)
  return db_step(self, "enter", timeout, false)
end

--- Leave, and wait until every member has left.  Leaving a barrier not
-- entered raises.
-- @tparam[opt] number timeout seconds (nil: for ever)
-- @return true, or nil, message, code
function DoubleBarrier:leave(timeout)
  return db_step(self, "leave", timeout, true)
end

return { Barrier = Barrier, DoubleBarrier = DoubleBarrier }
