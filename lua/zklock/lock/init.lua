-- Locks: the reentrant mutex, the semaphore mutex and the read/write
-- lock, one class (`Lock`, lock/hold.lua) whose kinds are sets of fields;
-- a lock object is userdata (`core.box`) whose state machine runs in C.
-- This module is the owner side: the constructors, the hold records of
-- each owner (reentrancy, callbacks, token, node, is_held), and acquire
-- and release as ordered lists of stages, each stage a capability in its
-- own module of this folder (docs/design.md, section 17).  Loading it
-- adds `mutex` and `semaphore_mutex` to the client methods (zklock.rwlock
-- adds `rwlock`), and gives the class every method: this module requires
-- those that define some (holders.lua, guarded.lua, extend.lua).  (The
-- doc comments below are on zklock's page of the reference: config.ld.)

--- @module zklock
local core = require "zklock.core"
local check = require "zklock.rt.check"
local events = require "zklock.rt.events"
local op = require "zklock.rt.op"
local plug = require "zklock.rt.plug"
local session = require "zklock.rt.session"
local hold = require "zklock.lock.hold"
local node = require "zklock.lock.node"
local cohort = require "zklock.lock.cohort"
local linger = require "zklock.lock.linger"
local guarded = require "zklock.lock.guarded"
local downgrade = require "zklock.lock.downgrade"
require "zklock.lock.holders" -- (participants, holders)
local extend = require "zklock.lock.extend" -- (extend)
local token = require "zklock.token"
check.internal_file()
local WEAK_KEYS = { __mode = "k" }

local L = {}

local unbox = core.unbox
local client_methods = core.client_methods
local type, select, setmetatable, pairs, ipairs =
  type, select, setmetatable, pairs, ipairs
local hooks, me, argerror = plug.hooks, events.me, check.argerror
local check_path, check_timeout = check.check_path, check.check_timeout
local closed = op.closed
local box = core.box

local Lock, fields = hold.Lock, hold.fields
local live, hold_of, lost_msg = hold.live, hold.hold_of, hold.lost_msg

-- ---------------------------------------------------------------------------
-- the stages (docs/design.md, section 17).  An acquire, once the owner
-- side found no hold of the caller's to enter again, takes its hold with
-- the first of TAKE that applies, then runs TAKEN in order on it.  A
-- TAKE stage answers nil (does not apply), true (the hold is taken:
-- a.att, a.info), or false, msg, code (the acquire fails); a TAKEN stage
-- nil (go on) or false, msg, code (the hold was let go of: it fails).
-- Each entry: the stage, and which locks it can apply to (nil: every
-- lock; else a test of the lock's fields, fixed at construction).  A
-- lock object runs only the stages that can apply to it: its plan, made
-- once per combination (issue 34: a hold pays for what it uses).
local TAKE = {
  -- the node this object kept (lock caching)
  { linger.reuse_stage, linger.on },
  -- the node of this client's cohort, passed on
  { cohort.take_stage, cohort.on },
  -- a node of our own
  { node.take_stage },
}
local TAKEN = {
  -- a node that may linger watches for others
  { linger.watch_stage, linger.on },
  -- the read with the acquire
  { guarded.read_stage },
  -- a downgraded read ends with the write hold
  { downgrade.rest_stage, downgrade.on },
}
-- A release's last level ends the hold's node with the first of GIVE
-- that applies: it answers nil (does not apply) or true and the
-- release's own answer.
local GIVE = {
  -- to the next waiter of this client's cohort
  { cohort.pass_stage, cohort.on },
  -- with the write, in one request
  { guarded.write_back_stage },
  -- kept, for the object's next acquire
  { linger.keep_stage, linger.on },
  -- kept, while our downgraded read needs it
  { downgrade.keep_stage, downgrade.on },
  -- given back
  { node.give_stage },
}

-- f's plan: { take, taken, give }, the stages of each list that can apply
-- to f, in order; shared by the locks whose tests answer alike.
local plans = {}
local function plan_of(f)
  local key = {}
  for _, list in ipairs { TAKE, TAKEN, GIVE } do
    for _, e in ipairs(list) do
      key[#key + 1] = (not e[2] or e[2](f)) and 1 or 0
    end
  end
  key = table.concat(key)
  local p = plans[key]
  if not p then
    local function pick(list)
      local out = {}
      for _, e in ipairs(list) do
        if not e[2] or e[2](f) then out[#out + 1] = e[1] end
      end
      return out
    end
    p = { take = pick(TAKE), taken = pick(TAKEN), give = pick(GIVE) }
    plans[key] = p
  end
  return p
end

-- A new hold of f, taken by the first of its plan's TAKE that applies,
-- then its TAKEN on it (a: the acquire's { timeout, max_hold, read,
-- ignore, over }): true (a.att, a.info, a.data, a.version), or nil, msg,
-- code.  Every kind of hold is taken here: a lock's, a semaphore's lease.
local function take_hold(f, a)
  local p = f.plan
  local take, taken_stages = p.take, p.taken
  local msg, code
  for i = 1, #take do
    local taken
    taken, msg, code = take[i](f, a)
    if taken then break end
    if taken == false then return nil, msg, code end
  end
  for i = 1, #taken_stages do
    local failed
    failed, msg, code = taken_stages[i](f, a)
    if failed == false then return nil, msg, code end
  end
  return true
end
L.take_hold = take_hold

-- The node of hold r.own ends with the first of its plan's GIVE that
-- applies (r: the release's { own, held, write, data, why, reader,
-- downgraded }): the release's answer.  Every kind of hold ends here.
local function give_hold(f, r)
  local give = f.plan.give
  for i = 1, #give do
    local done, ok, msg, code = give[i](f, r)
    if done then return ok, msg, code end
  end
end
L.give_hold = give_hold

-- acquire's options (a multilock's: those that take no read refuse it by
-- name); a lock's and a semaphore's take on_queued too
local ACQUIRE_OPTIONS = check.options({ "max_hold", "read" })
L.HOLD_ACQUIRE_OPTIONS = check.options({ "max_hold", "read", "on_queued" })

-- opts (argument n of fname): nil or { max_hold = seconds > 0,
-- read = path, on_queued = function }, no other key (`allowed`, default
-- ACQUIRE_OPTIONS, says which); returns its max_hold, read and
-- on_queued.
local function check_opts(opts, n, fname, allowed)
  if opts == nil then return nil end
  if type(opts) ~= "table" then
    argerror(n, fname, "table of options expected, got " .. type(opts))
  end
  check.check_options(opts, allowed or ACQUIRE_OPTIONS, n, fname)
  local mh = opts.max_hold
  if mh ~= nil and (type(mh) ~= "number" or not (mh > 0 and mh < 1e9)) then
    argerror(n, fname, "max_hold must be a number of seconds > 0")
  end
  if opts.read ~= nil then check_path(opts.read, n, fname) end
  local q = opts.on_queued
  if q ~= nil and type(q) ~= "function" then
    argerror(n, fname, "on_queued must be a function, got " .. type(q))
  end
  return mh, opts.read, q
end
L.check_opts = check_opts

-- the lock constructors' options (mutex, semaphore_mutex, rwlock,
-- semaphore): those kinds that do not linger refuse it by name
local LOCK_OPTIONS = check.options({ "max_hold", "linger", "cohort",
  "pass_limit", "ttl" })

-- A lock object of `kind` (its fields: kind, markers, name, max_leases,
-- single) on path; `partner`: the other lock of a read/write lock.
local function new_lock(client, path, fname, kind, opts, n, partner)
  if not core.is_client(client) then
    argerror(1, fname, "zklock client expected")
  end
  check_path(path, 1, fname, check.RECIPE_PATH_MAX)
  local max_hold = check_opts(opts, n or 2, fname, LOCK_OPTIONS)
  local keep_s = opts and opts.linger
  if keep_s ~= nil then
    if type(keep_s) ~= "number" or not (keep_s > 0 and keep_s < 1e9) then
      argerror(n or 2, fname, "linger must be a number of seconds > 0")
    end
    if kind.kind == "lease" then
      argerror(n or 2, fname, "a semaphore does not linger (linger): " ..
        "see docs/api.md, lock caching")
    end
    if kind.kind == "read" then keep_s = nil end -- (the write lock's only)
  end
  -- lock cohorts (docs/api.md, "Cohorts"): the lock's own choice, else
  -- its client's, else on; mutexes and write locks only
  local on, limit
  if opts then on, limit = session.check_cohort(opts, n or 2, fname) end
  local dflt = session.cohort_defaults(client) or {}
  if on == nil then on = dflt.on end
  if on == nil then on = session.COHORT_DEFAULT end
  if on and opts and opts.cohort and kind.kind == "lease" then
    argerror(n or 2, fname, "a semaphore does not queue in a cohort " ..
      "(cohort): see docs/api.md, Cohorts")
  end
  if kind.kind ~= "mutex" and kind.kind ~= "write" then on = false end
  -- a hold on a TTL node (docs/api.md, "Holds that outlive the process"):
  -- a mutex's, alone (one node per participant id: no cohort to pass it
  -- in, no cache to keep it in)
  local ttl = opts and opts.ttl
  if ttl ~= nil then
    if type(ttl) ~= "number" or not (ttl >= 0.001 and ttl < 1e9) then
      argerror(n or 2, fname, "ttl must be a number of seconds > 0")
    end
    if kind.kind ~= "mutex" or kind.single then
      argerror(n or 2, fname, "only a mutex holds on a TTL node (ttl): " ..
        "see docs/api.md, Holds that outlive the process")
    end
    if keep_s or opts.cohort then
      argerror(n or 2, fname, "a lock with ttl neither lingers nor " ..
        "queues in a cohort (ttl with " .. (keep_s and "linger" or
        "cohort") .. "): see docs/api.md, Holds that outlive the process")
    end
    on = false
  end
  -- a semaphore's leases live under <path>/leases, its acquirers queue on
  -- the internal lock <path>/locks (Curator InterProcessSemaphoreV2)
  local dir = kind.kind == "lease" and path .. "/leases" or path
  local f = {
    client = client, path = path, dir = dir, kind = kind.kind,
    max_leases = kind.max_leases or 1, markers = kind.markers,
    name = kind.name, owners = setmetatable({}, WEAK_KEYS),
    -- (owners: see "holds" below)
    single = kind.single, max_hold = max_hold, linger = keep_s, ttl = ttl,
    cohort = on, pass_limit = limit or dflt.pass_limit or session.PASS_LIMIT_DEFAULT,
    metric = kind.name:gsub("^zklock%.", ""), -- (zklock.metrics' kind)
    partner = partner and unbox(partner),
  }
  if partner then f.partner.partner = f end
  f.plan = plan_of(f)
  if partner then f.partner.plan = plan_of(f.partner) end
  return box(Lock, f)
end

--- @type Client

--- A reentrant mutex, on the nodes of Curator's `InterProcessMutex`
-- (`<path>/_c_<uuid>-lock-<seq>`).
-- @string path the lock's directory
-- @tparam[opt] table opts `max_hold` (seconds: the default of every
--  acquire), `linger` (seconds: keep the node after the last release, for
--  a quick acquire again; docs/api.md, "Lock caching")
-- @return a lock (see Lock)
function client_methods:mutex(path, opts)
  return new_lock(self, path, "mutex",
    { kind = "mutex", markers = "mutex", name = "zklock.mutex" }, opts)
end

-- Register a hold (a lock's, or a lease: `lock` is then the lease, and
-- `from` its semaphore's fields) for its callbacks; a revocable one has C
-- watch the node's data for "__REVOKE__".
local function arm_callbacks(f, own, lock, owner, from)
  own.key = own.att:serial() -- (events name their attempt)
  events.watch_hold(f.client, own.key, lock, owner, from)
  if hold.wants(from or f, "revoke_fn") then own.att:revocable() end
end
L.arm_callbacks = arm_callbacks

-- Does a hold of f have callbacks to arm?
local function armed(f)
  return hold.wants(f, "revoke_fn") or hold.wants(f, "lost_fn")
end
L.armed = armed

--- A lock: a mutex, a semaphore mutex, or either lock of a read/write lock
-- (`rw.read`, `rw.write`).  A hold belongs to the coroutine that took it
-- (under OpenResty, to the request).
-- @type Lock

--- Make the lock revocable (Curator `makeRevocable`): when someone asks
-- (`zklock.revoke`, or Curator's `Revoker`), `fn(lock)` runs in Lua, on
-- behalf of the holder, inside a zklock wait or `zk:dispatch()`, so
-- `lock:release()` in it releases the hold.  Applies to the current hold
-- and to later ones.
-- @func fn `fn(lock)`
-- @return the lock
function Lock:on_revoke(fn)
  local f = fields(self, "on_revoke")
  if type(fn) ~= "function" then
    argerror(1, "on_revoke", "function expected, got " .. type(fn))
  end
  if f.ttl then
    argerror(1, "on_revoke", "a lock with ttl is not revocable: its " ..
      "renewals write its node (docs/api.md, Holds that outlive the " ..
      "process)")
  end
  f.revoke_fn = fn
  for co, own in pairs(f.owners) do
    if not own.ended then arm_callbacks(f, own, self, co) end
  end
  return self
end

--- Call `fn(lock)` when a hold of this lock is lost without a release:
-- the session expired, or the server was not heard from for the session
-- timeout (it may have expired the session: the lock may be someone
-- else's now).  Runs in Lua on behalf of the holder, inside a zklock wait,
-- `zk:dispatch()`, or zklock.ngx's timer.  By then `is_held()` is false;
-- `release()` answers nil, "lock lost", "lock_lost" and forgets the hold.
-- Applies to the current hold and to later ones.
-- @func fn `fn(lock)`
-- @return the lock
function Lock:on_lost(fn)
  local f = fields(self, "on_lost")
  if type(fn) ~= "function" then
    argerror(1, "on_lost", "function expected, got " .. type(fn))
  end
  f.lost_fn = fn
  for co, own in pairs(f.owners) do
    if not own.ended then arm_callbacks(f, own, self, co) end
  end
  return self
end

--- @type Client

--- A non-reentrant mutex (Curator's `InterProcessSemaphoreMutex`): a
-- second acquire, even by the holder, waits like anyone else's; any
-- coroutine of the process may release it.  A semaphore of one lease, on
-- Curator's nodes: `<path>/locks` (the internal lock) and
-- `<path>/leases/_c_<uuid>-lease-<seq>`.
-- @string path the lock's directory
-- @tparam[opt] table opts `max_hold` (seconds: the default of every
--  acquire)
-- @return a lock (see Lock)
function client_methods:semaphore_mutex(path, opts)
  return new_lock(self, path, "semaphore_mutex",
    { kind = "lease", markers = "lease", name = "zklock.semaphore_mutex",
      single = true }, opts)
end

-- The owner's hold own, entered once more (a reentrant kind): no
-- request, but a plain read under the hold when asked for one.
local function enter_again(f, own, lock, timeout, read)
  if not live(own) then return nil, lost_msg(own), "lock_lost" end
  if read then
    local data, version, rcode = node.read_held(f.client, timeout, read)
    if data == nil and rcode then return nil, version, rcode end
    own.count = own.count + 1
    return lock, data, version
  end
  own.count = own.count + 1
  return lock
end

--- Acquire, waiting at most `timeout` seconds behind other holders;
-- `acquire(0)` is a try-lock.  The same coroutine may acquire a mutex or
-- a read/write lock again: it then must release as often.  A timed-out
-- acquire leaves no node behind.
-- @tparam[opt] number timeout seconds (nil: for ever)
-- @tparam[opt] table opts `max_hold` (seconds; default: the constructor's):
--  then the hold ends by itself, as a lost one (`is_held()` false,
--  `on_lost`, node deleted, `release()` answers `lock_lost`), counted from
--  the first acquire; `read` (a node path): read it with the acquire (not
--  for a semaphore mutex); `on_queued` (a function): called once, when the
--  acquire is queued, with the holds ahead of it (0: it holds at once;
--  docs/api.md, "A place in the queue")
-- @return the lock (with `read`: and the node's data and version, or nil
--  when there is no such node), or nil, message, code (`"timeout"`,
--  `"session_expired"`, `"closed"`...)
function Lock:acquire(timeout, opts)
  local f = fields(self, "acquire")
  timeout = check_timeout(timeout, 1, "acquire")
  local max_hold, read, on_queued = check_opts(opts, 2, "acquire",
    L.HOLD_ACQUIRE_OPTIONS)
  local client = f.client
  local c, msg, code = closed(client)
  if c then return nil, msg, code end
  local co = me()
  local own = f.owners[co]
  if own and own.ended then -- (its end was told: a new hold)
    f.owners[co], own = nil, nil
  end
  if own and not f.single then return enter_again(f, own, self, timeout,
    read) end
  -- a new hold: taken by the stages
  local ignore, over = downgrade.over(f, co)
  -- (the acquire's table becomes the hold record, hold.lua: one table a
  -- hold.  Sized by its constructor for 8 fields, which the stages' own
  -- fit in: a cohort's first waiter adds att, info, pass, fresh and s.)
  local a = { timeout = timeout, max_hold = max_hold, read = read,
    ignore = ignore, over = over, count = 1, on_queued = on_queued }
  local taken
  taken, msg, code = take_hold(f, a)
  if not taken then return nil, msg, code end
  local info = a.info
  own = a
  if info and info ~= a then a.pass, a.anchor = info.pass, info end
  if f.single then
    -- the object's previous hold ended without a release (its node went):
    -- its owner hears so
    local prev = f.current
    if prev then prev.ended = prev.ended or "taken over" end
    f.current = own
  end
  f.owners[co] = own
  if armed(f) then arm_callbacks(f, own, self, co) end
  if hooks.held then hooks.held(self, co) end
  -- (held with no queue told of: a cached node taken again; an error of
  -- on_queued gives the hold back, then is raised)
  if on_queued and not a.told then
    local ok, err = pcall(node.tell, a, 0)
    if not ok then
      self:release()
      error(err, 0)
    end
  end
  if read then return self, a.data, a.version end
  return self
end

--- Release one level of the calling coroutine's hold; the last deletes the
-- node and waits for the server to confirm, up to the session timeout.
-- Releasing a lock this coroutine does not hold raises.
-- @tparam[opt] table opts `{ write = path, data = string }`: write `data`
--  to node `path` in the same request that deletes our node, fenced (a
--  mutex or a write lock)
-- @return true (with `write`: and the node's new version and the write's
--  zxid, `0, 0` when it created the node); or nil, message, code:
--  `"lock_lost"` when the hold ended meanwhile (lost, past its `max_hold`,
--  revoked: nothing written), `"closed"` when the client was closed
function Lock:release(opts)
  local f = fields(self, "release")
  local co = me()
  local own, mine = hold_of(f, true)
  local write, data = guarded.release_opts(f, own, opts)
  if not own then
    argerror(1, "release", f.name .. " " .. f.path ..
      " is not held by the calling coroutine")
  end
  if own.ended or (f.single and own ~= f.current) then
    -- its end came first (and was told): the owner hears it once
    f.owners[co] = nil
    own.ended = own.ended or "taken over"
    if own.keep then node.give_back(f.client, own.keep) end
    return nil, lost_msg(own), "lock_lost"
  end
  local reader, downgraded = downgrade.reader(f, co, own)
  local why, about = events.acting_why()
  -- (4 fields: the rest, nil but for a write or a downgrade, fit in)
  local r = { own = own, held = false, why = why, write = write }
  if data ~= nil then r.data = data end
  if downgraded then r.reader, r.downgraded = reader, downgraded end
  if write and guarded.not_last_word(f, r) then
    return guarded.write_first(self, r)
  end
  own.count = own.count - 1
  if own.count > 0 then return true end
  -- the last level: the hold ends here, whoever let go of it
  r.held = live(own)
  if (why == "revoke" or why == "lost") and about == own.key then
    own.ended = why == "revoke" and "revoked" or "lost" -- (told later)
  elseif mine then
    f.owners[co] = nil
  else -- a semaphore mutex's, let go of by another coroutine
    own.ended = "released by another coroutine" -- (its owner hears it)
  end
  if f.single then f.current = nil end
  if own.key then events.unwatch_hold(f.client, own.key) end
  return give_hold(f, r)
end

-- Let go of one level of `owner`'s hold of `lock` without waiting (an
-- acquire abandoned: a closing coroutine cannot wait); the last level's
-- node goes as the session can send it.
function L.drop_level(lock, owner)
  local f = unbox(lock)
  local h = f and f.owners[owner]
  if not h then return end
  if h.ended then
    f.owners[owner] = nil
    if h.keep then h.keep:release() end
    return
  end
  h.count = h.count - 1
  if h.count > 0 then return end
  f.owners[owner] = nil
  if f.single and f.current == h then f.current = nil end
  if h.key then events.unwatch_hold(f.client, h.key) end
  local held = live(h)
  node.hold_ended(f.client, h.att, held)
  if not (f.cohort and cohort.release(f, h.att, held and not h.over,
      f.pass_limit)) then
    h.att:release()
  end
  if h.keep then h.keep:release() end
end

--- True while the calling coroutine holds the lock and the server cannot
-- have expired the session yet.
-- @treturn boolean
function Lock:is_held()
  local h = hold_of(fields(self, "is_held"))
  return h ~= nil and live(h)
end

--- The fencing token of the calling coroutine's hold: the lock node's
-- czxid, strictly increasing across every holder of every lock on the
-- ensemble (an integer on Lua 5.4; on LuaJIT a number, exact below 2^53);
-- and, for a hold passed within a lock cohort, the pass: such holds share
-- the node, and so its czxid, and count 1, 2... after the hold that took
-- the node (compare (czxid, pass) pairs, the pass 0 when absent;
-- docs/api.md, "Lock cohorts").  With `"string"`, the pair in the one
-- form that sorts as tokens are ordered, byte by byte: `CZXID.PASS`, 16
-- hex digits each (for a resource outside ZooKeeper: docs/api.md, "Tokens
-- for outside resources").
-- @tparam[opt] string form `"string"` for the string form
-- @treturn ?number the token, or nil when not held
-- @treturn ?number the pass, for a hold passed within a cohort
function Lock:token(form)
  local f = fields(self, "token")
  token.check_form(form, 1, "token")
  local h = hold_of(f)
  if not h or not live(h) then return nil end
  return token.answer(select(2, h.att:info()), h.pass, form)
end

--- The node path of the calling coroutine's hold or queued attempt.
-- @treturn ?string the path, or nil
function Lock:node()
  local f = fields(self, "node")
  local h = hold_of(f)
  local name = h and not h.ended and h.att:info()
  return name and f.dir .. "/" .. name or nil
end

--- The waiters of this client queued in the lock's cohort (docs/api.md,
-- "Cohorts"), of any lock object on the same path and kind: they have no
-- node of their own, so `participants()` does not list them.  0 for a
-- lock outside a cohort.
-- @treturn integer
function Lock:local_waiters()
  local f = fields(self, "local_waiters")
  if not f.cohort then return 0 end
  return cohort.stats(f).waiting
end

-- `local l <close> = assert(m:acquire())` releases one level at scope end.
function Lock.__close(self)
  local f = unbox(self)
  if f and f.owners[me()] then self:release() end
end

function Lock.__tostring(self)
  local f = unbox(self)
  local h = hold_of(f)
  return ("%s{%s, %s}: %s"):format(f.name, f.path,
    h and (live(h) and "held" or "lost") or "free", core.addr(self))
end

L.Lock, L.fields = Lock, fields
L.check_opts, L.new_lock = check_opts, new_lock
L.take, L.give_back, L.owner_data = node.take, node.give_back, node.owner_data
-- (a lease's and a multilock's extend: lock/extend.lua)
L.extend_hold, L.check_extend = extend.hold, extend.check

return L
