-- Locks: the reentrant mutex, the semaphore mutex and the read/write
-- lock, one class (`Lock`) whose kinds are sets of fields; a lock object
-- is userdata (`core.box`) whose state machine runs in C.  Loading this
-- module adds `mutex` and `semaphore_mutex` to the client methods;
-- zklock.rwlock adds `rwlock`, zklock.holders the methods that say who
-- holds a lock.  (The doc comments below are on zklock's page of the
-- reference: config.ld.)

--- @module zklock
local core = require "zklock.core"
local R = require "zklock.runtime"
local metrics = require "zklock.metrics"
local cohort = require "zklock.cohort"
R.internal_file()

local L = {}

local now = core.now
local box, unbox = core.box, core.unbox
local client_methods = core.client_methods
local type, select, setmetatable, pairs =
  type, select, setmetatable, pairs
local WEAK_KEYS = R.WEAK_KEYS
local hooks, me, argerror = R.hooks, R.me, R.argerror
local check_path, check_timeout = R.check_path, R.check_timeout
local check_data = R.check_data
local await, guarded_await = R.await, R.guarded_await
local closed, grace, call_op = R.closed, R.grace, R.call_op
local renews = R.renews
local session_leaving = R.session_leaving

-- ---------------------------------------------------------------------------
-- locks: one class for every kind; a kind is a set of fields

local Lock = {}
Lock.__index = Lock
local arm_callbacks, write_back, relock

local function fields(self, fname)
  return R.checked(self, Lock, fname, "lock")
end

-- The participant id a client writes into its nodes: connect's `id`, or
-- "zklock HOST pid N".
local HOST
local function owner_data(client)
  local id = R.ids[client]
  if id then return id end
  if not HOST then
    local fh = io.open("/proc/sys/kernel/hostname")
    HOST = fh and fh:read("*l") or "localhost"
    if fh then fh:close() end
  end
  return ("zklock %s pid %d"):format(HOST, core.pid())
end

-- acquire's options (every kind's, and a multilock's: those that take
-- no read refuse it by name)
local ACQUIRE_OPTIONS = R.options({ "max_hold", "read" })

-- opts (argument n of fname): nil or { max_hold = seconds > 0,
-- read = path }, no other key (`allowed`, default ACQUIRE_OPTIONS, says
-- which); returns its max_hold and read.
local function check_opts(opts, n, fname, allowed)
  if opts == nil then return nil end
  if type(opts) ~= "table" then
    argerror(n, fname, "table of options expected, got " .. type(opts))
  end
  R.check_options(opts, allowed or ACQUIRE_OPTIONS, n, fname)
  local mh = opts.max_hold
  if mh ~= nil and (type(mh) ~= "number" or not (mh > 0 and mh < 1e9)) then
    argerror(n, fname, "max_hold must be a number of seconds > 0")
  end
  if opts.read ~= nil then check_path(opts.read, n, fname) end
  return mh, opts.read
end
L.check_opts = check_opts

-- the lock constructors' options (mutex, semaphore_mutex, rwlock,
-- semaphore): those kinds that do not linger refuse it by name
local LOCK_OPTIONS = R.options({ "max_hold", "linger", "cohort",
  "pass_limit" })

local function new_lock(client, path, fname, kind, opts, n)
  if not core.is_client(client) then
    argerror(1, fname, "zklock client expected")
  end
  check_path(path, 1, fname, R.RECIPE_PATH_MAX)
  local max_hold = check_opts(opts, n or 2, fname, LOCK_OPTIONS)
  local linger = opts and opts.linger
  if linger ~= nil then
    if type(linger) ~= "number" or not (linger > 0 and linger < 1e9) then
      argerror(n or 2, fname, "linger must be a number of seconds > 0")
    end
    if kind.kind == "lease" then
      argerror(n or 2, fname, "a semaphore does not linger (linger): " ..
        "see docs/api.md, lock caching")
    end
    if kind.kind == "read" then linger = nil end -- (the write lock's only)
  end
  -- lock cohorts (docs/api.md, "Cohorts"): the lock's own choice, else
  -- its client's, else on; mutexes and write locks only
  local on, limit
  if opts then on, limit = R.check_cohort(opts, n or 2, fname) end
  local dflt = R.cohort_defaults[client] or {}
  if on == nil then on = dflt.on end
  if on == nil then on = R.COHORT_DEFAULT end
  if on and opts and opts.cohort and kind.kind == "lease" then
    argerror(n or 2, fname, "a semaphore does not queue in a cohort " ..
      "(cohort): see docs/api.md, Cohorts")
  end
  if kind.kind ~= "mutex" and kind.kind ~= "write" then on = false end
  -- a semaphore's leases live under <path>/leases, its acquirers queue on
  -- the internal lock <path>/locks (Curator InterProcessSemaphoreV2)
  local dir = kind.kind == "lease" and path .. "/leases" or path
  return box(Lock, {
    client = client, path = path, dir = dir, kind = kind.kind,
    max_leases = kind.max_leases or 1, markers = kind.markers,
    name = kind.name, owners = setmetatable({}, WEAK_KEYS),
    -- (owners: see "holds" below)
    single = kind.single, max_hold = max_hold, linger = linger,
    cohort = on, pass_limit = limit or dflt.pass_limit or R.PASS_LIMIT_DEFAULT,
    metric = kind.name:gsub("^zklock%.", ""), -- (zklock.metrics' kind)
  })
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

-- Register a hold for its callbacks; a revocable one has C watch the
-- node's data for "__REVOKE__".
arm_callbacks = function(f, own, lock, owner)
  own.key = own.att:serial() -- (events name their attempt)
  R.watch_hold(f.client, own.key, lock, owner)
  if f.revoke_fn then own.att:revocable() end
end

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

-- Start an attempt: a node to take in the queue of f's directory.
-- Returns it, or nil, msg, code.
local function start_node(f, timeout, ignore, max_hold, read)
  local client = f.client
  local att = client:_lock(f.dir, f.kind, f.max_leases, owner_data(client),
    ignore, max_hold)
  if read then att:read_with(read) end -- (rides behind the listing)
  local ok, msg, code = att:start()
  if not ok and code == "session_expired" and renews[client] then
    -- the timer thread is opening a new session: wait for it
    local st = await(client, session_leaving(client, "expired"),
      now() + (timeout or client:session_timeout()))
    if st ~= "timeout" then ok, msg, code = att:start() end
  end
  if not ok then return nil, msg, code end
  return att
end

-- Take a node in the queue of f's directory and wait to hold it.  Returns
-- the held attempt, or nil, msg, code once the node is gone again.
local function take_node(f, timeout, ignore, max_hold, read)
  local client = f.client
  local att, msg, code = start_node(f, timeout, ignore, max_hold, read)
  if not att then return nil, msg, code end
  local st
  st, msg, code = guarded_await(client, att, timeout and now() + timeout,
    client:session_timeout())
  if st == "held" then return att end
  -- timed out or failed: our node goes (now, or once its create returns)
  att:release()
  await(client, att, grace(client))
  if st == "timeout" then return nil, R.not_acquired(f.path, timeout) end
  -- held, and ended by C before we looked
  if st == "done" then return nil, R.ended_at_once(f.path) end
  return nil, msg, code
end

-- A lease (Curator InterProcessSemaphoreV2, docs/design.md section 4.10):
-- the internal lock <path>/locks lets one acquirer at a time create its
-- lease and wait, on a children watch of <path>/leases, until at most
-- max_leases leases exist; then the internal lock goes, without waiting
-- for the server's word.
local function take_lease(f, timeout, max_hold)
  local deadline = timeout and now() + timeout
  local gate, msg, code = take_node({ client = f.client, path = f.path,
    dir = f.path .. "/locks", kind = "mutex", max_leases = 1 }, timeout)
  if not gate then return nil, msg, code end
  local left = deadline and deadline - now()
  -- (the gate goes too when this wait is abandoned: issue 22, item 3)
  local att
  att, msg, code = R.guarded(function() gate:release() end, take_node, f,
    left and (left > 0 and left or 0), nil, max_hold)
  gate:release()
  if not att and code == "timeout" then
    msg = R.not_acquired(f.path, timeout)
  end
  return att, msg, code
end

-- held attempt -> { since = when its hold began, kind = its metrics kind }
-- (zklock.metrics; weak: a hold never given back leaves nothing behind)
local holds = setmetatable({}, WEAK_KEYS)

-- A hold of f's kind begins with att, after `wait` seconds (zklock.metrics;
-- passed: from a holder of the same client's cohort, without a request)
local function hold_began(f, att, wait, passed)
  metrics.acquire_ended(f.client, f.metric, wait, nil, passed)
  holds[att] = { since = now(), kind = f.metric }
end

-- max_hold: seconds the hold may last (nil: f's default, if any); read:
-- a guarded node read with the acquire (not for leases)
local function take(f, timeout, ignore, max_hold, read)
  max_hold = max_hold or f.max_hold
  local t0 = now()
  local att, msg, code
  if f.kind == "lease" then
    att, msg, code = take_lease(f, timeout, max_hold)
  else
    att, msg, code = take_node(f, timeout, ignore, max_hold, read)
  end
  if att then hold_began(f, att, now() - t0)
  else metrics.acquire_ended(f.client, f.metric, now() - t0, code) end
  return att, msg, code
end

-- Queue in f's cohort (cohort.lua) and wait for the hold: the held
-- attempt and what the hold needs to know, or nil, msg, code.
local function take_cohort(f, timeout, max_hold, read)
  local t0 = now()
  local att, info, code = cohort.take(f, timeout, max_hold or f.max_hold,
    read, function(left, r) return start_node(f, left, nil, nil, r) end)
  if att then hold_began(f, att, now() - t0, info.passed)
  else metrics.acquire_ended(f.client, f.metric, now() - t0, code) end
  return att, info, code
end

-- The hold of att ends (zklock.metrics): released, or found lost.
local function hold_ended(client, att, held)
  local h = holds[att]
  if h then
    holds[att] = nil
    if held then metrics.released(client, h.kind, now() - h.since)
    else metrics.lost(client, h.kind) end
  end
end

-- Give a held attempt's node back and wait for the server to confirm.
-- (held: whether it was held, when the caller knows it from before)
local function give_back(client, att, held)
  if held == nil then held = att:held() end
  att:release()
  hold_ended(client, att, held)
  if closed(client) then return nil, "client is closed", "closed" end
  await(client, att, grace(client))
  if not held then return nil, "lock lost", "lock_lost" end
  return true
end

-- A plain get of `path` under a hold we have, answered as an attempt's
-- read_result: data, version; nil (no such node); or nil, msg, code.
local function read_held(client, timeout, path)
  local data, version, code = call_op(client,
    timeout or client:session_timeout(), "_get", path)
  if data == nil and code == "no_node" then return nil end
  return data, version, code
end

-- ---------------------------------------------------------------------------
-- holds: one record per hold (docs/design.md, section 4.14)
--
-- A hold record lives from the acquire that takes it until its owner
-- lets go of it, and every way a hold ends is read from it:
--   att    the attempt: our node (lost, past max_hold: att:held() is false)
--   count  levels taken by its owner (reentrant kinds)
--   over   a downgraded read: the write attempt whose node keeps later
--          writers out; the read hold lasts only while that one does
--   keep   the write attempt kept for this reader, given back with it
--   ended  why it ended before its owner let go: "revoked", "lost" (let
--          go of in those callbacks), "released by another coroutine"
--          (a semaphore mutex), "taken over" (ditto, lost and held anew)
-- f.owners: owner key -> its hold (weak keys; nothing in a hold refers to
-- its owner: LuaJIT's weak keys are not ephemerons).  A semaphore mutex,
-- which any coroutine may release, also has f.current, the object's hold.

-- Does hold h still hold?
local function live(h)
  if h.ended or not h.att:held() then return false end
  local w = h.over
  return w == nil or w:held()
end

-- The calling owner's hold of f, and whether it is its own: with
-- `any`, a semaphore mutex's current hold when the caller has none (any
-- coroutine may release it; is_held, token and fenced writes are the
-- caller's own only).
local function hold_of(f, any)
  local h = f.owners[me()]
  if h then return h, true end
  if any and f.single and f.current then return f.current, false end
  return nil
end

local function lost_msg(h)
  return "lock lost" .. (h.ended and ": " .. h.ended or "")
end

-- The server drops a request over jute.maxbuffer (1 MiB - 1 by default),
-- and the client sends it again on every reconnect, for ever: a write
-- with the release, or fenced by the lock node, must fit whole: its data,
-- both paths (with the chroot) and ~1 KiB of headers, versions and ACL
-- (docs/limits.md).
local MAX_REQUEST, REQUEST_OVERHEAD = 1024 * 1024 - 1, 1024
local function check_request(f, node_path, path, data, n, fname)
  local chroot = #(select(2, f.client:_limits()) or "")
  local size = #data + #node_path + #path + 2 * chroot + REQUEST_OVERHEAD
  if size > MAX_REQUEST then
    argerror(n, fname, ("the write would make a request of about %d " ..
      "bytes (%d of data, paths of %d and %d), over the server's limit " ..
      "of %d (jute.maxbuffer): write less, or use shorter paths")
      :format(size, #data, #node_path, #path, MAX_REQUEST))
  end
end
L.check_request = check_request

--- @type Lock

--- Acquire, waiting at most `timeout` seconds behind other holders;
-- `acquire(0)` is a try-lock.  The same coroutine may acquire a mutex or
-- a read/write lock again: it then must release as often.  A timed-out
-- acquire leaves no node behind.
-- @tparam[opt] number timeout seconds (nil: for ever)
-- @tparam[opt] table opts `max_hold` (seconds; default: the constructor's):
--  then the hold ends by itself, as a lost one (`is_held()` false,
--  `on_lost`, node deleted, `release()` answers `lock_lost`), counted from
--  the first acquire; `read` (a node path): read it with the acquire (not
--  for a semaphore mutex)
-- @return the lock (with `read`: and the node's data and version, or nil
--  when there is no such node), or nil, message, code (`"timeout"`,
--  `"session_expired"`, `"closed"`...)
function Lock:acquire(timeout, opts)
  local f = fields(self, "acquire")
  timeout = check_timeout(timeout, 1, "acquire")
  local max_hold, read = check_opts(opts, 2, "acquire")
  local client = f.client
  local c, msg, code = closed(client)
  if c then return nil, msg, code end
  if read and f.kind == "lease" then
    argerror(2, "acquire", "a semaphore mutex reads nothing with its " ..
      "acquire (read)")
  end
  local co = me()
  local own = f.owners[co]
  if own and own.ended then -- (its end was told: a new hold)
    f.owners[co], own = nil, nil
  end
  if own and not f.single then
    if not live(own) then return nil, lost_msg(own), "lock_lost" end
    if read then -- held already: a plain read, still under the lock
      local data, version, rcode = read_held(client, timeout, read)
      if data == nil and rcode then return nil, version, rcode end
      own.count = own.count + 1
      return self, data, version
    end
    own.count = own.count + 1
    return self
  end
  local ignore, over
  if f.partner then -- read/write lock
    local other = f.partner.owners[co]
    if f.kind == "write" and other and not other.ended then
      argerror(1, "acquire", "zklock.rwlock " .. f.path .. ": the read " ..
        "holder asking for the write lock would wait for itself for ever; " ..
        "release the read lock first")
    end
    if f.kind == "read" and other and live(other) then
      -- downgrade: the writer may read, past its own write node, for as
      -- long as that node keeps later writers out
      ignore, over = other.att:info(), other.att
    end
  end
  local att, info
  local cached = f.lingering -- lock caching: the node we kept, if any
  f.lingering = nil
  if cached and relock(client, cached, max_hold or f.max_hold, timeout) then
    att = cached -- held, no request sent
    hold_began(f, att, 0)
    if f.cohort then info = cohort.adopt(f, att) end
  else
    if f.cohort and not ignore then
      -- a lock cohort (docs/design.md, section 16)
      att, info, code = take_cohort(f, timeout, max_hold, read)
      if not att then return nil, info, code end
    else
      att, msg, code = take(f, timeout, ignore, max_hold, read)
      if not att then return nil, msg, code end
    end
    if f.linger then att:watch_contenders() end
  end
  local data, version
  if read then
    local known = info and info.known
    if (info and info.fresh and info.read == read) or
        (not info and att ~= cached) then
      data, version, code = att:read_result()
    elseif known and known.path == read then
      -- passed on with the hold: the value its last holder wrote with
      -- its release, no request (docs/design.md, section 16)
      data, version = known.data, known.version
    else
      -- (a reused or passed node read nothing with its acquire: a plain
      -- get now)
      data, version, code = R.guarded(function()
        if not (info and cohort.release(f, att, true, f.pass_limit)) then
          att:release()
        end
      end, read_held, client, timeout, read)
    end
    if data == nil and code then -- a read refused (no auth...): let go
      if info then cohort.release(f, att, false) end
      give_back(client, att)
      return nil, version, code
    end
  end
  if over then att:rest_on(over) end -- (C ends the read with the write)
  own = { att = att, count = 1, over = over, seq = info and info.seq,
    sentinel = info and info.sentinel } -- (cohort.lua: watch_over)
  if f.single then
    -- the object's previous hold ended without a release (its node went):
    -- its owner hears so
    local prev = f.current
    if prev then prev.ended = prev.ended or "taken over" end
    f.current = own
  end
  f.owners[co] = own
  if f.revoke_fn or f.lost_fn then arm_callbacks(f, own, self, co) end
  if hooks.held then hooks.held(self, co) end
  if read then return self, data, version end
  return self
end

-- Hold the lingering node `att` again, if nobody else showed up.  The
-- first listing of the directory may still be out (a release right after
-- the hold began): its answer is awaited, one round trip, within the
-- acquire's timeout (docs/design.md, section 4.13).  True: held.
function relock(client, att, max_hold, timeout)
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

-- release's options: write, data (checked; the request's size too)
local RELEASE_OPTIONS = R.options({ "write", "data" })
local function release_opts(f, h, opts)
  if opts == nil then return nil end
  if type(opts) ~= "table" then
    argerror(1, "release", "table of options expected, got " .. type(opts))
  end
  R.check_options(opts, RELEASE_OPTIONS, 1, "release")
  local write, data = opts.write, opts.data
  if write == nil then return nil end
  if f.kind == "read" then
    argerror(1, "release", "a read lock writes nothing with its release " ..
      "(write): its holders share it, so two readers' writes would race")
  end
  check_path(write, 1, "release")
  check_data(f.client, data, 1, "release")
  local node = h and h.att:info()
  if node then -- (none: lost, nothing will be sent)
    check_request(f, f.dir .. "/" .. node, write, data, 1, "release")
  end
  return write, data
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
  local write, data = release_opts(f, own, opts)
  if not own then
    argerror(1, "release", f.name .. " " .. f.path ..
      " is not held by the calling coroutine")
  end
  if own.ended or (f.single and own ~= f.current) then
    -- its end came first (and was told): the owner hears it once
    f.owners[co] = nil
    own.ended = own.ended or "taken over"
    if own.keep then give_back(f.client, own.keep) end
    return nil, lost_msg(own), "lock_lost"
  end
  local reader = f.kind == "write" and f.partner.owners[co]
  local downgraded = reader and reader.over == own.att and live(reader)
  local why, about = R.acting_why()
  if write and (own.count > 1 or downgraded or (f.cohort and not own.ended
      and why ~= "revoke" and cohort.would_pass(f, own.att, f.pass_limit)))
      then
    -- not the node's last word (or a downgrade keeps it): a fenced write,
    -- then the plain release
    require "zklock.fenced" -- (fenced_set; it requires this module)
    local v, zxid, code = self:fenced_set(write, data)
    -- (a pass hands the value written on: cohort.lua)
    if v and own.count == 1 then
      own.known = { path = write, data = data, version = v }
    end
    local ok, msg, rcode = self:release()
    if not v then return nil, zxid, code end
    if not ok then return nil, msg, rcode end
    return true, v, zxid
  end
  own.count = own.count - 1
  if own.count > 0 then return true end
  -- the last level: the hold ends here, whoever let go of it
  local held = live(own)
  if (why == "revoke" or why == "lost") and about == own.key then
    own.ended = why == "revoke" and "revoked" or "lost" -- (told later)
  elseif mine then
    f.owners[co] = nil
  else -- a semaphore mutex's, let go of by another coroutine
    own.ended = "released by another coroutine" -- (its owner hears it)
  end
  if f.single then f.current = nil end
  local node = own.att:info()
  if own.key then R.unwatch_hold(f.client, own.key) end
  if f.cohort then
    -- a lock cohort: the hold goes to the next waiter of this client with
    -- no request, or the cohort lets go of the node (docs/design.md,
    -- section 16)
    local passable = held and not write and not downgraded and
      why ~= "revoke"
    if cohort.release(f, own.att, passable, f.pass_limit, own.known) then
      hold_ended(f.client, own.att, true)
      return true
    end
  end
  if write then return write_back(f.client, own.att, write, data) end
  if f.linger and not f.lingering and not downgraded and why ~= "revoke"
      then
    -- lock caching: the node stays until someone else wants it
    local att = own.att
    if held and att:linger(f.linger) then
      hold_ended(f.client, att, true)
      if f.cohort then cohort.lingers(att, own.seq or 0) end
      f.lingering = att
      return true
    end
    -- not kept (contended, or lost): released the plain way
    return give_back(f.client, att, held)
  end
  -- (a read/write lock's write hold may keep its node: rwlock.lua)
  if downgraded and held then
    if R.guarded(function() own.att:release() end, f.on_last_release, f,
        own, reader, node) then
      hold_ended(f.client, own.att, true)
      return true
    end
    reader.over = nil -- (no writer between: the read stands alone now)
    reader.att:rest_on(nil)
  end
  local ok, msg, code = give_back(f.client, own.att, held)
  if own.keep then give_back(f.client, own.keep) end
  return ok, msg, code
end

-- Give att's node back in one multi-op with a write of `data` to `path`
-- (docs/design.md, section 4.12).  A hold already known lost writes
-- nothing.  @return true, version, zxid; or nil, msg, code
write_back = function(client, att, path, data)
  local held = att:held()
  local ok, msg, code
  if held then ok, msg, code = att:release_write(path, data) end
  if not ok then
    give_back(client, att, held)
    if held then return nil, msg, code end
    return nil, "lock lost: " .. path .. " not written", "lock_lost"
  end
  hold_ended(client, att, true)
  if await(client, att, grace(client)) == "timeout" then
    return nil, ("timeout: the write of %s with the release is not " ..
      "confirmed yet: it may still be applied"):format(path), "timeout"
  end
  local version, zxid, wcode = att:write_result()
  if version == nil then return nil, zxid, wcode end
  return true, version, zxid
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
  if h.key then R.unwatch_hold(f.client, h.key) end
  local held = live(h)
  hold_ended(f.client, h.att, held)
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
-- docs/api.md, "Lock cohorts").
-- @treturn ?number the token, or nil when not held
-- @treturn ?number the pass, for a hold passed within a cohort
function Lock:token()
  local h = hold_of(fields(self, "token"))
  if not h or not live(h) then return nil end
  local czxid = select(2, h.att:info())
  if h.seq and h.seq > 0 then return czxid, h.seq end
  return czxid
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

L.live, L.hold_of = live, hold_of
L.Lock, L.fields = Lock, fields
L.new_lock, L.take, L.give_back = new_lock, take, give_back
L.owner_data = owner_data

return L
