-- A client's own methods (`zk:get`, `zk:set`, `zk:dispatch`, `zk:step`,
-- `zk:on_state`, `zk:stats`) and, loaded here, every recipe module, each
-- adding its own (`zk:mutex`, `zk:semaphore`, ...): what a client needs
-- whichever module opened it (zklock, zklock.ngx, zklock.loop), so that
-- those modules require this one and not each other.  (The doc comments
-- below are on zklock's page of the reference: config.ld.)

--- @module zklock
local core = require "zklock.core"
local check = require "zklock.rt.check"
local plug = require "zklock.rt.plug"
local events = require "zklock.rt.events"
local wait = require "zklock.rt.wait"
local op = require "zklock.rt.op"
require "zklock.lock"
require "zklock.rwlock"
local metrics = require "zklock.metrics"
require "zklock.semaphore"
require "zklock.multilock"
require "zklock.barrier"
require "zklock.election"
check.internal_file()

local now = core.now
local client_methods = core.client_methods
local type = type
local hooks = plug.hooks
local argerror, check_client = check.argerror, check.check_client
local check_path, check_timeout = check.check_path, check.check_timeout
local check_data = check.check_data
local dispatch = events.dispatch
local closed, call_op, succeeded = op.closed, op.call_op, op.succeeded

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

--- The servers the client uses now, and how many times following the
-- ensemble moved them (connect's `follow_ensemble`; docs/design.md,
-- section 18).  Nothing once the client is closed.
-- @function servers
-- @treturn string `"host:port,..."`, no chroot: the connect string's,
--  or the ensemble's once followed
-- @treturn int the moves

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
-- callbacks, and event loops

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
    wait.wait(self, gen, left)
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
  local step = hooks.step -- (zklock.loop's, once it is loaded)
  if step then return step(self) end
  return events.step(self)
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
  if fn == nil then
    events.clear_state_listeners(self)
    -- (leader latches and selectors still hear of a renewed session)
    self:_want_state(hooks.elections and hooks.elections(self) or false)
    return self
  end
  events.add_state_listener(self, fn)
  self:_want_state(true)
  return self
end

-- ---------------------------------------------------------------------------
-- counters

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

-- (nothing to hand back: loading it is the point.  Not the client methods
-- table either: Lua 5.4 would name a C method in an argument error after
-- the first loaded module holding it, "zklock.client._get")
return true
