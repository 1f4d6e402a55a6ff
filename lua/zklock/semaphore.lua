-- The counting semaphore: up to max_leases holders; acquire hands out
-- lease objects.  A lease is a hold like a lock's (lua/zklock/lock/hold.lua:
-- the lease's table is its hold record), taken and given back by the same
-- stages (lock/init.lua's take_hold and give_hold); docs/design.md,
-- sections 4.10 and 17.
-- Loading this module adds `semaphore` to the client methods.  (The doc
-- comments below are on zklock's page of the reference: config.ld.)

--- @module zklock
local core = require "zklock.core"
local check = require "zklock.rt.check"
local events = require "zklock.rt.events"
local op = require "zklock.rt.op"
local L = require "zklock.lock"
local hold = require "zklock.lock.hold"
local guarded = require "zklock.lock.guarded"
local token = require "zklock.token"
check.internal_file()
local WEAK_KEYS = { __mode = "k" }
local WEAK_VALUES = { __mode = "v" }

local box, unbox = core.box, core.unbox
local client_methods = core.client_methods
local select, setmetatable, getmetatable, type, pairs =
  select, setmetatable, getmetatable, type, pairs
local me, argerror = events.me, check.argerror
local check_path, check_count = check.check_path, check.check_count
local check_timeout, closed = check.check_timeout, op.closed
local new_lock = L.new_lock
local live, lost_msg = hold.live, hold.lost_msg
local checked = check.checked

local Semaphore = { __name = "zklock.semaphore" }
Semaphore.__index = Semaphore
local Lease = { __name = "zklock.lease" }
Lease.__index = Lease

--- @type Client

--- A counting semaphore, on the nodes and protocol of Curator's
-- `InterProcessSemaphoreV2`: at most `max_leases` holders at once.
-- Acquirers queue on the internal lock `<path>/locks`; the one that holds
-- it creates its lease `<path>/leases/_c_<uuid>-lease-<seq>` and waits,
-- alone (herd-free), until at most `max_leases` leases exist.  Use one
-- `max_leases` per path: the count is not stored on the server.
-- @string path the semaphore's directory
-- @int max_leases how many may hold at once (1 to 2^31 - 1)
-- @tparam[opt] table opts `max_hold` (seconds: the default of every
--  acquire)
-- @return a semaphore (see Semaphore)
function client_methods:semaphore(path, max_leases, opts)
  if not core.is_client(self) then
    argerror(1, "semaphore", "zklock client expected")
  end
  check_path(path, 1, "semaphore", check.RECIPE_PATH_MAX)
  check_count(max_leases, 2, "semaphore", "max_leases")
  local lock = new_lock(self, path, "semaphore",
    { kind = "lease", markers = "lease", max_leases = max_leases,
      name = "zklock.semaphore" }, opts, 3)
  local f = unbox(lock)
  return box(Semaphore, { lock = lock, f = f, client = self, path = path,
    held = setmetatable({}, WEAK_KEYS) })
end

local function sem_fields(self, fname)
  return checked(self, Semaphore, fname, "semaphore")
end

--- A counting semaphore, as `zk:semaphore(path, max_leases)` returns it;
-- its acquire hands out leases.
-- @type Semaphore

--- Take a lease, waiting at most `timeout` seconds.
-- @tparam[opt] number timeout seconds (nil: for ever)
-- @tparam[opt] table opts `max_hold` (seconds): the lease ends by itself
--  then, as a lost one; `read` (a node path): read it once the lease is
--  held (a guarded read, as a lock's); `on_queued` (a function): called
--  once, when the acquire is queued, with the acquirers or leases ahead
--  of it (docs/api.md, "A place in the queue")
-- @return a lease (see Lease) (with `read`: and the node's data and
--  version, or nil when there is no such node), or nil, message, code
function Semaphore:acquire(timeout, opts)
  local s = sem_fields(self, "acquire")
  timeout = check_timeout(timeout, 1, "acquire")
  local max_hold, read, on_queued = L.check_opts(opts, 2, "acquire",
    L.HOLD_ACQUIRE_OPTIONS)
  local c, msg, code = closed(s.client)
  if c then return nil, msg, code end
  -- the stages every hold is taken by (lock/init.lua): a lease is a hold
  local a = { timeout = timeout, max_hold = max_hold, read = read,
    on_queued = on_queued }
  local taken
  taken, msg, code = L.take_hold(s.f, a)
  if not taken then return nil, msg, code end
  -- the lease is its own hold record (lock/hold.lua), and its own owner
  local l = { att = a.att, count = 1, sem = s }
  local lease = box(Lease, l)
  local co = me()
  local mine = s.held[co]
  if not mine then
    mine = setmetatable({ n = 0 }, WEAK_VALUES)
    s.held[co] = mine
  end
  mine.n = mine.n + 1
  mine[mine.n] = lease
  if L.armed(s.f) then L.arm_callbacks(s.f, l, lease, lease, s.f) end
  if read then return lease, a.data, a.version end
  return lease
end

local function lease_fields(self, fname)
  return checked(self, Lease, fname, "lease")
end

--- A lease of a semaphore, as `sem:acquire()` returns it: a hold, with
-- everything a lock's hold has (`on_lost` and `on_revoke`, set on its
-- semaphore; `fenced_set`; a write with the release; `max_hold`; a
-- fencing `token`).  Its node is deleted when the lease is collected;
-- `__close` releases it.
-- @type Lease

--- Give the lease back; the node goes, and the release waits for the
-- server to confirm, up to the session timeout.  Releasing a lease twice
-- raises.
-- @tparam[opt] table opts `{ write = path, data = string }`: write `data`
--  to node `path` in the same request that deletes the lease's node,
--  fenced (a semaphore's holders share it: two leases' writes race)
-- @return true (with `write`: and the node's new version and the write's
--  zxid); or nil, message, code: `"lock_lost"` when the lease ended
--  meanwhile (lost, past its `max_hold`, revoked: nothing written),
--  `"closed"` when the client was closed
function Lease:release(opts)
  local l = lease_fields(self, "release")
  if l.released then
    argerror(1, "release", "lease of " .. l.sem.path .. " already released")
  end
  local f = l.sem.f
  local write, data = guarded.release_opts(f, l, opts)
  l.released = true
  if l.ended then -- its end came first (and was told): heard once
    return nil, lost_msg(l), "lock_lost"
  end
  local why, about = events.acting_why()
  local held = live(l)
  if (why == "revoke" or why == "lost") and about == l.key then
    -- let go of in its own callback: its owner hears it at its release
    l.ended, l.released = why == "revoke" and "revoked" or "lost", false
  end
  if l.key then events.unwatch_hold(f.client, l.key) end
  return L.give_hold(f, { own = l, held = held,
    write = write, data = data, why = why })
end

--- True while the lease is held (not released, not ended, and the
-- server cannot have expired the session yet).
-- @treturn boolean
function Lease:is_held()
  local l = lease_fields(self, "is_held")
  return not l.released and live(l)
end

--- The fencing token of the lease: its node's czxid; with `"string"`, in
-- the form that sorts (docs/api.md, "Tokens for outside resources").
-- @tparam[opt] string form `"string"` for the string form
-- @treturn ?number the token, or nil when not held
function Lease:token(form)
  local l = lease_fields(self, "token")
  token.check_form(form, 1, "token")
  if l.released or not live(l) then return nil end
  return (token.answer(select(2, l.att:info()), nil, form))
end

--- The lease's node path, or nil once released.
-- @treturn ?string the path
function Lease:node()
  local l = lease_fields(self, "node")
  local name = not l.released and not l.ended and l.att:info()
  return name and l.sem.f.dir .. "/" .. name or nil
end

--- Fenced write under the lease: as a lock's `fenced_set`, fenced by the
-- lease's node (it lands only while the lease is held).
-- @string path the node to write
-- @string data its new data
-- @tparam[opt] number timeout seconds (default: the session timeout)
-- @return the node's new data version and the write's zxid; or nil,
--  message, code: `"lock_lost"` (nothing written), `"connection_loss"` or
--  `"timeout"` (it may have been applied)
function Lease:fenced_set(path, data, timeout)
  local l = lease_fields(self, "fenced_set")
  local f = l.sem.f
  check_path(path, 1, "fenced_set")
  check.check_data(f.client, data, 2, "fenced_set")
  timeout = check_timeout(timeout, 3, "fenced_set")
  if l.released then
    argerror(1, "fenced_set", "lease of " .. l.sem.path .. " already " ..
      "released")
  end
  return guarded.fenced_set(f, l, path, data, timeout)
end

function Lease.__close(self)
  local l = unbox(self)
  if l and not l.released then self:release() end
end

function Lease.__tostring(self)
  local l = unbox(self)
  return ("zklock.lease{%s, %s}: %s"):format(l.sem.path,
    l.released and "released" or (live(l) and "held" or "lost"),
    core.addr(self))
end

-- the calling coroutine's newest lease still held (in a lease's own
-- callback: that lease)
local function newest(s)
  local owner = me()
  if getmetatable(owner) == Lease then
    local l = unbox(owner)
    if l.sem == s and not l.released then return owner end
  end
  local mine = s.held[owner]
  if not mine then return nil end
  for i = mine.n, 1, -1 do -- (collected leases leave holes: no #mine)
    local l = mine[i]
    if l and not unbox(l).released then return l, i end
  end
end

--- @type Semaphore

--- Release `lease`, or the calling coroutine's newest lease (so that
-- `zklock.with_lock(sem, ...)` works).  With no lease to release, it
-- raises.
-- @param[opt] lease a lease of this semaphore
-- @tparam[opt] table opts `{ write = path, data = string }`, as
--  `lease:release`'s
-- @return true, or nil, message, code
function Semaphore:release(lease, opts)
  local s = sem_fields(self, "release")
  if opts == nil and type(lease) == "table" then -- release(opts)
    lease, opts = nil, lease
  end
  if lease == nil then
    lease = newest(s)
    if not lease then
      argerror(1, "release", "the calling coroutine holds no lease of " ..
        s.path)
    end
  end
  if lease_fields(lease, "release").sem ~= s then
    argerror(1, "release", "that lease belongs to another semaphore")
  end
  return lease:release(opts)
end

-- A semaphore's callbacks: fn(lease), on behalf of the lease (so
-- `lease:release()` and `sem:release()` in it release that lease)
local function set_callback(self, fname, key, fn)
  local s = sem_fields(self, fname)
  if type(fn) ~= "function" then
    argerror(1, fname, "function expected, got " .. type(fn))
  end
  s.f[key] = fn
  for _, mine in pairs(s.held) do
    for i = 1, mine.n do
      local lease = mine[i]
      local l = lease and unbox(lease)
      if l and not l.released and not l.ended then
        L.arm_callbacks(s.f, l, lease, lease, s.f)
      end
    end
  end
  return self
end

--- Make the leases revocable (Curator `makeRevocable`, as a lock's
-- `on_revoke`): when someone asks (`zklock.revoke(zk, path, max_leases)`,
-- `zklock revoke HOSTS PATH --leases N`, Curator's `Revoker` on a lease
-- node), `fn(lease)` runs in Lua, on behalf of that lease's holder, inside
-- a zklock wait or `zk:dispatch()`, so `lease:release()` in it releases
-- the lease.  Applies to the leases held and to later ones.
-- @func fn `fn(lease)`
-- @return the semaphore
function Semaphore:on_revoke(fn)
  return set_callback(self, "on_revoke", "revoke_fn", fn)
end

--- Call `fn(lease)` when a lease is lost without a release: the session
-- expired, the server was not heard from for the session timeout, its
-- node was deleted by someone else, or its `max_hold` ran out (as a
-- lock's `on_lost`).  By then `lease:is_held()` is false; its `release()`
-- answers nil, "lock lost", "lock_lost".  Applies to the leases held and
-- to later ones.
-- @func fn `fn(lease)`
-- @return the semaphore
function Semaphore:on_lost(fn)
  return set_callback(self, "on_lost", "lost_fn", fn)
end

--- Fenced write under the calling coroutine's newest lease
-- (`lease:fenced_set`).  Calling it without a lease raises.
-- @string path the node to write
-- @string data its new data
-- @tparam[opt] number timeout seconds (default: the session timeout)
-- @return the node's new data version and the write's zxid; or nil,
--  message, code
function Semaphore:fenced_set(path, data, timeout)
  local s = sem_fields(self, "fenced_set")
  local lease = newest(s)
  if not lease then
    argerror(1, "fenced_set", "the calling coroutine holds no lease of " ..
      s.path)
  end
  return lease:fenced_set(path, data, timeout)
end

-- with_lock's update under a semaphore (init.lua): the caller's newest
-- lease, its fields, and the semaphore's lock fields; nil when none.
function Semaphore._update_hold(self)
  local s = sem_fields(self, "_update_hold")
  local lease = newest(s)
  if lease then return lease, unbox(lease), s.f end
end

--- True while the calling coroutine holds a lease.
-- @treturn boolean
function Semaphore:is_held()
  local l = newest(sem_fields(self, "is_held"))
  return l ~= nil and l:is_held()
end

--- The token of the calling coroutine's newest lease (`"string"`: in the
-- form that sorts).
-- @tparam[opt] string form `"string"` for the string form
-- @treturn ?number the token, or nil
function Semaphore:token(form)
  local l = newest(sem_fields(self, "token"))
  token.check_form(form, 1, "token")
  return l and l:token(form)
end

--- The lease nodes in sequence order, as full node paths: the holders,
-- and last the acquirer waiting for a lease to free, if any; with
-- `detail`, as the records of `lock:holders()`.
-- @tparam[opt] number timeout seconds (default: the session timeout)
-- @tparam[opt] boolean detail records instead of paths
-- @return a list, or nil, message, code
function Semaphore:participants(timeout, detail)
  return sem_fields(self, "participants").lock:participants(timeout, detail)
end

--- The holders of leases, in order, as the records of `lock:holders()`.
-- @tparam[opt] number timeout seconds (default: the session timeout)
-- @return a list, or nil, message, code
function Semaphore:holders(timeout)
  return sem_fields(self, "holders").lock:holders(timeout)
end

--- The number of leases free right now: `max_leases` less the leases
-- that exist (every child of `<path>/leases` counts, as in Curator).
-- @tparam[opt] number timeout seconds (default: the session timeout)
-- @return a number, or nil, message, code
function Semaphore:available(timeout)
  local s = sem_fields(self, "available")
  timeout = check_timeout(timeout, 1, "available")
  local names, msg, code = op.call_op(s.client,
    timeout or s.client:session_timeout(), "_children", s.f.dir, "all")
  if not names then return nil, msg, code end
  local free = s.f.max_leases - #names
  return free > 0 and free or 0
end

function Semaphore.__tostring(self)
  local s = unbox(self)
  return ("zklock.semaphore{%s, %d}: %s"):format(s.path, s.f.max_leases,
    core.addr(self))
end

-- ---------------------------------------------------------------------------
-- a hold's time limit moved (docs/api.md, "Extending a hold";
-- lock/extend.lua)

--- @type Lease

--- Move the end of the lease to `seconds` from now.  A lease without
-- `max_hold` gets one; `extend(math.huge)` removes it.  A lease that has
-- ended (past its limit, lost, revoked) is not revived.  Raises for
-- `seconds` not a number > 0, a closed client, or a lease released.
-- @number seconds from now (math.huge: no limit)
-- @return true, or nil, message, `"lock_lost"` (the lease had ended)
function Lease:extend(seconds)
  local l = lease_fields(self, "extend")
  L.check_extend(seconds, l.sem.client, "extend")
  if l.released then -- (released in its own callback: ended, not this)
    argerror(1, "extend", "lease of " .. l.sem.path .. " already released")
  end
  return L.extend_hold(l.sem.f, l, seconds) -- (the lease is its hold)
end

--- @type Semaphore

--- Extend the calling coroutine's newest lease (the one `release()`
-- would release): see `lease:extend`.  With no lease, it raises.
-- @number seconds from now (math.huge: no limit)
-- @return true, or nil, message, `"lock_lost"`
function Semaphore:extend(seconds)
  local s = sem_fields(self, "extend")
  L.check_extend(seconds, s.client, "extend")
  local l = newest(s)
  if not l then
    argerror(1, "extend", "the calling coroutine holds no lease of " ..
      s.path)
  end
  return l:extend(seconds)
end

return { Semaphore = Semaphore, Lease = Lease }
