-- The lock class's table and its hold records (docs/design.md, section
-- 4.14): what every stage of the lock layer reads of a hold.  The bottom
-- of lua/zklock/lock/: it requires no other module of the folder.  The
-- modules that give the class methods hand them to `define`; nothing
-- else writes the class.
--
-- A hold record lives from the acquire that takes it until its owner
-- lets go of it, and every way a hold ends is read from it:
--   att    the attempt: our node (lost, past max_hold: att:held() is false)
--   count  levels taken by its owner (reentrant kinds)
--   over   a downgraded read: the write attempt whose node keeps later
--          writers out; the read hold lasts only while that one does
--   keep   the write attempt kept for this reader, given back with it
--   pass   the hold's pass within a lock cohort (0 or nil: it took the
--          node)
--   anchor what the stage that took the hold keeps alive as long as the
--          hold: a cohort waiter's info, its sentinel in it (cohort.lua)
--   key    the attempt's serial, under which its callbacks are registered
--   known  { path, data, version }: written with a release that passes
--   ended  why it ended before its owner let go: "revoked", "lost" (let
--          go of in those callbacks), "released by another coroutine"
--          (a semaphore mutex), "taken over" (ditto, lost and held anew)
-- f.owners: owner key -> its hold (weak keys; nothing in a hold refers to
-- its owner: LuaJIT's weak keys are not ephemerons).  A semaphore mutex,
-- which any coroutine may release, also has f.current, the object's hold.
local core = require "zklock.core"
local check = require "zklock.rt.check"
local events = require "zklock.rt.events"
check.internal_file()

local M = {}

local pairs = pairs
local me, unbox = events.me, core.unbox

--- The lock class: a lock object is userdata (`core.box`) over its
-- fields table f.
local Lock = {}
Lock.__index = Lock
M.Lock = Lock

--- A module's methods of the class (name -> function), added to it.
function M.define(methods)
  for name, fn in pairs(methods) do
    assert(Lock[name] == nil, name)
    Lock[name] = fn
  end
end

--- The fields of lock object `self`, or the standard argument error of
-- method `fname`.
function M.fields(self, fname)
  return check.checked(self, Lock, fname, "lock")
end

--- Does hold h still hold?
function M.live(h)
  if h.ended or not h.att:held() then return false end
  local w = h.over
  return w == nil or w:held()
end

--- The calling owner's hold of f, and whether it is its own: with
-- `any`, a semaphore mutex's current hold when the caller has none (any
-- coroutine may release it; is_held, token and fenced writes are the
-- caller's own only).
function M.hold_of(f, any)
  local h = f.owners[me()]
  if h then return h, true end
  if any and f.single and f.current then return f.current, false end
  return nil
end

--- Does f have a callback for `what` ("revoke_fn" or "lost_fn"), of its
-- own or of a multilock it is a member of (f.groups: events.watch_hold)?
function M.wants(f, what)
  if f[what] then return true end
  local groups = f.groups
  if not groups then return false end
  for ml in pairs(groups) do
    local m = unbox(ml)
    if m and m[what] then return true end
  end
  return false
end

--- The message of a hold that ended before its owner let go.
function M.lost_msg(h)
  return "lock lost" .. (h.ended and ": " .. h.ended or "")
end

return M
