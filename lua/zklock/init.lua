--- ZooKeeper locks, semaphores, barriers and leader election for Lua
-- 5.1-5.4 and LuaJIT, on the nodes and protocols of Apache Curator (a Java
-- service and Lua processes can share a lock).
--
--     local zklock = require "zklock"
--     local zk = assert(zklock.connect("127.0.0.1:2181"))
--     local lock = zk:mutex("/app/orders")
--     local ok, msg, code = lock:acquire(5) -- wait at most 5 s
--     if ok then
--       -- ... the critical section ...
--       lock:release()
--     end
--
-- Misuse raises a standard error (`bad argument #1 to 'mutex' (...)`);
-- what comes from the world (a timeout, a lost session) returns `nil,
-- message, code`, the code one of `zklock.errors`.  Timeouts are in
-- seconds, and nil waits for ever.  docs/api.md explains every call and
-- option; under OpenResty, load zklock.ngx as well.
-- @module zklock
-- @alias client_methods

-- (For maintainers: this file is the public surface: connect, the waiter,
-- revocation, with_lock, logging, and the client methods table; inside
-- nginx, zklock.ngx.  zklock.client holds the client's own methods and
-- loads the recipes: zklock.lock (mutex, semaphore mutex, read/write
-- lock), zklock.semaphore, zklock.multilock, zklock.barrier (barrier,
-- double barrier) and zklock.election, which add their methods to the
-- client methods as they load.  Argument checks, owners, waits (every
-- wait polls a C object and sleeps until the session reports a change),
-- callbacks, logging and opening sessions are internal modules under
-- zklock.rt.  Recipe objects are userdata whose state machines run in C.
-- config.ld gathers the doc comments of every file on one page.)
local core = require "zklock.core"
local check = require "zklock.rt.check"
local plug = require "zklock.rt.plug"
local log = require "zklock.rt.log"
local guard = require "zklock.rt.guard"
local wait = require "zklock.rt.wait"
local op = require "zklock.rt.op"
local session = require "zklock.rt.session"
require "zklock.client" -- (every client method)
local L = require "zklock.lock"
local node = require "zklock.lock.node"
local guarded = require "zklock.lock.guarded"
local Semaphore = require("zklock.semaphore").Semaphore
local metrics = require "zklock.metrics"
local token = require "zklock.token"
check.internal_file()

local M = {
  --- The version, as `"0.1.0"`: the versioned rockspec's, less its
  -- revision.
  _VERSION = "0.1.0",
  --- The error codes, the third value of every failure, each mapping to
  -- itself: compare with `code == zklock.errors.timeout`.  `timeout`,
  -- `connection_loss`, `session_expired`, `closed`, `no_auth`,
  -- `lock_lost`, `no_node`, `unknown_host`, `tls`, `node_exists`,
  -- `not_empty`, `zk_error`, `forked` (docs/api.md, "Errors").
  errors = core.errors,
  --- What this build can do: `{ tls = bool, sasl = bool }`
  -- (docs/security.md, "Builds").
  features = core.features(),
}

local client_methods = core.client_methods
local type, error, pcall, ipairs, tostring = type, error, pcall, ipairs,
  tostring
local getmetatable = getmetatable
local argerror = check.argerror
local check_path, check_count = check.check_path, check.check_count
local check_timeout = check.check_timeout
local closed, call_op = op.closed, op.call_op
local protect = guard.protect
local unpack = table.unpack or unpack
local function pack(...) return { n = select("#", ...), ... } end

-- ---------------------------------------------------------------------------
-- waiting

--- Replace how zklock sleeps while it waits (for cooperative schedulers).
-- `fn(client, gen, timeout, obj)` must return once `client:_poll()`
-- reports a generation other than `gen`, or after `timeout` seconds (nil:
-- no limit; zklock passes no timeout of zero or less: a wait whose time
-- has run out returns without calling fn).  `obj` is what is awaited (it
-- has `poll()`), when known.  It may yield.  Under OpenResty, zklock.ngx
-- installs its own.
-- @tparam ?function fn the waiter, or nil to restore the blocking wait
function M.set_waiter(fn)
  if fn ~= nil and type(fn) ~= "function" then
    argerror(1, "set_waiter", "function expected, got " .. type(fn))
  end
  wait.set_waiter(fn)
end

-- ---------------------------------------------------------------------------
-- client

--- Open a session, and wait for its first connection.
-- @string hosts the connect string: `host:port` entries separated by
--  commas, then an optional chroot (`"127.0.0.1:2181,127.0.0.1:2182/app"`)
-- @tparam[opt] table opts `session_timeout` (seconds, default 10),
--  `connect_timeout` (seconds, default 10), `acl` (`"open"`, `"creator"`,
--  `"read"`, or a list `{ { scheme, id, perms }, ... }`: docs/acl.md),
--  `max_data` (the longest data accepted, in bytes; default 1040384),
--  `auth` (`{ scheme, credential }`), `renew_session` (default true:
--  after an expiry, open a new session by itself), `id` (the participant
--  id written into this client's lock and lease nodes, which `holders()`
--  reads back; default `"zklock HOST pid N"`), `tls` (`{ ca [, cert, key
--  [, key_password]] [, verify_host = false] }`) and `sasl` (`{ user, password | password_file [,
--  mechanism, realm, service, server] }`; DIGEST-MD5 by default): see
--  docs/security.md
-- @return a client, or nil, message, code: `"unknown_host"` (a host name
--  does not resolve), `"connection_loss"` (no connection in time),
--  `"no_auth"` (a SASL login that failed, and which way; a password_file
--  that cannot be read), `"no_node"` (the chroot does not
--  exist), `"tls"` (a TLS set-up that cannot work, and why)
function M.connect(hosts, opts)
  local c, ct, code = session.open(hosts, opts, "connect")
  if not c then return nil, ct, code end
  return session.finish_connect(c, hosts, ct)
end

-- ---------------------------------------------------------------------------
-- revocation

--- Ask the current holder(s) of the lock at `path` to let go (Curator's
-- `Revoker`): their nodes' data becomes `"__REVOKE__"`, and a revocable
-- holder's `on_revoke` callback runs.  The holders are the writer, or the
-- readers before the first writer (read/write lock); else the first node
-- (mutex); else the first `max_leases` (semaphore).
-- @param zk a client
-- @string path the lock's path
-- @tparam[opt] int max_leases for a semaphore: how many hold (default 1)
-- @return the number of holders asked, or nil, message, code
function M.revoke(zk, path, max_leases)
  if not core.is_client(zk) then argerror(1, "revoke", "zklock client expected") end
  check_path(path, 2, "revoke")
  if max_leases ~= nil then check_count(max_leases, 3, "revoke", "max_leases") end
  local c, msg, code = closed(zk)
  if c then return nil, msg, code end
  local function list(dir, family)
    local names
    names, msg, code = call_op(zk, zk:session_timeout(), "_children", dir,
      family)
    return names
  end
  -- who holds: the rule each lock attempt applies to itself, in C
  local dir = path
  local holders = list(path, "rw")
  if not holders then return nil, msg, code end
  if #holders > 0 then
    holders = core.holders(holders, "rw")
  else
    local names = list(path, "mutex")
    if not names then return nil, msg, code end
    if #names > 0 then
      holders = core.holders(names, "mutex", max_leases or 1)
    else -- a semaphore's leases (Curator InterProcessSemaphoreV2)
      dir = path .. "/leases"
      names = list(dir, "lease")
      if not names then return nil, msg, code end
      holders = core.holders(names, "lease", max_leases or 1)
    end
  end
  for _, n in ipairs(holders) do
    local ok
    ok, msg, code = call_op(zk, zk:session_timeout(), "_set",
      dir .. "/" .. n, core.REVOKE)
    if not ok and code ~= "no_node" then return nil, msg, code end
  end
  return #holders
end

M.check_token = token.check_token
--- The sortable string form of a token (`lock:token("string")` gives it):
-- `zklock.token_string(czxid [, pass])`.
-- @function token_string
-- @param czxid a token
-- @tparam[opt] int pass its pass (0)
-- @treturn string `CZXID.PASS`, 16 hex digits each
function M.token_string(czxid, pass)
  local c, p = token.parse(czxid, pass)
  if not c then argerror(p:find("^a pass") and 2 or 1, "token_string", p) end
  return token.format(c, p)
end

--- A token's string form as (czxid, pass): `zklock.parse_token(s)`.
-- @function parse_token
-- @string s `CZXID.PASS`, as `lock:token("string")` gives it
-- @return czxid, pass; or nil and why
function M.parse_token(s)
  if type(s) ~= "string" then
    argerror(1, "parse_token", "string expected, got " .. type(s))
  end
  return token.parse(s)
end

-- ---------------------------------------------------------------------------
-- with_lock

-- The release at the end of with_lock.  When fn raised, its error goes
-- on whatever the release says (a release that raises too is reported
-- to the log); otherwise a hold that ended before it (lost, revoked, past
-- max_hold) makes with_lock answer nil, msg, "lock_lost".
local function finish(lock, ok, ...)
  if not ok then
    local fine, err = pcall(lock.release, lock)
    if not fine then log.log("error", "with_lock: release: " .. tostring(err)) end
    error((...), 0)
  end
  local released, msg, code = lock:release()
  -- fn ran, but not (all of it) under the lock: the caller must know
  if not released and code == "lock_lost" then return nil, msg, code end
  return ...
end

-- with_lock's `update`: fn's first result is the node's new data (nil:
-- unchanged), written with the release; the rest are returned.  A write
-- refused before it is sent (too big for the server) releases plainly,
-- then raises.
local function finish_update(lock, path, ok, new, ...)
  if not ok then return finish(lock, ok, new) end
  if new == nil then return finish(lock, ok, ...) end
  local fine, released, msg, code = pcall(lock.release, lock,
    { write = path, data = new })
  if not fine then -- (refused before anything was sent: still held)
    local plain, err = pcall(lock.release, lock)
    if not plain then
      log.log("error", "with_lock: release: " .. tostring(err))
    end
    error(released, 0)
  end
  if not released then return nil, msg, code end
  return ...
end

-- with_lock's update under a semaphore of several leases, whose holders
-- share it: the write is fenced by the lease and conditional on the
-- version read; when another holder wrote first, the node is read again
-- and fn runs again on its new data (docs/api.md, "with_lock").  A write
-- that landed is the answer, whatever the release says after it.
local function run_shared_update(sem, timeout, opts, fn, ...)
  local path = opts.update
  local lease, data, version = sem:acquire(timeout,
    { max_hold = opts.max_hold, read = path })
  if not lease then return nil, data, version end
  local _, l, f = sem:_update_hold()
  while true do
    local r = pack(protect(fn, data, ...))
    if not r[1] then return finish(lease, false, r[2]) end
    if r[2] == nil then return finish(lease, true, unpack(r, 3, r.n)) end
    local fine, v, zxid, code = pcall(function()
      check.check_data(f.client, r[2], 1, "release")
      return guarded.fenced_set(f, l, path, r[2], nil, version or -2)
    end)
    if not fine then -- (refused before anything was sent: still held)
      pcall(lease.release, lease)
      error(v, 0)
    end
    if v then
      lease:release()
      return unpack(r, 3, r.n)
    end
    if code ~= "bad_version" then
      lease:release()
      return nil, zxid, code
    end
    data, version, code = node.read_held(f.client, nil, path)
    if data == nil and code then
      lease:release()
      return nil, version, code
    end
  end
end

-- fn runs under guard.protect: a string error raised in it is raised again
-- with the frames inside fn (gone by then) appended; any other error
-- value, unchanged.
local function run(lock, timeout, opts, fn, ...)
  local update = opts and opts.update
  if update and getmetatable(lock) == Semaphore and
      core.unbox(lock).f.max_leases > 1 then
    return run_shared_update(lock, timeout, opts, fn, ...)
  end
  local held, msg, code = lock:acquire(timeout, opts and
    { max_hold = opts.max_hold, read = update })
  if not held then return nil, msg, code end
  if update then
    -- msg, code: the guarded node's data and version (nil: no node)
    return finish_update(lock, update, protect(fn, msg, ...))
  end
  return finish(lock, protect(fn, ...))
end

-- Can `lock` write with its release (with_lock's update)?  A mutex, a
-- write lock, a semaphore mutex, a semaphore (of several leases: a
-- conditional write, run_shared_update); not a read lock (its holders
-- share it, and their writes would race) nor a multilock (whose release
-- is several).
local function writes_with_release(lock)
  if getmetatable(lock) == Semaphore then return true end
  if getmetatable(lock) ~= L.Lock then return false end
  local kind = core.unbox(lock).kind
  return kind == "mutex" or kind == "write" or kind == "lease"
end

-- with_lock's options table
local WITH_LOCK_OPTIONS = check.options({ "timeout", "max_hold", "update" })

--- Acquire `lock`, call `fn(...)`, release, and return `fn`'s results.
-- If `fn` raises, release and raise the error again: a string one with
-- the traceback of where `fn` raised it appended, any other value
-- unchanged (docs/api.md).  A hold
-- that ended meanwhile (lost, past `max_hold`, revoked) makes it return
-- `nil, message, "lock_lost"` after `fn`.  With `update = path`, node
-- `path` is read with the acquire and `fn(data, ...)` gets its data (nil:
-- no node); `fn`'s first result, unless nil, is written to it with the
-- release, fenced, in one request, and `with_lock` returns `fn`'s other
-- results (a mutex or a write lock only; docs/api.md).
-- @function with_lock
-- @param lock a lock, a semaphore or a multilock: anything with `acquire`
--  and `release`
-- @tparam[opt] number|table timeout seconds, or
--  `{ timeout =, max_hold =, update = }`
-- @func fn the critical section
-- @param ... `fn`'s arguments
-- @return `fn`'s results, or nil, message, code when not acquired
function M.with_lock(lock, a, ...)
  local mt = getmetatable(lock)
  if type(lock) ~= "userdata" or type(mt) ~= "table"
      or type(mt.__index) ~= "table" or not mt.__index.acquire then
    argerror(1, "with_lock", "zklock lock expected, got " .. type(lock))
  end
  if type(a) == "function" then return run(lock, nil, nil, a, ...) end
  local timeout, opts = a, nil
  if type(a) == "table" then -- { timeout =, max_hold =, update = }
    timeout, opts = a.timeout, a
    L.check_opts(opts, 2, "with_lock", WITH_LOCK_OPTIONS)
    check_timeout(timeout, 2, "with_lock")
    if a.update ~= nil then
      check_path(a.update, 2, "with_lock")
      if not writes_with_release(lock) then
        local name = getmetatable(lock) == L.Lock and core.unbox(lock).name
          or mt.__name or "lock"
        argerror(2, "with_lock", "update needs a mutex, a write lock or a " ..
          "semaphore: " ..
          "a " .. tostring(name) .. " writes nothing with its release")
      end
    end
  else
    check_timeout(a, 2, "with_lock")
  end
  if type((...)) ~= "function" then
    argerror(3, "with_lock", "function expected, got " .. type((...)))
  end
  return run(lock, timeout, opts, ...)
end


-- ---------------------------------------------------------------------------
-- logging and metrics

local LEVELS = { none = true, error = true, warn = true, info = true,
  debug = true }

--- Send zklock's messages (a callback that raised) and the ZooKeeper C
-- client's log to `fn(level, message)`, called on the Lua thread when
-- zklock next dispatches.  The default writes to stderr (`zklock: <level>:
-- <message>`); inside nginx, to its error log (docs/api.md, "Logging").
-- @tparam ?function fn `fn(level, message)`, level one of `"error"`,
--  `"warn"`, `"info"`, `"debug"`; or nil for the default
function M.set_logger(fn)
  if fn ~= nil and type(fn) ~= "function" then
    argerror(1, "set_logger", "function expected, got " .. type(fn))
  end
  log.set_logger(fn or plug.hooks.default_logger)
end

--- How much the ZooKeeper C client logs.  The environment variable
-- `ZKLOCK_LOG_LEVEL` sets the starting level.
-- @string level `"none"` (the default), `"error"`, `"warn"`, `"info"` or
--  `"debug"`
function M.set_log_level(level)
  if not LEVELS[level] then
    argerror(1, "set_log_level", "one of none, error, warn, info, debug " ..
      "expected, got " .. tostring(level))
  end
  core.set_log_level(level)
end

--- The figures of every client of this process, added up, in the
-- Prometheus text exposition format (docs/api.md, "Metrics");
-- `zklock.ngx.metrics()` adds up nginx's workers.
-- @treturn string the exposition text
function M.metrics()
  return metrics.prometheus(metrics.process)
end

-- The client methods table, and the lock class (not in the reference: no
-- program needs them).
M.client_methods = client_methods
M.Lock = L.Lock

-- Inside nginx's Lua module a zklock wait must never block the worker: a
-- blocking wait there deadlocks the server (the holder waits for the very
-- worker that waits).  So `require "zklock"` alone installs zklock.ngx's
-- waiter, and `zklock.connect` is zklock.ngx.connect (call it in
-- init_worker_by_lua*); `require "zklock.ngx"` stays valid (docs/openresty.md).
if type(ngx) == "table" and type(ngx.config) == "table" and
    ngx.config.ngx_lua_version and type(ngx.timer) == "table" then
  M.connect = require("zklock.ngx").connect
end

return M
