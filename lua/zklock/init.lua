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
-- revocation, with_lock, and the client methods table.  The recipes live
-- in zklock.lock (mutex, semaphore mutex, read/write lock),
-- zklock.semaphore, zklock.multilock, zklock.barrier (barrier, double
-- barrier) and zklock.election, which add their methods to the client
-- methods as they load; argument checking, per-coroutine ownership and
-- the waits (every wait polls a C object and sleeps until the session
-- reports a change) are in the internal zklock.runtime.  Recipe objects
-- are userdata whose state machines run in C.  config.ld gathers the doc
-- comments of every file on one page.)
local core = require "zklock.core"
local R = require "zklock.runtime"
R.internal_file()
local L = require "zklock.lock"
require "zklock.rwlock"
local metrics = require "zklock.metrics"
require "zklock.semaphore"
require "zklock.multilock"
require "zklock.barrier"
require "zklock.election"

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

local now = core.now
local client_methods = core.client_methods
local type, error, pcall, ipairs = type, error, pcall, ipairs
local getmetatable = getmetatable
local argerror, check_client = R.argerror, R.check_client
local check_path, check_count = R.check_path, R.check_count
local check_timeout, check_data = R.check_timeout, R.check_data
local await, dispatch, closed = R.await, R.dispatch, R.closed
local call_op, succeeded = R.call_op, R.succeeded
local protect = R.protect

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
  R.set_waiter(fn)
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
--  reads back; default `"zklock HOST pid N"`), `tls` (`{ ca, cert, key
--  [, key_password] }`) and `sasl` (`{ user, password | password_file [,
--  mechanism, realm, service, server] }`; DIGEST-MD5 by default): see
--  docs/security.md
-- @return a client, or nil, message, code: `"unknown_host"` (a host name
--  does not resolve), `"connection_loss"` (no connection in time),
--  `"no_auth"` (a SASL login refused), `"no_node"` (the chroot does not
--  exist), `"tls"` (a TLS set-up that cannot work, and why)
function M.connect(hosts, opts)
  local c, ct, code = R.open(hosts, opts, "connect")
  if not c then return nil, ct, code end
  return R.finish_connect(c, hosts, ct)
end

-- Wait up to ct seconds for the first connection of client c (opened by
-- R.open with `hosts`); c, or nil, message, code with c closed.
function R.finish_connect(c, hosts, ct)
  local state = await(c, R.session_leaving(c, "connecting"), now() + ct)
  if state == "connected" then return c end
  local msg, code = c:_failure() -- (expired, auth failed, no chroot: C says why)
  -- what the diagnosis found (every server refused; a plaintext client,
  -- servers that speak TLS): said at the timeout (src/core/session/probe.c)
  local hint, hcode = c:_hint()
  c:close()
  if state == "timeout" then
    return nil, ("could not connect to %s within %gs%s"):format(hosts, ct,
      hint and ": " .. hint or ""), hint and hcode or "connection_loss"
  end
  return nil, msg or "session " .. state, code or "closed"
end

-- A client that is not closed, for the methods that keep state in C
-- (listeners, counters): on a closed one they raise, as the C methods do
-- (docs/api.md, "A closed client").
local function check_open(self, fname)
  check_client(self, fname)
  if closed(self) then argerror(1, fname, "client is closed") end
end


-- ---------------------------------------------------------------------------
-- plain data: what a lock usually guards (a counter, a config)

--- A session with a ZooKeeper ensemble, as `zklock.connect` returns it.
-- Its methods make the recipes (`zk:mutex(path)`, ...) and read and write
-- plain nodes.  After `zk:close()`, what would ask the server returns
-- `nil, "client is closed", "closed"` (docs/api.md, "A closed client").
-- @type Client

--- The connection's state: `"connecting"`, `"connected"`, `"expired"`,
-- `"auth_failed"`, `"no_chroot"` (the chroot does not exist), `"tls_failed"`
-- or `"closed"`.
-- @function state
-- @treturn string the state

--- The session id as a hex string, as `"0x1000001a2b30000"`; nil while
-- there is no session.  Raises once the client is closed.
-- @function session_id
-- @treturn ?string the id

--- The session timeout the server granted, in seconds (0 once closed).
-- @function session_timeout
-- @treturn number seconds

--- Close the session: every ephemeral node of it (its holds, its queued
-- attempts) goes at once.  Idempotent; also what `__gc` and `__close` do.
-- @function close

--- A descriptor for an event loop to watch: the core makes it readable
-- when anything changed for this client, or a waiting coroutine's
-- deadline passed; then call `zk:step()`.  The same one on every call;
-- open until the client is collected.  Do not read it yourself.
-- @function fd
-- @treturn int the descriptor, or nil, message, code (the client's
--  wake-up socket is read already: zklock.ngx's)

--- The data of node `path`.
-- @string path the node
-- @tparam[opt] number timeout seconds (default: the session timeout)
-- @return the data and its version, or nil, message, code (`"no_node"`...)
function client_methods:get(path, timeout)
  check_client(self, "get")
  check_path(path, 1, "get")
  timeout = check_timeout(timeout, 2, "get")
  return call_op(self, timeout or self:session_timeout(), "_get", path)
end

--- Set the data of node `path`, creating it (a persistent node, its
-- missing parents as containers) when missing.
-- @string path the node
-- @string data its new data (at most the client's `max_data` bytes)
-- @tparam[opt] number timeout seconds (default: the session timeout)
-- @return true, or nil, message, code
function client_methods:set(path, data, timeout)
  -- (one set-or-create in C, retried there when another client creates
  -- the node first)
  check_client(self, "set")
  check_path(path, 1, "set")
  check_data(self, data, 2, "set")
  timeout = check_timeout(timeout, 3, "set")
  return succeeded(call_op(self, timeout or self:session_timeout(), "_set",
    path, data, true))
end

-- ---------------------------------------------------------------------------
-- callbacks and revocation

--- Run the callbacks queued for this client now (`on_revoke`, `on_lost`,
-- `on_state`, a latch's `on_change`, a selector's turn); with a timeout,
-- first wait up to that long for one to arrive.
-- @tparam[opt] number timeout seconds
-- @treturn int how many ran
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
    R.wait(self, gen, left)
    n = dispatch(self)
  end
  return n
end

-- event loops (zklock.loop; docs/api.md, "Waiting in an event loop")

--- Wake the coroutines whose wait on this client ended and run the
-- callbacks it owes: what `zk:fd()` becoming readable asks for (`zk:fd()`
-- returns a descriptor the core makes readable when anything changed for
-- this client, or a waiting coroutine's deadline passed).  The adapters
-- zklock.cqueues, zklock.luv and zklock.copas call it for you.
-- @return how many waits it ended
function client_methods:step()
  return require("zklock.loop").step(self)
end

--- Listen to the connection's state, in Curator's model: `fn(new, old)`
-- with "connected" (the first connection), "suspended" (disconnected; the
-- session may live), "reconnected" (the same session again), "lost" (the
-- session expired, or the connection stayed lost for a whole session
-- timeout) and "renewed" (a new session after an expiry).  Runs in Lua,
-- in order, inside zklock waits, `zk:dispatch()` or zklock.ngx's timer,
-- never on a ZooKeeper thread.  Several listeners may listen;
-- `zk:on_state(nil)` removes them all.
-- @tparam ?function fn `fn(new, old)`, or nil
-- @return the client
function client_methods:on_state(fn)
  check_open(self, "on_state")
  if fn ~= nil and type(fn) ~= "function" then
    argerror(1, "on_state", "function or nil expected, got " .. type(fn))
  end
  local list = R.state_listeners[self]
  if fn == nil then
    R.state_listeners[self] = nil
    -- (leader latches and selectors still hear of a renewed session)
    self:_want_state(R.hooks.elections and R.hooks.elections(self) or false)
    return self
  end
  if not list then
    list = {}
    R.state_listeners[self] = list
  end
  list[#list + 1] = fn
  self:_want_state(true)
  return self
end

--- @section end

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

-- ---------------------------------------------------------------------------
-- with_lock

-- The release at the end of with_lock.  When fn raised, its error goes
-- on whatever the release says (a release that raises too is reported
-- to the log); otherwise a hold that ended before it (lost, revoked, past
-- max_hold) makes with_lock answer nil, msg, "lock_lost".
local function finish(lock, ok, ...)
  if not ok then
    local fine, err = pcall(lock.release, lock)
    if not fine then R.log("error", "with_lock: release: " .. tostring(err)) end
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
      R.log("error", "with_lock: release: " .. tostring(err))
    end
    error(released, 0)
  end
  if not released then return nil, msg, code end
  return ...
end

-- fn runs under R.protect: a string error raised in it is raised again
-- with the frames inside fn (gone by then) appended; any other error
-- value, unchanged.
local function run(lock, timeout, opts, fn, ...)
  local update = opts and opts.update
  local held, msg, code = lock:acquire(timeout, opts and
    { max_hold = opts.max_hold, read = update })
  if not held then return nil, msg, code end
  if update then
    -- msg, code: the guarded node's data and version (nil: no node)
    return finish_update(lock, update, protect(fn, msg, ...))
  end
  return finish(lock, protect(fn, ...))
end

-- Can `lock` write with its release (with_lock's update)?  A mutex or a
-- write lock; not what its holders share (a read lock, a semaphore) nor
-- a multilock (whose release is several).
local function writes_with_release(lock)
  if getmetatable(lock) ~= L.Lock then return false end
  local kind = core.unbox(lock).kind
  return kind == "mutex" or kind == "write"
end

-- with_lock's options table
local WITH_LOCK_OPTIONS = R.options({ "timeout", "max_hold", "update" })

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
        argerror(2, "with_lock", "update needs a mutex or a write lock: " ..
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

--- @type Client

--- Counters of this client: `requests` sent, `watch_events` received,
-- `own_events` (those about our own nodes), `renewed` (new sessions
-- opened after an expiry), `lost` (holds lost), `since_contact` (seconds
-- since the server last answered; absent before any answer), and `kinds`: per recipe
-- kind (`"mutex"`, `"semaphore_mutex"`, `"rwlock.read"`, `"rwlock.write"`,
-- `"semaphore"`) the counts `acquires`, `timeouts`, `errors`, `releases`,
-- `losses`, and the `wait` and `hold` times as `{ count, sum, max, p50,
-- p90, p99 }` (seconds; docs/api.md, "Metrics").
-- @treturn table the counters
function client_methods:stats()
  check_open(self, "stats")
  local s = self:_stats()
  s.kinds = metrics.client_report(self)
  return s
end

--- @section end

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
  R.set_logger(fn or R.hooks.default_logger)
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
    ngx.config.ngx_lua_version and type(ngx.timer) == "table" and
    not R.hooks.ngx_loading then
  package.loaded["zklock"] = M -- (zklock.ngx requires us back)
  M.connect = require("zklock.ngx").connect
end

return M
