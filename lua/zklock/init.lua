--- zklock: ZooKeeper locks for Lua, with the algorithms carried out in C.
--
-- `zklock.connect` opens a session; recipe objects (`zk:mutex(path)`) are
-- userdata whose state machines run in C on ZooKeeper's threads.  This file
-- holds argument checking, per-coroutine ownership, and the waits: every
-- wait polls a C object and sleeps until the session reports a change.
-- @module zklock
local core = require "zklock.core"

local M = {
  _VERSION = "zklock 0.1.0",
  --- Error codes, the third value of every failure: `zklock.errors.timeout`...
  errors = core.errors,
}

local now = core.now
local box, unbox = core.box, core.unbox
local client_methods = core.client_methods
local type, select, tostring, error, pcall = type, select, tostring, error, pcall
local floor, huge = math.floor, math.huge
local co_running = coroutine.running

local MAIN = {} -- owner key of the main coroutine (LuaJIT's running() is nil)
local WEAK_KEYS = { __mode = "k" }
local WEAK_VALUES = { __mode = "v" }

-- While a callback runs on behalf of a lock's owner, it acts as that owner
-- (so `lock:release()` inside `on_revoke` releases the right hold).
-- Keyed by the coroutine running the callback: a callback that waits (and
-- so yields to a scheduler) must not lend its owner to other coroutines.
local acting = setmetatable({}, WEAK_KEYS)

-- Integration points for zklock.ngx: `owner(co)`, the owner key of
-- coroutine co (nginx reuses a request's Lua thread for later requests, so
-- there the key is per request); `held(lock, owner)` after an owner takes
-- a hold; `dispatcher`: callbacks are run by someone else (a timer), not
-- inside waits.
local hooks = {}
M._hooks = hooks

local function me()
  local co = co_running() or MAIN
  local a = acting[co]
  if a then return a end
  local owner = hooks.owner
  if owner then return owner(co) end
  return co
end

-- ---------------------------------------------------------------------------
-- argument checks: the standard "bad argument #n to 'f' (...)" message

local SOURCE = debug.getinfo(1, "S").source

-- The error points at the first caller outside this file.
local function argerror(n, fname, msg)
  local level = 2
  while true do
    local info = debug.getinfo(level, "S")
    if not info or info.source ~= SOURCE then break end
    level = level + 1
  end
  error(("bad argument #%d to '%s' (%s)"):format(n, fname, msg), level)
end

local function check_path(path, n, fname)
  if type(path) ~= "string" then
    argerror(n, fname, "string expected, got " .. type(path))
  end
  local why
  if path:sub(1, 1) ~= "/" then why = "path must start with '/'"
  elseif #path == 1 then why = "path must not be the root"
  elseif #path > 4096 then why = "path too long (over 4096 bytes)"
  elseif path:sub(-1) == "/" then why = "path must not end with '/'"
  elseif path:find("//", 1, true) then why = "empty path component"
  elseif path:find("%z") then why = "path contains a NUL byte"
  elseif path:find("[\1-\31\127]") then
    why = "path contains a control character"
  elseif path:find("/%.%.?/") or path:find("/%.%.?$") then
    why = "relative path component"
  end
  if why then argerror(n, fname, why .. ": " .. path) end
  return path
end

local function check_count(v, n, fname, what)
  if type(v) ~= "number" or v ~= floor(v) or v < 1 or v > 2 ^ 31 - 1 then
    argerror(n, fname, what .. " must be a positive integer, got " ..
      tostring(v))
  end
  return v
end

local function check_timeout(t, n, fname)
  if t == nil then return nil end
  if type(t) ~= "number" then
    argerror(n, fname, "number expected, got " .. type(t))
  end
  if t ~= t or t < 0 then argerror(n, fname, "timeout must be >= 0") end
  if t == huge then return nil end
  return t
end

-- ---------------------------------------------------------------------------
-- waiting

local function block(client, gen, timeout)
  return client:_wait(gen, timeout)
end
local waiter = block

--- Replace how zklock sleeps while it waits (for cooperative schedulers).
-- `fn(client, gen, timeout, obj)` must return once `client:_poll()`
-- reports a generation other than `gen`, or after `timeout` seconds (nil:
-- no limit).  `obj` is what is awaited (it has `poll()`), when known.
-- It may yield.  `zklock.set_waiter(nil)` restores the blocking wait.
function M.set_waiter(fn)
  if fn ~= nil and type(fn) ~= "function" then
    argerror(1, "set_waiter", "function expected, got " .. type(fn))
  end
  waiter = fn or block
end

-- ---------------------------------------------------------------------------
-- callbacks: queued in C on ZooKeeper's threads, run here, in Lua

-- node path -> { lock =, owner = } for holds with on_revoke or on_lost
-- callbacks, per client
local with_callbacks = setmetatable({}, WEAK_KEYS)

local function report(what, err)
  io.stderr:write(("zklock: %s callback failed: %s\n"):format(what,
    tostring(err)))
end

-- Run the callbacks `client` has queued (or those of `evs`, taken from it
-- already); returns how many ran.
local function dispatch(client, evs)
  evs = evs or client:_events()
  if not evs then return 0 end
  local n = 0
  local reg = with_callbacks[client]
  for _, ev in ipairs(evs) do
    local r = reg and reg[ev[2]]
    local f = r and unbox(r.lock)
    local fn = f and (ev[1] == "revoke" and f.revoke_fn
      or ev[1] == "lost" and f.lost_fn)
    if fn then
      local co = co_running() or MAIN
      local saved = acting[co]
      acting[co] = r.owner
      local ok, err = xpcall(fn, debug.traceback, r.lock)
      acting[co] = saved
      n = n + 1
      if not ok then report("on_" .. ev[1], err) end
    end
  end
  return n
end

-- Poll obj (anything with poll() -> status, gen, ...) until it leaves
-- "pending"/"waiting", or the deadline passes ("timeout").  Like Curator, a
-- timeout bounds the wait behind other holders: the first create and
-- listing are always awaited (a try-lock with timeout 0 works), for at most
-- `slack` seconds more.
local function await(client, obj, deadline, slack)
  local queued = false
  while true do
    if not hooks.dispatcher then dispatch(client) end
    local st, gen, msg, code = obj:poll()
    if st == "waiting" then queued = true
    elseif st ~= "pending" then return st, msg, code end
    local left
    if deadline then
      left = deadline - now()
      if not queued and slack then left = left + slack end
      if left <= 0 then return "timeout" end
    end
    waiter(client, gen, left, obj)
  end
end
M._await = await
M._dispatch = dispatch

-- await for a lock attempt, with the attempt given up (its node deleted at
-- once) whenever the wait does not return: an error raised out of the
-- waiter, or, on Lua 5.4, coroutine.close() of the waiting coroutine
-- (a to-be-closed guard; `<close>` is loaded from a string so that LuaJIT
-- can parse this file).  docs/recipes.md, "abandoned waits".
local guarded_await
if _VERSION == "Lua 5.4" then
  guarded_await = assert(load([[
    local await, pcall = ...
    local guard_mt = { __close = function(g)
      if g.armed then pcall(g.att.release, g.att) end
    end }
    return function(client, att, deadline, slack)
      local g <close> = setmetatable({ att = att, armed = true }, guard_mt)
      local st, msg, code = await(client, att, deadline, slack)
      g.armed = false
      return st, msg, code
    end]], "=zklock.guard"))(await, pcall)
else
  guarded_await = function(client, att, deadline, slack)
    local ok, st, msg, code = pcall(await, client, att, deadline, slack)
    if not ok then
      pcall(att.release, att)
      error(st, 0)
    end
    return st, msg, code
  end
end

-- Release every level of `co`'s hold of `lock` on its behalf (zklock.ngx:
-- the request that took it has ended).  Returns whether it held it.
function M._release_owner(lock, co)
  local f = unbox(lock)
  if not (f and f.owners and f.owners[co]) then return false end
  local cur = co_running() or MAIN
  local saved = acting[cur]
  acting[cur] = co
  local ok, err = pcall(function()
    while f.owners[co] do lock:release() end
  end)
  acting[cur] = saved
  if not ok then report("release on behalf of an ended coroutine", err) end
  return true
end

-- Does `co` hold `lock`?
function M._holds(lock, co)
  local f = unbox(lock)
  return f ~= nil and f.owners ~= nil and f.owners[co] ~= nil
end

-- The client of a lock object, or nil.
function M._client_of(lock)
  local f = unbox(lock)
  return f and f.client
end

-- ---------------------------------------------------------------------------
-- client

local ACLS = { open = 0, creator = 1, read = 2 }
local max_data = setmetatable({}, WEAK_KEYS) -- client -> bytes
local DEFAULT_MAX_DATA = 1024 * 1024 - 8192

-- `data` (argument n of fname) fits the client's max_data, or the error.
local function check_data(client, data, n, fname)
  if type(data) ~= "string" then
    argerror(n, fname, "string expected, got " .. type(data))
  end
  local limit = max_data[client] or DEFAULT_MAX_DATA
  if #data > limit then
    argerror(n, fname, ("data of %d bytes is over the client's limit of %d " ..
      "(max_data)"):format(#data, limit))
  end
  return data
end

-- opts.acl: a preset name or a list { { scheme, id, perms }, ... }
local function check_acl(acl, auth, fname)
  if acl == nil then return 0 end
  if type(acl) == "table" then
    if #acl == 0 then argerror(2, fname, "acl list must not be empty") end
    for i, e in ipairs(acl) do
      if type(e) ~= "table" or type(e[1]) ~= "string" or
          type(e[2]) ~= "string" or type(e[3]) ~= "string" or
          not e[3]:find("^[cdrwa]+$") then
        argerror(2, fname, ("acl entry %d must be { scheme, id, perms } " ..
          "with perms made of 'cdrwa'"):format(i))
      end
    end
    return acl
  end
  local preset = ACLS[acl]
  if not preset then
    argerror(2, fname, "acl must be 'open', 'creator', 'read' or a list")
  end
  if preset ~= 0 and not auth then
    argerror(2, fname, "acl '" .. acl .. "' needs auth: it names the " ..
      "identities the session authenticates as")
  end
  return preset
end

-- What `await` polls while the session is in state `passing` (connecting
-- at first, expired while a new session opens): "pending" until it leaves.
local function session_leaving(client, passing)
  return { poll = function()
    local s, gen = client:_poll()
    return s == passing and "pending" or s, gen
  end }
end
local renews = setmetatable({}, WEAK_KEYS) -- clients that renew sessions

-- Checks the arguments and opens the session without waiting for it.
-- @return client, connect_timeout | nil, msg, code
local function open(hosts, opts, fname)
  if type(hosts) ~= "string" or hosts == "" then
    argerror(1, fname, "connect string expected, got " .. type(hosts))
  end
  if opts ~= nil and type(opts) ~= "table" then
    argerror(2, fname, "table expected, got " .. type(opts))
  end
  opts = opts or {}
  local st = opts.session_timeout or 10
  if type(st) ~= "number" or not (st > 0 and st < 1e6) then
    argerror(2, fname, "session_timeout must be a positive number")
  end
  local ct = opts.connect_timeout or 10
  if type(ct) ~= "number" or not (ct >= 0) then
    argerror(2, fname, "connect_timeout must be a number >= 0")
  end
  local auth = opts.auth
  if auth ~= nil and (type(auth) ~= "table" or type(auth[1]) ~= "string"
      or type(auth[2]) ~= "string") then
    argerror(2, fname, "auth must be { scheme, credential }")
  end
  local acl = check_acl(opts.acl, auth, fname)
  local md = opts.max_data
  if md ~= nil and (type(md) ~= "number" or md ~= floor(md) or md < 0 or
      md > 2 ^ 31 - 1) then
    argerror(2, fname, "max_data must be an integer from 0 to 2^31-1")
  end
  local renew = opts.renew_session
  if renew ~= nil and type(renew) ~= "boolean" then
    argerror(2, fname, "renew_session must be a boolean")
  end
  local c, msg, code = core.connect(hosts, floor(st * 1000), acl,
    renew ~= false, md)
  if not c then return nil, msg, code end
  max_data[c] = md
  if renew ~= false then renews[c] = true end
  if auth then
    local ok, amsg, acode = c:_add_auth(auth[1], auth[2])
    if not ok then c:close(); return nil, amsg, acode end
  end
  return c, ct
end
M._open = open

--- Open a session.
-- @string hosts connect string, "127.0.0.1:2181,127.0.0.1:2182/chroot"
-- @tparam[opt] table opts `session_timeout` (s, default 10),
--  `connect_timeout` (s, default 10), `acl` ("open"|"creator"|"read", or
--  a list `{ { scheme, id, perms }, ... }`: docs/acl.md), `max_data`
--  (longest data accepted, bytes; default 1 MiB - 8 KiB),
--  `auth` ({scheme, credential}), `renew_session` (default true: after
--  an expiry the client opens a new session by itself)
-- @return client, or nil, message, code
function M.connect(hosts, opts)
  local c, ct, code = open(hosts, opts, "connect")
  if not c then return nil, ct, code end
  local state = await(c, session_leaving(c, "connecting"), now() + ct)
  if state == "connected" then return c end
  c:close()
  if state == "timeout" then
    return nil, ("could not connect to %s within %gs"):format(hosts, ct),
      "connection_loss"
  elseif state == "auth_failed" then
    return nil, "authentication failed", "no_auth"
  end
  return nil, "session " .. state, state == "expired" and "session_expired"
    or "closed"
end

local function closed(client)
  if client:state() == "closed" then
    return true, "client is closed", "closed"
  end
end

-- how long a release may wait for the server to confirm the deletion
local function grace(client)
  return now() + client:session_timeout()
end

-- ---------------------------------------------------------------------------
-- locks: one class for every kind; a kind is a set of fields

local Lock = {}
Lock.__index = Lock
local arm_callbacks, list_participants

-- The fields of a boxed object of class `mt`, or the standard error.
local function checked(self, mt, fname, what)
  local f = unbox(self)
  if not f or getmetatable(self) ~= mt then
    argerror(1, fname, "zklock " .. what .. " expected, got " .. type(self))
  end
  return f
end

local function fields(self, fname) return checked(self, Lock, fname, "lock") end

local HOST
local function owner_data()
  if not HOST then
    local fh = io.open("/proc/sys/kernel/hostname")
    HOST = fh and fh:read("*l") or "localhost"
    if fh then fh:close() end
  end
  return ("zklock %s pid %d"):format(HOST, core.pid())
end

local function new_lock(client, path, fname, kind)
  if not core.is_client(client) then
    argerror(1, fname, "zklock client expected")
  end
  check_path(path, 1, fname)
  return box(Lock, {
    client = client, path = path, kind = kind.kind,
    max_leases = kind.max_leases or 1, markers = kind.markers,
    name = kind.name, owners = setmetatable({}, WEAK_KEYS),
    single = kind.single,
  })
end

--- A reentrant mutex (Curator InterProcessMutex): node `_c_<uuid>-lock-<seq>`.
-- @string path lock directory
function client_methods:mutex(path)
  return new_lock(self, path, "mutex",
    { kind = "mutex", markers = "mutex", name = "zklock.mutex" })
end

-- Register a hold for its callbacks; a revocable one has C watch the
-- node's data for "__REVOKE__".
arm_callbacks = function(f, own, lock, owner)
  local node = own.att:info()
  if not node then return end
  local reg = with_callbacks[f.client]
  if not reg then
    reg = {}
    with_callbacks[f.client] = reg
  end
  own.key = f.path .. "/" .. node
  reg[own.key] = setmetatable({ lock = lock, owner = owner }, WEAK_VALUES)
  if f.revoke_fn then own.att:revocable() end
end

--- Make the lock revocable (Curator `makeRevocable`): when someone asks
-- (`zklock.revoke`, or Curator's `Revoker`), `fn(lock)` runs in Lua, on
-- behalf of the holder, inside a zklock wait or `zk:dispatch()`.  Applies to
-- the current hold and to later ones.  @return the lock
function Lock:on_revoke(fn)
  local f = fields(self, "on_revoke")
  if type(fn) ~= "function" then
    argerror(1, "on_revoke", "function expected, got " .. type(fn))
  end
  f.revoke_fn = fn
  for co, own in pairs(f.owners) do arm_callbacks(f, own, self, co) end
  return self
end

--- Call `fn(lock)` when a hold of this lock is lost without a release:
-- the session expired, or the server was not heard from for the session
-- timeout (it may have expired the session: the lock may be someone
-- else's now).  Runs in Lua on behalf of the holder, inside a zklock wait,
-- `zk:dispatch()`, or zklock.ngx's timer.  By then `is_held()` is false;
-- `release()` answers nil, "lock lost", "lock_lost" and forgets the hold.
-- Applies to the current hold and to later ones.  @return the lock
function Lock:on_lost(fn)
  local f = fields(self, "on_lost")
  if type(fn) ~= "function" then
    argerror(1, "on_lost", "function expected, got " .. type(fn))
  end
  f.lost_fn = fn
  for co, own in pairs(f.owners) do arm_callbacks(f, own, self, co) end
  return self
end

--- A non-reentrant mutex (Curator InterProcessSemaphoreMutex): a second
-- acquire, even by the holder, waits like anyone else's; any coroutine of
-- the process may release it.  Nodes `_c_<uuid>-lease-<seq>`.
function client_methods:semaphore_mutex(path)
  return new_lock(self, path, "semaphore_mutex",
    { kind = "lease", markers = "lease", name = "zklock.semaphore_mutex",
      single = true })
end

local RwLock = { __name = "zklock.rwlock" }
RwLock.__index = RwLock

--- Readers and writers of the read/write lock, in queue order (full node
-- paths).  @return array, or nil, message, code
function RwLock:participants(timeout)
  if getmetatable(self) ~= RwLock then
    argerror(1, "participants", "zklock rwlock expected, got " .. type(self))
  end
  timeout = check_timeout(timeout, 1, "participants")
  return list_participants(unbox(self.read), timeout)
end

--- A read/write lock (Curator InterProcessReadWriteLock): `rw.read` and
-- `rw.write` are reentrant locks on one path, nodes `_c_<uuid>-__READ__<seq>`
-- and `_c_<uuid>-__WRIT__<seq>`.  Readers share; a writer excludes everyone
-- and holds back readers that come after it; the write holder may also take
-- the read lock; a read holder asking for the write lock is refused.
function client_methods:rwlock(path)
  local r = new_lock(self, path, "rwlock",
    { kind = "read", markers = "rw", name = "zklock.rwlock.read" })
  local w = new_lock(self, path, "rwlock",
    { kind = "write", markers = "rw", name = "zklock.rwlock.write" })
  local rf, wf = unbox(r), unbox(w)
  rf.partner, wf.partner = wf, rf
  return setmetatable({ read = r, write = w, path = path }, RwLock)
end

-- Take a node in the queue of f's path and wait to hold it.  Returns the
-- held attempt, or nil, msg, code once the node is gone again.
local function take(f, timeout, ignore)
  local client = f.client
  local att = client:_lock(f.path, f.kind, f.max_leases, owner_data(), ignore)
  local ok, msg, code = att:start()
  if not ok and code == "session_expired" and renews[client] then
    -- the timer thread is opening a new session: wait for it
    local st = await(client, session_leaving(client, "expired"),
      now() + (timeout or client:session_timeout()))
    if st ~= "timeout" then ok, msg, code = att:start() end
  end
  if not ok then return nil, msg, code end
  local st
  st, msg, code = guarded_await(client, att, timeout and now() + timeout,
    client:session_timeout())
  if st == "held" then return att end
  -- timed out or failed: our node goes (now, or once its create returns)
  att:release()
  await(client, att, grace(client))
  if st == "timeout" then
    return nil, ("timeout: %s not acquired within %gs"):format(f.path,
      timeout), "timeout"
  end
  return nil, msg, code
end

-- Give a held attempt's node back and wait for the server to confirm.
local function give_back(client, att)
  local held = att:held()
  att:release()
  if closed(client) then return nil, "client is closed", "closed" end
  await(client, att, grace(client))
  if not held then return nil, "lock lost", "lock_lost" end
  return true
end

--- Acquire, waiting at most `timeout` seconds (nil: for ever).
-- The same coroutine may acquire again: it then must release as often.
-- @return the lock, or nil, message, code ("timeout", ...)
function Lock:acquire(timeout)
  local f = fields(self, "acquire")
  timeout = check_timeout(timeout, 1, "acquire")
  local client = f.client
  local c, msg, code = closed(client)
  if c then return nil, msg, code end
  local co = f.single and f or me()
  local own = f.owners[co]
  if own and not f.single then
    if not own.att:held() then return nil, "lock lost", "lock_lost" end
    own.count = own.count + 1
    return self
  end
  local ignore
  if f.partner then -- read/write lock
    local other = f.partner.owners[co]
    if f.kind == "write" and other and not own then
      argerror(1, "acquire", "zklock.rwlock " .. f.path .. ": the read " ..
        "holder asking for the write lock would wait for itself for ever; " ..
        "release the read lock first")
    end
    if f.kind == "read" and other then -- downgrade: the writer may read
      ignore = other.att:info()
    end
  end
  local downgrade = ignore ~= nil
  local att
  att, msg, code = take(f, timeout, ignore)
  if not att then return nil, msg, code end
  -- (nothing in `own` may refer to co: LuaJIT's weak keys are not
  -- ephemerons, and a hold of a coroutine that is gone must be collectable)
  own = { att = att, count = 1, downgrade = downgrade }
  f.owners[co] = own
  if f.revoke_fn or f.lost_fn then arm_callbacks(f, own, self, co) end
  if hooks.held then hooks.held(self, co) end
  return self
end

--- Release one level of the calling coroutine's hold; the last deletes the
-- node.  Releasing a lock this coroutine does not hold raises an error.
-- @return true, or nil, "lock lost", "lock_lost" when it was lost meanwhile
function Lock:release()
  local f = fields(self, "release")
  local co = f.single and f or me()
  local own = f.owners[co]
  if not own then
    argerror(1, "release", f.name .. " " .. f.path ..
      " is not held by the calling coroutine")
  end
  own.count = own.count - 1
  if own.count > 0 then return true end
  f.owners[co] = nil
  local reg = with_callbacks[f.client]
  local node = own.att:info()
  if reg and own.key then reg[own.key] = nil end
  local reader = f.kind == "write" and f.partner.owners[co]
  if reader and reader.downgrade and not reader.keep then
    -- downgraded: our read node sorts after any writer that queued between
    -- it and our write node; such a writer would get the lock at once and
    -- write while we read, so then the write node stays until we stop
    -- reading (a writer that queues later waits for our read node anyway)
    local names = list_participants(f, f.client:session_timeout())
    local w, r = node and f.path .. "/" .. node, reader.att:info()
    r = r and f.path .. "/" .. r
    local between, seen = false, false
    for _, n in ipairs(names or {}) do
      if n == r then break end
      if seen and n:find("__WRIT__", 1, true) then between = true end
      if n == w then seen = true end
    end
    if between or not names then
      reader.keep = own.att
      return true
    end
  end
  local ok, msg, code = give_back(f.client, own.att)
  if own.keep then give_back(f.client, own.keep) end
  return ok, msg, code
end

local function own_attempt(self, fname)
  local f = fields(self, fname)
  local own = f.owners[f.single and f or me()]
  return own and own.att, f
end

--- True while the calling coroutine holds the lock (and the session lives).
function Lock:is_held()
  local att = own_attempt(self, "is_held")
  return att ~= nil and att:held()
end

--- Fencing token of the calling coroutine's hold: the lock node's czxid,
-- strictly increasing across every holder of every lock on the ensemble.
-- @return number, or nil when not held
function Lock:token()
  local att = own_attempt(self, "token")
  if not att or not att:held() then return nil end
  return (select(2, att:info()))
end

--- The lock's node path of the calling coroutine, or nil.
function Lock:node()
  local att, f = own_attempt(self, "node")
  local name = att and att:info()
  return name and f.path .. "/" .. name or nil
end

-- Every contender of f's path in queue order (full node paths); for a
-- read/write lock `kind` ("read"/"write") keeps one kind of node only.
list_participants = function(f, timeout, kind)
  local c, msg, code = closed(f.client)
  if c then return nil, msg, code end
  local op
  op, msg, code = f.client:_children(f.path, f.markers)
  if not op then return nil, msg, code end
  local st = await(f.client, op, timeout and now() + timeout)
  if st == "timeout" then return nil, "timeout", "timeout" end
  local names
  names, msg, code = op:result()
  if not names then return nil, msg, code end
  local out, marker = {}, kind and (kind == "read" and "__READ__" or "__WRIT__")
  for i = 1, #names do
    if not marker or names[i]:find(marker, 1, true) then
      out[#out + 1] = f.path .. "/" .. names[i]
    end
  end
  return out
end

--- Contenders in queue order (first = holder), as full node paths.  As in
-- Curator, `rw.read` and `rw.write` list the nodes of their own kind;
-- `rw:participants()` lists both.
-- @return array, or nil, message, code
function Lock:participants(timeout)
  local f = fields(self, "participants")
  timeout = check_timeout(timeout, 1, "participants")
  return list_participants(f, timeout, f.partner and f.kind)
end

-- `local l <close> = assert(m:acquire())` releases one level at scope end.
function Lock.__close(self)
  local f = unbox(self)
  if f and f.owners[f.single and f or me()] then self:release() end
end

function Lock.__tostring(self)
  local f = unbox(self)
  local att = f.owners[f.single and f or me()]
  return ("%s{%s, %s}: %s"):format(f.name, f.path,
    att and (att.att:held() and "held" or "lost") or "free", core.addr(self))
end

M.Lock = Lock

-- ---------------------------------------------------------------------------
-- semaphore: up to max_leases holders; acquire hands out lease objects

local Semaphore = { __name = "zklock.semaphore" }
Semaphore.__index = Semaphore
local Lease = { __name = "zklock.lease" }
Lease.__index = Lease

--- A counting semaphore: at most `max_leases` holders at once, herd-free
-- (each waiter watches the node `max_leases` places ahead of it).  Nodes
-- `_c_<uuid>-lease-<seq>`.
function client_methods:semaphore(path, max_leases)
  if not core.is_client(self) then
    argerror(1, "semaphore", "zklock client expected")
  end
  check_path(path, 1, "semaphore")
  check_count(max_leases, 2, "semaphore", "max_leases")
  local lock = new_lock(self, path, "semaphore",
    { kind = "lease", markers = "lease", max_leases = max_leases,
      name = "zklock.semaphore" })
  local f = unbox(lock)
  return box(Semaphore, { lock = lock, f = f, client = self, path = path,
    held = setmetatable({}, WEAK_KEYS) })
end

local function sem_fields(self, fname)
  return checked(self, Semaphore, fname, "semaphore")
end

--- Take a lease, waiting at most `timeout` seconds.
-- @return a lease (release(), is_held(), token(), node(); freed by __gc and
-- __close), or nil, message, code
function Semaphore:acquire(timeout)
  local s = sem_fields(self, "acquire")
  timeout = check_timeout(timeout, 1, "acquire")
  local c, msg, code = closed(s.client)
  if c then return nil, msg, code end
  local att
  att, msg, code = take(s.f, timeout)
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

--- Give the lease back.  @return true, or nil, msg, code
function Lease:release()
  local l = lease_fields(self, "release")
  if l.released then
    argerror(1, "release", "lease of " .. l.sem.path .. " already released")
  end
  l.released = true
  return give_back(l.sem.client, l.att)
end

function Lease:is_held()
  local l = lease_fields(self, "is_held")
  return not l.released and l.att:held()
end

function Lease:token()
  local l = lease_fields(self, "token")
  if l.released or not l.att:held() then return nil end
  return (select(2, l.att:info()))
end

function Lease:node()
  local l = lease_fields(self, "node")
  local name = not l.released and l.att:info()
  return name and l.sem.path .. "/" .. name or nil
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

--- Release `lease`, or the calling coroutine's newest lease.
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
function Semaphore:is_held()
  local l = newest(sem_fields(self, "is_held"))
  return l ~= nil and l:is_held()
end

--- Token of the calling coroutine's newest lease.
function Semaphore:token()
  local l = newest(sem_fields(self, "token"))
  return l and l:token()
end

function Semaphore:participants(timeout)
  return sem_fields(self, "participants").lock:participants(timeout)
end

function Semaphore.__tostring(self)
  local s = unbox(self)
  return ("zklock.semaphore{%s, %d}: %s"):format(s.path, s.f.max_leases,
    core.addr(self))
end

-- ---------------------------------------------------------------------------
-- multi-lock: all or nothing, in a canonical order

local MultiLock = { __name = "zklock.multilock" }
MultiLock.__index = MultiLock
local RANK = { write = 1, mutex = 2, lease = 3, read = 4 }

--- All-or-nothing over lock objects (mutexes, semaphore mutexes, rw.read,
-- rw.write): acquired in a canonical order (by path) so two callers passing
-- different orders cannot deadlock, one deadline for the whole set, released
-- in reverse.
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
  return box(MultiLock, { locks = sorted, client = self,
    owners = setmetatable({}, WEAK_KEYS) })
end

local function multi_fields(self, fname)
  return checked(self, MultiLock, fname, "multilock")
end

function MultiLock:acquire(timeout)
  local m = multi_fields(self, "acquire")
  timeout = check_timeout(timeout, 1, "acquire")
  local deadline = timeout and now() + timeout
  for i, l in ipairs(m.locks) do
    local left = deadline and math.max(0, deadline - now())
    local fine, ok, msg, code = pcall(l.acquire, l, left)
    if not (fine and ok) then -- all or nothing, also when it raised
      for j = i - 1, 1, -1 do m.locks[j]:release() end
      if not fine then error(ok, 0) end
      return nil, msg, code
    end
  end
  local co = me()
  m.owners[co] = (m.owners[co] or 0) + 1
  return self
end

--- Release every lock, in reverse order, whatever happens to any of them
-- (Curator InterProcessMultiLock: all are released, then the first failure
-- is reported).  A member no longer held by the caller (released on its
-- own, say by an on_revoke callback) counts as lost.
-- @return true; or nil, msg, code of the first failure: "lock_lost" for a
-- member lost or released elsewhere (the message names it), else the
-- member's own code
function MultiLock:release()
  local m = multi_fields(self, "release")
  local co = me()
  if not m.owners[co] then
    argerror(1, "release", "multilock not held by the calling coroutine")
  end
  m.owners[co] = m.owners[co] > 1 and m.owners[co] - 1 or nil
  local r1, r2, r3 = true, nil, nil
  for i = #m.locks, 1, -1 do
    local l = m.locks[i]
    local fine, ok, msg, code = pcall(l.release, l)
    if not fine then -- (not held any more: released behind our back)
      ok, msg, code = nil, ("multilock: %s was not held any more (%s)")
        :format(unbox(l).path, tostring(ok)), "lock_lost"
    end
    if not ok and r1 then r1, r2, r3 = nil, msg, code end
  end
  return r1, r2, r3
end

function MultiLock:is_held()
  local m = multi_fields(self, "is_held")
  if not m.owners[me()] then return false end
  for _, l in ipairs(m.locks) do
    if not l:is_held() then return false end
  end
  return true
end

--- Tokens of every lock, in the canonical order (nil when not held).
function MultiLock:token()
  local m = multi_fields(self, "token")
  if not self:is_held() then return nil end
  local t = {}
  for i, l in ipairs(m.locks) do t[i] = l:token() end
  return t
end

--- Participants of every lock: { [path] = {...} }.
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

function MultiLock.__close(self)
  local m = unbox(self)
  if m and m.owners[me()] then self:release() end
end

-- ---------------------------------------------------------------------------
-- barriers

local function run_op(client, op, msg, code, timeout)
  if not op then return nil, msg, code end
  local st = await(client, op, timeout and now() + timeout)
  if st == "timeout" and op:cancel() then
    await(client, op, grace(client)) -- a cancelled enter removes its node
    return nil, "timeout", "timeout"
  end
  -- (finished, possibly just as the deadline passed: its real result)
  return op:result()
end

-- Start `client:<method>(...)` (a C op) and wait for it, at most `timeout`.
local function call_op(client, timeout, method, ...)
  local c, msg, code = closed(client)
  if c then return nil, msg, code end
  local op
  op, msg, code = client[method](client, ...)
  return run_op(client, op, msg, code, timeout)
end

-- true, or nil, msg, code
local function succeeded(ok, msg, code)
  if ok then return true end
  return nil, msg, code
end

-- ---------------------------------------------------------------------------
-- plain data: what a lock usually guards (a counter, a config)

--- Fenced write: set node `path` to `data` (creating it, and its parents,
-- when missing) only while this hold's lock node still exists, in one
-- ZooKeeper multi-op (check our node, then write).  A holder whose session
-- expired, or who lost the lock while paused, is refused even if it still
-- believes it holds.  Accepted writes on one path follow the holds in
-- order; their tokens (`token()`) strictly increase.
-- @return the node's new data version and the write's zxid, or nil, msg,
-- code: "lock_lost" (not written), "connection_loss" (the connection was
-- cut with the write in flight and it could not be confirmed: it may have
-- been applied), "timeout", ...
function Lock:fenced_set(path, data, timeout)
  local f = fields(self, "fenced_set")
  check_path(path, 1, "fenced_set")
  check_data(f.client, data, 2, "fenced_set")
  timeout = check_timeout(timeout, 3, "fenced_set")
  local own = f.owners[f.single and f or me()]
  if not own then
    argerror(1, "fenced_set", f.name .. " " .. f.path ..
      " is not held by the calling coroutine")
  end
  local node = own.att:info()
  -- a hold known lost writes nothing (and so fails for certain)
  if not node or own.att:poll() ~= "held" then
    return nil, "lock lost", "lock_lost"
  end
  local v, zxid, code = call_op(f.client, timeout or
    f.client:session_timeout(), "_fenced", f.path .. "/" .. node, path, data)
  if v then return v, zxid end
  if code == "session_expired" then
    return nil, "lock lost: session expired", "lock_lost"
  end
  return nil, zxid, code
end

local function check_client(self, fname)
  if not core.is_client(self) then
    argerror(1, fname, "zklock client expected")
  end
end

--- The data of node `path`.  @param timeout seconds (default: the session
-- timeout).  @return data, version; or nil, msg, code ("no_node", ...)
function client_methods:get(path, timeout)
  check_client(self, "get")
  check_path(path, 1, "get")
  timeout = check_timeout(timeout, 2, "get")
  return call_op(self, timeout or self:session_timeout(), "_get", path)
end

--- Set the data of node `path`, creating it (and its parents, as
-- persistent nodes) when missing.  @return true, or nil, msg, code
function client_methods:set(path, data, timeout)
  check_client(self, "set")
  check_path(path, 1, "set")
  check_data(self, data, 2, "set")
  timeout = check_timeout(timeout, 3, "set")
  local deadline = now() + (timeout or self:session_timeout())
  while true do
    local ok, msg, code = call_op(self, deadline - now(), "_set", path, data)
    if ok or code ~= "no_node" then return succeeded(ok, msg, code) end
    local created
    ok, created, code = call_op(self, deadline - now(), "_create", path,
      data, "persistent")
    if not ok then return nil, created, code end
    if created then return true end
    -- it existed after all (someone else made it): set it again
    if now() >= deadline then return nil, "timeout", "timeout" end
  end
end

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
  check_path(path, 1, "double_barrier")
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

-- ---------------------------------------------------------------------------
-- callbacks and revocation

--- Run the callbacks this client has queued (revocation requests); with a
-- timeout, first wait up to that long for one to arrive.
-- @return how many ran
function client_methods:dispatch(timeout)
  if not core.is_client(self) then
    argerror(1, "dispatch", "zklock client expected")
  end
  timeout = check_timeout(timeout, 1, "dispatch")
  local n = dispatch(self)
  if n > 0 or not timeout or closed(self) then return n end
  local deadline = now() + timeout
  while n == 0 do
    local left = deadline - now()
    if left <= 0 then break end
    local _, gen = self:_poll()
    waiter(self, gen, left)
    n = dispatch(self)
  end
  return n
end

--- Ask the current holder(s) of the lock at `path` to let go (Curator
-- Revoker): their nodes' data becomes "__REVOKE__".  Holders are the first
-- node (mutex), the first `max_leases` (semaphore), or the writer / the
-- readers before the first writer (read/write lock).
-- @return the number of holders asked, or nil, msg, code
function M.revoke(zk, path, max_leases)
  if not core.is_client(zk) then argerror(1, "revoke", "zklock client expected") end
  check_path(path, 2, "revoke")
  if max_leases ~= nil then check_count(max_leases, 3, "revoke", "max_leases") end
  local c, msg, code = closed(zk)
  if c then return nil, msg, code end
  local holders = {}
  local function list(markers)
    local names
    names, msg, code = call_op(zk, zk:session_timeout(), "_children", path,
      markers)
    return names
  end
  local rw = list("rw")
  if not rw then return nil, msg, code end
  if #rw > 0 then
    for _, n in ipairs(rw) do
      local writer = n:find("__WRIT__", 1, true)
      if writer and #holders > 0 then break end
      holders[#holders + 1] = n
      if writer then break end
    end
  else
    local names = list("mutex")
    if not names then return nil, msg, code end
    if #names == 0 then names = list("lease") or {} end
    for i = 1, math.min(#names, max_leases or 1) do holders[i] = names[i] end
  end
  for _, n in ipairs(holders) do
    local ok
    ok, msg, code = call_op(zk, zk:session_timeout(), "_set",
      path .. "/" .. n, "__REVOKE__")
    if not ok and code ~= "no_node" then return nil, msg, code end
  end
  return #holders
end

-- ---------------------------------------------------------------------------

--- Acquire `lock`, call `fn(...)`, release; on error release and re-raise
-- the original error.  `zklock.with_lock(lock, [timeout,] fn, ...)`
-- @return fn's results, or nil, message, code when not acquired
local function finish(lock, ok, ...)
  local released, msg, code = lock:release()
  if not ok then error((...), 0) end
  -- fn ran, but not (all of it) under the lock: the caller must know
  if not released and code == "lock_lost" then return nil, msg, code end
  return ...
end

local function run(lock, timeout, fn, ...)
  local held, msg, code = lock:acquire(timeout)
  if not held then return nil, msg, code end
  return finish(lock, pcall(fn, ...))
end

function M.with_lock(lock, a, ...)
  local mt = getmetatable(lock)
  if type(lock) ~= "userdata" or type(mt) ~= "table"
      or type(mt.__index) ~= "table" or not mt.__index.acquire then
    argerror(1, "with_lock", "zklock lock expected, got " .. type(lock))
  end
  if type(a) == "function" then return run(lock, nil, a, ...) end
  check_timeout(a, 2, "with_lock")
  if type((...)) ~= "function" then
    argerror(3, "with_lock", "function expected, got " .. type((...)))
  end
  return run(lock, a, ...)
end

-- Testing only (the torture run proves its checker with it): a mutex
-- whose contenders ignore up to n - 1 nodes ahead of them.  Broken on
-- purpose; never use it to guard anything.
function M._broken_mutex(client, path, n)
  return new_lock(client, path, "mutex", { kind = "mutex", markers = "mutex",
    name = "zklock.mutex", max_leases = n })
end

--- Counters of this client: `requests` sent, `watch_events` received,
-- `renewed` (new sessions opened after an expiry), `lost` (holds lost).
function client_methods:stats()
  check_client(self, "stats")
  return self:_stats()
end

--- Client methods written in Lua, for reference: `zk:mutex(path)`.
-- C ones: `zk:state()`, `zk:session_id()`, `zk:session_timeout()`,
-- `zk:close()`.
M.client_methods = client_methods

return M
