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
local acting

local function me()
  return acting or co_running() or MAIN
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
  elseif path:sub(-1) == "/" then why = "path must not end with '/'"
  elseif path:find("//", 1, true) then why = "empty path component"
  elseif path:find("%z") then why = "path contains a NUL byte"
  elseif path:find("/%.%.?/") or path:find("/%.%.?$") then
    why = "relative path component"
  end
  if why then argerror(n, fname, why .. ": " .. path) end
  return path
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
-- `fn(client, gen, timeout)` must return once `client:_poll()` reports a
-- generation other than `gen`, or after `timeout` seconds (nil: no limit).
-- It may yield.  `zklock.set_waiter(nil)` restores the blocking wait.
function M.set_waiter(fn)
  if fn ~= nil and type(fn) ~= "function" then
    argerror(1, "set_waiter", "function expected, got " .. type(fn))
  end
  waiter = fn or block
end

-- ---------------------------------------------------------------------------
-- callbacks: queued in C on ZooKeeper's threads, run here, in Lua

-- node path -> { lock =, fn =, owner = } for revocable holds, per client
local revocable = setmetatable({}, WEAK_KEYS)

local function report(what, err)
  io.stderr:write(("zklock: %s callback failed: %s\n"):format(what,
    tostring(err)))
end

-- Run the callbacks `client` has queued; returns how many ran.
local function dispatch(client)
  local evs = client:_events()
  if not evs then return 0 end
  local n = 0
  local reg = revocable[client]
  for _, ev in ipairs(evs) do
    local r = reg and reg[ev[2]]
    if ev[1] == "revoke" and r then
      local saved = acting
      acting = r.owner
      local ok, err = xpcall(r.fn, debug.traceback, r.lock)
      acting = saved
      n = n + 1
      if not ok then report("on_revoke", err) end
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
    dispatch(client)
    local st, gen, msg, code = obj:poll()
    if st == "waiting" then queued = true
    elseif st ~= "pending" then return st, msg, code end
    local left
    if deadline then
      left = deadline - now()
      if not queued and slack then left = left + slack end
      if left <= 0 then return "timeout" end
    end
    waiter(client, gen, left)
  end
end
M._await = await

-- ---------------------------------------------------------------------------
-- client

local ACLS = { open = 0, creator = 1, read = 2 }

--- Open a session.
-- @string hosts connect string, "127.0.0.1:2181,127.0.0.1:2182/chroot"
-- @tparam[opt] table opts `session_timeout` (s, default 10),
--  `connect_timeout` (s, default 10), `acl` ("open"|"creator"|"read"),
--  `auth` ({scheme, credential})
-- @return client, or nil, message, code
function M.connect(hosts, opts)
  if type(hosts) ~= "string" or hosts == "" then
    argerror(1, "connect", "connect string expected, got " .. type(hosts))
  end
  if opts ~= nil and type(opts) ~= "table" then
    argerror(2, "connect", "table expected, got " .. type(opts))
  end
  opts = opts or {}
  local st = opts.session_timeout or 10
  if type(st) ~= "number" or not (st > 0 and st < 1e6) then
    argerror(2, "connect", "session_timeout must be a positive number")
  end
  local ct = opts.connect_timeout or 10
  if type(ct) ~= "number" or not (ct >= 0) then
    argerror(2, "connect", "connect_timeout must be a number >= 0")
  end
  local acl = ACLS[opts.acl or "open"]
  if not acl then
    argerror(2, "connect", "acl must be 'open', 'creator' or 'read'")
  end
  local auth = opts.auth
  if auth ~= nil and (type(auth) ~= "table" or type(auth[1]) ~= "string"
      or type(auth[2]) ~= "string") then
    argerror(2, "connect", "auth must be { scheme, credential }")
  end
  local c, msg, code = core.connect(hosts, floor(st * 1000), acl)
  if not c then return nil, msg, code end
  if auth then
    local ok, amsg, acode = c:_add_auth(auth[1], auth[2])
    if not ok then c:close(); return nil, amsg, acode end
  end
  local state = await(c, {
    poll = function()
      local s, gen = c:_poll()
      return s == "connecting" and "pending" or s, gen
    end }, now() + ct)
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
local arm_revoke

local function fields(self, fname)
  local f = unbox(self)
  if not f or getmetatable(self) ~= Lock then
    argerror(1, fname, "zklock lock expected, got " .. type(self))
  end
  return f
end

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
  })
end

--- A reentrant mutex (Curator InterProcessMutex): node `_c_<uuid>-lock-<seq>`.
-- @string path lock directory
function client_methods:mutex(path)
  return new_lock(self, path, "mutex",
    { kind = "mutex", markers = "mutex", name = "zklock.mutex" })
end

-- Make a hold revocable: C watches the node's data for "__REVOKE__".
arm_revoke = function(f, own, lock)
  local node = own.att:info()
  if not node then return end
  local reg = revocable[f.client]
  if not reg then
    reg = {}
    revocable[f.client] = reg
  end
  reg[f.path .. "/" .. node] = setmetatable(
    { lock = lock, fn = f.revoke_fn, owner = own.owner }, WEAK_VALUES)
  own.att:revocable()
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
  for _, own in pairs(f.owners) do arm_revoke(f, own, self) end
  return self
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
  local deadline = timeout and now() + timeout
  local att = client:_lock(f.path, f.kind, f.max_leases, owner_data(), ignore)
  local ok
  ok, msg, code = att:start()
  if not ok then return nil, msg, code end
  local st
  st, msg, code = await(client, att, deadline, client:session_timeout())
  if st == "held" then
    own = { att = att, count = 1, owner = co }
    f.owners[co] = own
    if f.revoke_fn then arm_revoke(f, own, self) end
    return self
  end
  -- timed out or failed: our node goes (now, or once its create returns)
  att:release()
  await(client, att, grace(client))
  if st == "timeout" then
    return nil, ("timeout: %s not acquired within %gs"):format(f.path,
      timeout), "timeout"
  end
  return nil, msg, code
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
  local reg = revocable[f.client]
  local node = own.att:info()
  if reg and node then reg[f.path .. "/" .. node] = nil end
  local held = own.att:held()
  own.att:release()
  if closed(f.client) then return nil, "client is closed", "closed" end
  await(f.client, own.att, grace(f.client))
  if not held then return nil, "lock lost", "lock_lost" end
  return true
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

--- Contenders in queue order (first = holder), as full node paths.
-- @return array, or nil, message, code
function Lock:participants(timeout)
  local f = fields(self, "participants")
  timeout = check_timeout(timeout, 1, "participants")
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
  for i = 1, #names do names[i] = f.path .. "/" .. names[i] end
  return names
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

--- Acquire `lock`, call `fn(...)`, release; on error release and re-raise
-- the original error.  `zklock.with_lock(lock, [timeout,] fn, ...)`
-- @return fn's results, or nil, message, code when not acquired
local function finish(lock, ok, ...)
  lock:release()
  if not ok then error((...), 0) end
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

--- Client methods written in Lua, for reference: `zk:mutex(path)`.
-- C ones: `zk:state()`, `zk:session_id()`, `zk:session_timeout()`,
-- `zk:close()`.
M.client_methods = client_methods

return M
