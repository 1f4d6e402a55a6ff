-- Lock caching (docs/api.md, "Lock caching"; docs/design.md, section
-- 4.13): after the last release of a lock with `linger`, its node stays
-- until someone else wants it, and the object's next acquire holds it
-- again with no request.  The stages of an acquire (reuse, and the watch
-- on a node just taken) and of a release (keep).  C's half: a node held
-- again with no request (src/core).
local core = require "zklock.core"
local check = require "zklock.rt.check"
local wait = require "zklock.rt.wait"
local node = require "zklock.lock.node"
local cohort = require "zklock.lock.cohort"
check.internal_file()

local M = {}

local now = core.now
local await = wait.await

-- Hold the lingering node `att` again, if nobody else showed up.  The
-- first listing of the directory may still be out (a release right after
-- the hold began): its answer is awaited, one round trip, within the
-- acquire's timeout.  True: held.
local function relock(client, att, max_hold, timeout)
  local r = att:relock(max_hold, true)
  if r ~= "listing" then return r end
  local answered = { poll = function()
    local _, gen = att:poll()
    r = att:relock(max_hold, true)
    return r == "listing" and "pending" or "done", gen
  end }
  if await(client, answered, timeout and now() + timeout) == "timeout" then
    r = att:relock(max_hold, false) -- (not known in time: a new node)
  end
  return r == true
end

--- Does lock f linger (its constructor's `linger`)?  Its stages run
-- only then (lock/init.lua's plans).
function M.on(f)
  return f.linger ~= nil
end

--- Acquire: the node this object kept, held again with no request sent
-- (in a cohort, it becomes the cohort's node).  Not kept (someone else
-- queued, or it is gone): the next stages take a new one.
function M.reuse_stage(f, a)
  local cached = f.lingering
  if not cached then return nil end
  f.lingering = nil
  if not relock(f.client, cached, a.max_hold or f.max_hold, a.timeout) then
    return nil
  end
  node.hold_began(f, cached, 0)
  a.att, a.reused = cached, true
  if f.cohort then a.info = cohort.adopt(f, cached) end
  return true
end

--- Acquire, a node just taken: a lock that lingers learns from now on
-- whether anyone else queues (so that its release knows whether to keep).
function M.watch_stage(f, a)
  if f.linger and not a.reused then a.att:watch_contenders() end
end

--- Release: the node stays, when uncontended and held; else it goes the
-- plain way.  Not for a revoked hold (released in on_revoke, or its node
-- asked to revoke while its holder was busy: the revoker wants it gone),
-- a write node a downgraded read rests on, or while the object keeps
-- another node.
function M.keep_stage(f, r)
  if not f.linger or f.lingering or r.downgraded or r.why == "revoke" or
      r.own.att:revoke_asked() then
    return nil
  end
  local att = r.own.att
  if r.held and att:linger(f.linger) then
    node.hold_ended(f.client, att, true)
    if f.cohort then cohort.lingers(att, r.own.pass or 0) end
    f.lingering = att
    return true, true
  end
  return true, node.give_back(f.client, att, r.held)
end

return M
