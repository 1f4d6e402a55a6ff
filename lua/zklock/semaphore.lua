-- The counting semaphore: up to max_leases holders; acquire hands out
-- lease objects.  Built on the lock module's queue (`take`, `give_back`).
-- Loading this module adds `semaphore` to the client methods.  (The doc
-- comments below are on zklock's page of the reference: config.ld.)

--- @module zklock
local core = require "zklock.core"
local check = require "zklock.rt.check"
local events = require "zklock.rt.events"
local op = require "zklock.rt.op"
local L = require "zklock.lock"
check.internal_file()
local WEAK_KEYS = { __mode = "k" }
local WEAK_VALUES = { __mode = "v" }

local box, unbox = core.box, core.unbox
local client_methods = core.client_methods
local select, setmetatable = select, setmetatable
local me, argerror = events.me, check.argerror
local check_path, check_count = check.check_path, check.check_count
local check_timeout, closed = check.check_timeout, op.closed
local new_lock, take, give_back = L.new_lock, L.take, L.give_back
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
--  then, as a lost one
-- @return a lease (see Lease), or nil, message, code
function Semaphore:acquire(timeout, opts)
  local s = sem_fields(self, "acquire")
  timeout = check_timeout(timeout, 1, "acquire")
  local max_hold, read = L.check_opts(opts, 2, "acquire")
  if read ~= nil then
    argerror(2, "acquire", "a semaphore reads nothing with its acquire " ..
      "(read): its holders share it")
  end
  local c, msg, code = closed(s.client)
  if c then return nil, msg, code end
  local att
  att, msg, code = take(s.f, timeout, nil, max_hold)
  if not att then return nil, msg, code end
  local lease = box(Lease, { att = att, sem = s })
  local co = me()
  local mine = s.held[co]
  if not mine then
    mine = setmetatable({ n = 0 }, WEAK_VALUES)
    s.held[co] = mine
  end
  mine.n = mine.n + 1
  mine[mine.n] = lease
  return lease
end

local function lease_fields(self, fname)
  return checked(self, Lease, fname, "lease")
end

--- A lease of a semaphore, as `sem:acquire()` returns it.  Its node is
-- deleted when the lease is collected; `__close` releases it.
-- @type Lease

--- Give the lease back.  Releasing a lease twice raises.
-- @return true, or nil, message, code (`"lock_lost"`: it had ended
--  meanwhile)
function Lease:release()
  local l = lease_fields(self, "release")
  if l.released then
    argerror(1, "release", "lease of " .. l.sem.path .. " already released")
  end
  l.released = true
  return give_back(l.sem.client, l.att)
end

--- True while the lease is held (not released, and the session lives).
-- @treturn boolean
function Lease:is_held()
  local l = lease_fields(self, "is_held")
  return not l.released and l.att:held()
end

--- The fencing token of the lease: its node's czxid.
-- @treturn ?number the token, or nil when not held
function Lease:token()
  local l = lease_fields(self, "token")
  if l.released or not l.att:held() then return nil end
  return (select(2, l.att:info()))
end

--- The lease's node path, or nil once released.
-- @treturn ?string the path
function Lease:node()
  local l = lease_fields(self, "node")
  local name = not l.released and l.att:info()
  return name and l.sem.f.dir .. "/" .. name or nil
end

function Lease.__close(self)
  local l = unbox(self)
  if l and not l.released then self:release() end
end

function Lease.__tostring(self)
  local l = unbox(self)
  return ("zklock.lease{%s, %s}: %s"):format(l.sem.path,
    l.released and "released" or "held", core.addr(self))
end

-- the calling coroutine's newest lease still held
local function newest(s)
  local mine = s.held[me()]
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
-- @return true, or nil, message, code
function Semaphore:release(lease)
  local s = sem_fields(self, "release")
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
  return lease:release()
end

--- True while the calling coroutine holds a lease.
-- @treturn boolean
function Semaphore:is_held()
  local l = newest(sem_fields(self, "is_held"))
  return l ~= nil and l:is_held()
end

--- The token of the calling coroutine's newest lease.
-- @treturn ?number the token, or nil
function Semaphore:token()
  local l = newest(sem_fields(self, "token"))
  return l and l:token()
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
  if l.released and not l.ended then -- (ended: released in a callback)
    argerror(1, "extend", "lease of " .. l.sem.path .. " already released")
  end
  return L.extend_hold(l.sem.f, l, seconds)
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
