-- Extending a hold's time limit (docs/api.md, "Extending a hold";
-- docs/design.md, section 9.6): `lock:extend(seconds)` moves the end of
-- the calling owner's hold to now + seconds, or removes it (math.huge).
-- C decides, under the client's mutex, whether the hold is still on
-- (attempt:extend): an ended hold is never revived, and an extend racing
-- the timer thread's end is decided there.  The end stays the C timer
-- thread's alone, whatever the runtime (zklock.ngx and zklock.loop are
-- woken by it as for any max_hold): nothing here arms a timer.  `hold`
-- (f, own, seconds) serves a lease too (its table is its hold record); a
-- multilock extends each member.  (The doc comments below are on
-- zklock's page of the reference: config.ld.)

--- @module zklock
local check = require "zklock.rt.check"
local op = require "zklock.rt.op"
local hold = require "zklock.lock.hold"
check.internal_file()

local M = {}

local type = type
local argerror = check.argerror

--- An extend's misuse raises, as acquire's argument errors do: `seconds`
-- (argument 1 of fname) not a number > 0 (math.huge: no limit; NaN is
-- refused), or the client closed.
function M.check(seconds, client, fname)
  if type(seconds) ~= "number" then
    argerror(1, fname, "number expected, got " .. type(seconds))
  end
  if seconds ~= seconds or seconds <= 0 then -- (NaN too)
    argerror(1, fname, "seconds must be > 0 (math.huge: no limit)")
  end
  local c, msg = op.closed(client)
  if c then argerror(1, fname, msg) end
end

--- Extend hold `own` of f (a lock's hold record, or anything with its
-- fields: `att`, `ended`, `over`): true, or nil, msg, "lock_lost" when it
-- has ended (nothing changes).
function M.hold(f, own, seconds)
  if own.ended or (f.single and f.current ~= own) or not hold.live(own) or
      not own.att:extend(seconds) then
    return nil, hold.lost_msg(own), "lock_lost"
  end
  return true
end

local Lock = {} -- (this module's methods of the class: hold.define)

--- @type Lock

--- Move the end of the calling coroutine's hold to `seconds` from now:
-- the whole hold, every level of a reentrant one.  A hold without
-- `max_hold` gets one; `extend(math.huge)` removes it.  A hold that has
-- ended (past its limit, lost, revoked, released by another coroutine)
-- is not revived.  The next hold (a lingering node taken again, a hold
-- passed within a lock cohort) has its own `max_hold`.  A read hold
-- downgraded from a write still ends with the write hold.  Raises for
-- `seconds` not a number > 0, a closed client, or a lock the calling
-- coroutine does not hold.
-- @number seconds from now (math.huge: no limit)
-- @return true, or nil, message, `"lock_lost"` (the hold had ended)
function Lock:extend(seconds)
  local f = hold.fields(self, "extend")
  M.check(seconds, f.client, "extend")
  local own = hold.hold_of(f) -- (a semaphore mutex: the caller's own)
  if not own then
    argerror(1, "extend", f.name .. " " .. f.path ..
      " is not held by the calling coroutine")
  end
  return M.hold(f, own, seconds)
end

hold.define(Lock)

return M
