-- The multi-lock: all or nothing over several locks, in a canonical
-- order.  Loading this module adds `multilock` to the client methods.
-- (The doc comments below are on zklock's page of the reference:
-- config.ld.)

--- @module zklock
local core = require "zklock.core"
local check = require "zklock.rt.check"
local events = require "zklock.rt.events"
local guard = require "zklock.rt.guard"
local L = require "zklock.lock"
local token = require "zklock.token"
check.internal_file()
local WEAK_KEYS = { __mode = "k" }

local box, unbox = core.box, core.unbox
local client_methods = core.client_methods
local type, tostring, pcall, ipairs, pairs, getmetatable, setmetatable =
  type, tostring, pcall, ipairs, pairs, getmetatable, setmetatable
local now = core.now
local me, argerror, check_timeout = events.me, check.argerror, check.check_timeout
local Lock = L.Lock
local checked = check.checked

local MultiLock = { __name = "zklock.multilock" }
MultiLock.__index = MultiLock
local RANK = { write = 1, mutex = 2, lease = 3, read = 4 }

--- @type Client

--- All or nothing over lock objects (mutexes, semaphore mutexes, `rw.read`,
-- `rw.write`): acquired in a canonical order (by path), so two callers
-- passing different orders cannot deadlock, within one deadline for the
-- whole set, and released in reverse.  Anything else, or one lock twice,
-- raises.
-- @tparam {Lock,...} locks the locks
-- @return a multilock (see MultiLock)
function client_methods:multilock(locks)
  if not core.is_client(self) then
    argerror(1, "multilock", "zklock client expected")
  end
  if type(locks) ~= "table" or #locks == 0 then
    argerror(1, "multilock", "non-empty array of locks expected")
  end
  local list, seen = {}, {}
  for i, l in ipairs(locks) do
    local f = getmetatable(l) == Lock and unbox(l)
    if not f then
      argerror(1, "multilock", ("element %d is not a zklock lock"):format(i))
    end
    local key = f.path .. "\0" .. RANK[f.kind]
    if seen[key] then -- (two objects for one lock would wait for each other)
      argerror(1, "multilock", ("element %d is the same lock as element %d")
        :format(i, seen[key]))
    end
    seen[key] = i
    list[#list + 1] = { lock = l, key = key }
  end
  table.sort(list, function(a, b) return a.key < b.key end)
  local sorted = {}
  for i, e in ipairs(list) do sorted[i] = e.lock end
  -- owners: owner key -> levels held; ended: owner key -> why its hold
  -- ended in a member's callback (its own release then says lock_lost)
  local ml = box(MultiLock, { locks = sorted, client = self,
    owners = setmetatable({}, WEAK_KEYS),
    ended = setmetatable({}, WEAK_KEYS) })
  -- each member tells this multilock's callbacks too (rt/events.lua;
  -- weak: a member does not keep the multilock alive)
  for _, l in ipairs(sorted) do
    local f = unbox(l)
    f.groups = f.groups or setmetatable({}, WEAK_KEYS)
    f.groups[ml] = true
  end
  return ml
end

local function multi_fields(self, fname)
  return checked(self, MultiLock, fname, "multilock")
end

--- Several locks taken all or nothing, as `zk:multilock(locks)` returns
-- them.  `<close>` releases it (Lua 5.4).
-- @type MultiLock

--- Acquire every lock, in the canonical order, within one deadline; all
-- or nothing: on a failure (or an error) the locks taken so far are
-- released.
-- @tparam[opt] number timeout seconds (nil: for ever)
-- @tparam[opt] table opts `max_hold` (seconds), for every member's hold
-- @return the multilock, or nil, message, code of the failed member
function MultiLock:acquire(timeout, opts)
  local m = multi_fields(self, "acquire")
  timeout = check_timeout(timeout, 1, "acquire")
  L.check_opts(opts, 2, "acquire")
  if opts and opts.read ~= nil then
    argerror(2, "acquire", "a multilock reads nothing with its acquire " ..
      "(read)")
  end
  local deadline = timeout and now() + timeout
  local co = me()
  m.ended[co] = nil
  local taken = 0
  -- abandoned (an error out of a wait, coroutine.close()): the members
  -- taken so far are let go of at once (issue 22, item 3)
  local function drop()
    for j = taken, 1, -1 do L.drop_level(m.locks[j], co) end
    taken = 0
  end
  local ok, msg, code = guard.guarded(drop, function()
    for i, l in ipairs(m.locks) do
      local left = deadline and math.max(0, deadline - now())
      local held, amsg, acode = l.acquire(l, left, opts)
      if not held then return nil, amsg, acode end
      taken = i
    end
    return true
  end)
  if ok then -- all of them, and all still held?
    for _, l in ipairs(m.locks) do
      if not l:is_held() then
        ok, msg, code = nil, ("multilock: %s was lost while the others " ..
          "were acquired"):format(unbox(l).path), "lock_lost"
        break
      end
    end
  end
  if not ok then -- all or nothing
    for j = taken, 1, -1 do pcall(m.locks[j].release, m.locks[j]) end
    return nil, msg, code
  end
  m.owners[co] = (m.owners[co] or 0) + 1
  return self
end

--- Release every lock, in reverse order, whatever happens to any of them
-- (Curator InterProcessMultiLock: all are released, then the first failure
-- is reported).  A member no longer held by the caller (released on its
-- own, say by an `on_revoke` callback) counts as lost.
-- @return true; or nil, message, code of the first failure: `"lock_lost"`
--  for a member lost or released elsewhere (the message names it), else
--  the member's own code
function MultiLock:release()
  local m = multi_fields(self, "release")
  local co = me()
  if not m.owners[co] and m.ended[co] then -- (released in a callback)
    local why = m.ended[co]
    m.ended[co] = nil
    return nil, "multilock: lock lost: " .. why, "lock_lost"
  end
  if not m.owners[co] then
    argerror(1, "release", "multilock not held by the calling coroutine")
  end
  m.owners[co] = m.owners[co] > 1 and m.owners[co] - 1 or nil
  local why = events.acting_why()
  if not m.owners[co] and (why == "revoke" or why == "lost") then
    m.ended[co] = why == "revoke" and "revoked" or "lost"
  end
  local r1, r2, r3 = true, nil, nil
  for i = #m.locks, 1, -1 do
    local l = m.locks[i]
    -- (in this multilock's callback every member's hold ends for its
    -- owner as in its own callback, not only the one the news is about:
    -- its owner hears lock_lost from it, as from the multilock)
    local own = m.ended[co] and unbox(l).owners[co]
    local fine, ok, msg, code = pcall(events.acting_about, own and own.key,
      l.release, l)
    if not fine then -- (not held any more: released behind our back)
      ok, msg, code = nil, ("was not held any more (%s)"):format(
        tostring(ok)), "lock_lost"
    end
    if not ok and r1 then
      r1, r2, r3 = nil, ("multilock: %s: %s"):format(unbox(l).path,
        tostring(msg)), code
    end
  end
  return r1, r2, r3
end

-- A multilock's callbacks: fn(multilock, member), on behalf of the owner
-- (so `multilock:release()` in it releases its hold); the members' holds
-- taken by this multilock hear them from now on.
local function set_callback(self, fname, key, fn)
  local m = multi_fields(self, fname)
  if type(fn) ~= "function" then
    argerror(1, fname, "function expected, got " .. type(fn))
  end
  m[key] = fn
  for co in pairs(m.owners) do
    for _, l in ipairs(m.locks) do
      local f = unbox(l)
      local own = f.owners[co]
      if own and not own.ended then L.arm_callbacks(f, own, l, co) end
    end
  end
  return self
end

--- Make the multilock revocable: when someone asks any member's holder
-- to let go (`zklock.revoke`, Curator's `Revoker`), `fn(multilock, lock)`
-- runs, `lock` the member asked, on behalf of the holder (as a lock's
-- `on_revoke`), so `multilock:release()` in it releases every member.
-- Applies to the current hold and to later ones; a member's own
-- `on_revoke` runs too, before it.
-- @func fn `fn(multilock, lock)`
-- @return the multilock
function MultiLock:on_revoke(fn)
  return set_callback(self, "on_revoke", "revoke_fn", fn)
end

--- Call `fn(multilock, lock)` when a member's hold, taken by this
-- multilock, is lost without a release (as a lock's `on_lost`: the
-- session expired, its node deleted, its `max_hold` ran out): `lock` is
-- the member lost.  By then `is_held()` is false, and `release()`
-- releases the others and answers `lock_lost` naming it.  A member's own
-- `on_lost` runs too, before it.
-- @func fn `fn(multilock, lock)`
-- @return the multilock
function MultiLock:on_lost(fn)
  return set_callback(self, "on_lost", "lost_fn", fn)
end

--- True while the calling coroutine holds the multilock and every
-- member is still held.
-- @treturn boolean
function MultiLock:is_held()
  local m = multi_fields(self, "is_held")
  if not m.owners[me()] then return false end
  for _, l in ipairs(m.locks) do
    if not l:is_held() then return false end
  end
  return true
end

--- The tokens of every lock, in the canonical order; and their passes
-- (0 outside a lock cohort: docs/api.md, "Lock cohorts").  With
-- `"string"`, one string per lock, in the form that sorts (docs/api.md,
-- "Tokens for outside resources").
-- @tparam[opt] string form `"string"` for the string form
-- @treturn ?{number,...} the tokens, or nil when not held
-- @treturn ?{number,...} the passes
function MultiLock:token(form)
  local m = multi_fields(self, "token")
  token.check_form(form, 1, "token")
  if not self:is_held() then return nil end
  local t, passes = {}, {}
  for i, l in ipairs(m.locks) do
    if form then
      t[i] = l:token(form)
    else
      local tk, pass = l:token()
      t[i], passes[i] = tk, pass or 0
    end
  end
  if form then return t end
  return t, passes
end

--- The participants of every lock, by path: `{ [path] = { node, ... } }`.
-- @tparam[opt] number timeout seconds (default: the session timeout)
-- @return the table, or nil, message, code
function MultiLock:participants(timeout)
  local m = multi_fields(self, "participants")
  local out = {}
  for _, l in ipairs(m.locks) do
    local p, msg, code = l:participants(timeout)
    if not p then return nil, msg, code end
    out[unbox(l).path] = p
  end
  return out
end

--- Move the end of every member's hold to `seconds` from now (see
-- `lock:extend`), once each is known to be held; if one has ended, none
-- is extended and the answer names it.  Raises for `seconds` not a
-- number > 0, a closed client, or a multilock the calling coroutine does
-- not hold.
-- @number seconds from now (math.huge: no limit)
-- @return true, or nil, message, `"lock_lost"` (the message names the
--  member that ended)
function MultiLock:extend(seconds)
  local m = multi_fields(self, "extend")
  L.check_extend(seconds, m.client, "extend")
  local co = me()
  if not m.owners[co] then
    if m.ended[co] then -- (released in a member's callback)
      return nil, "multilock: lock lost: " .. m.ended[co], "lock_lost"
    end
    argerror(1, "extend", "multilock not held by the calling coroutine")
  end
  for _, l in ipairs(m.locks) do
    if not l:is_held() then
      return nil, ("multilock: %s: lock lost"):format(unbox(l).path),
        "lock_lost"
    end
  end
  for _, l in ipairs(m.locks) do -- (no wait between: only C's end races)
    local ok, msg, code = l:extend(seconds)
    if not ok then
      return nil, ("multilock: %s: %s"):format(unbox(l).path, msg), code
    end
  end
  return true
end

function MultiLock.__close(self)
  local m = unbox(self)
  if m and m.owners[me()] then self:release() end
end

return { MultiLock = MultiLock }
