--- zklock's internal runtime, shared by the recipe files and zklock.ngx:
-- argument checks, per-coroutine owners, the waits (every wait polls a C
-- object and sleeps until the session reports a change), callbacks, and
-- opening a session.  Not a public interface: it may change at any time.
-- @module zklock.runtime
local core = require "zklock.core"

local R = {}

local now = core.now
local unbox = core.unbox
local type, tostring, error, pcall, select =
  type, tostring, error, pcall, select
local floor, huge = math.floor, math.huge
local co_running = coroutine.running

local MAIN = {} -- owner key of the main coroutine (LuaJIT's running() is nil)
local WEAK_KEYS = { __mode = "k" }
local WEAK_VALUES = { __mode = "v" }
R.MAIN, R.WEAK_KEYS, R.WEAK_VALUES = MAIN, WEAK_KEYS, WEAK_VALUES

-- While a callback runs on behalf of a lock's owner, it acts as that owner
-- (so `lock:release()` inside `on_revoke` releases the right hold).
-- Keyed by the coroutine running the callback: a callback that waits (and
-- so yields to a scheduler) must not lend its owner to other coroutines.
local acting = setmetatable({}, WEAK_KEYS)

-- Plug points: what other zklock modules hand the runtime.  They
-- register (R.register), and write nothing else into it.
--   owner(co)        zklock.ngx: the owner key of coroutine co (nginx
--                    reuses a request's Lua thread for later requests, so
--                    there the key is per request)
--   held(lock, owner) zklock.ngx: after an owner takes a hold
--   dispatcher       zklock.ngx: callbacks run in its timer, not in waits
--   default_logger   zklock.ngx: the logger when the application sets none
--   ngx_loading      zklock.ngx is loading (zklock must not load it back)
--   events(client, kind, arg, attempt)  zklock.election: its part of
--                    dispatch -> how many callbacks ran; attempt: the
--                    serial of the lock attempt the event is about
--   elections(client) zklock.election: whether the client has latches
--   attempt_lost(client, attempt)  zklock.cohort: a lock attempt's hold
--                    ended without a release (its "lost" event)
local PLUGS = { owner = true, held = true, dispatcher = true,
  default_logger = true, ngx_loading = true, events = true,
  elections = true, attempt_lost = true }
local hooks = {}
R.hooks = hooks -- (read them here; set them with R.register)

--- Register `value` at plug point `name` (nil takes it away).
function R.register(name, value)
  if not PLUGS[name] then
    error("zklock.runtime: no plug point " .. tostring(name), 2)
  end
  hooks[name] = value
end

-- The owner key of the calling coroutine.
local function me()
  local co = co_running() or MAIN
  local a = acting[co]
  if a then return a end
  local owner = hooks.owner
  if owner then return owner(co) end
  return co
end
R.me = me

-- ---------------------------------------------------------------------------
-- argument checks: the standard "bad argument #n to 'f' (...)" message

-- The sources of zklock's own Lua files: their frames are skipped when an
-- error is pinned on the caller.
local INTERNAL = { [debug.getinfo(1, "S").source] = true }

-- Count the calling file as zklock's own (each zklock Lua file calls it as
-- it loads).
function R.internal_file()
  INTERNAL[debug.getinfo(2, "S").source] = true
end

-- The error points at the first caller outside zklock's Lua files.
local function argerror(n, fname, msg)
  local level = 2
  while true do
    local info = debug.getinfo(level, "S")
    if not info or not INTERNAL[info.source] then break end
    level = level + 1
  end
  error(("bad argument #%d to '%s' (%s)"):format(n, fname, msg), level)
end
R.argerror = argerror

-- The longest path (docs/limits.md: core.PATH_MAX, 4096), and the longest
-- a recipe directory may have: its longest node name,
-- "/leases/_c_<uuid>-lease-<10 digits>" (64 bytes), must fit within the
-- first.
R.RECIPE_PATH_MAX = core.PATH_MAX - 64

local path_problem, hosts_problem = core.path_problem, core.hosts_problem

--- `path`, or a standard argument error; `max` (default 4096): its
-- longest length in bytes (R.RECIPE_PATH_MAX for a recipe's directory).
-- Why a path is refused is said in C, once (src/core/base/paths.c).
function R.check_path(path, n, fname, max)
  if type(path) ~= "string" then
    argerror(n, fname, "string expected, got " .. type(path))
  end
  local why = path_problem(path, max)
  if why then argerror(n, fname, why) end
  return path
end

--- `hosts`, a connect string ("host:port,...[/chroot]"), or a standard
-- argument error (the reasons: src/core/base/paths.c).
function R.check_hosts(hosts, n, fname)
  if type(hosts) ~= "string" then
    argerror(n, fname, "connect string expected, got " .. type(hosts))
  end
  local why = hosts_problem(hosts)
  if why then argerror(n, fname, why) end
  return hosts
end

-- ---------------------------------------------------------------------------
-- options tables: every key must be known (docs/api.md, "Conventions"),
-- as kazoo's keyword arguments are (a TypeError for a misspelt one)

--- The set of option names in the array `names`, with those of the sets
-- `...` (a function's own table of allowed keys, next to it).
function R.options(names, ...)
  local set = {}
  for _, base in ipairs({ ... }) do
    for k in pairs(base) do set[k] = true end
  end
  for _, k in ipairs(names) do set[k] = true end
  return set
end

-- The edit distance of a and b (optimal string alignment: a swap of two
-- neighbours counts one).
local function distance(a, b)
  local la, lb = #a, #b
  local d = {}
  for i = 0, la do d[i] = { [0] = i } end
  for j = 1, lb do d[0][j] = j end
  for i = 1, la do
    local ai = a:byte(i)
    for j = 1, lb do
      local bj = b:byte(j)
      local v = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1,
        d[i - 1][j - 1] + (ai == bj and 0 or 1))
      if i > 1 and j > 1 and ai == b:byte(j - 1) and a:byte(i - 1) == bj then
        v = math.min(v, d[i - 2][j - 2] + 1)
      end
      d[i][j] = v
    end
  end
  return d[la][lb]
end

-- The error for the unknown key k of an options table: with the closest
-- allowed name when it is at most two edits away (and not all of it).
local function unknown_option(k, allowed, n, fname, prefix)
  local name = type(k) == "string" and ("'" .. prefix .. k .. "'")
    or "[" .. tostring(k) .. "]"
  local best, bd
  if type(k) == "string" then
    for a in pairs(allowed) do
      local d = distance(k, a)
      if d <= 2 and d < #a and (not bd or d < bd or d == bd and a < best)
          then
        best, bd = a, d
      end
    end
  end
  argerror(n, fname, "unknown option " .. name ..
    (best and (" (did you mean '" .. prefix .. best .. "'?)") or ""))
end

--- `opts` (argument n of fname; a table, checked by the caller), or the
-- standard error for its first key not in the set `allowed`:
-- `unknown option 'sesion_timeout' (did you mean 'session_timeout'?)`.
-- `prefix` ("tls."): a nested table's, named as such.
function R.check_options(opts, allowed, n, fname, prefix)
  local bad
  for k in pairs(opts) do
    if not allowed[k] and (bad == nil or tostring(k) < tostring(bad)) then
      bad = k -- (the first by name: the same error every run)
    end
  end
  if bad ~= nil then unknown_option(bad, allowed, n, fname, prefix or "") end
  return opts
end

function R.check_count(v, n, fname, what)
  if type(v) ~= "number" or v ~= floor(v) or v < 1 or v > 2 ^ 31 - 1 then
    argerror(n, fname, what .. " must be a positive integer, got " ..
      tostring(v))
  end
  return v
end

function R.check_timeout(t, n, fname)
  if t == nil then return nil end
  if type(t) ~= "number" then
    argerror(n, fname, "number expected, got " .. type(t))
  end
  if t ~= t or t < 0 then argerror(n, fname, "timeout must be >= 0") end
  if t == huge then return nil end
  return t
end

function R.check_client(self, fname)
  if not core.is_client(self) then
    argerror(1, fname, "zklock client expected")
  end
end

-- The fields of a boxed object of class `mt`, or the standard error.
function R.checked(self, mt, fname, what)
  local f = unbox(self)
  if not f or getmetatable(self) ~= mt then
    argerror(1, fname, "zklock " .. what .. " expected, got " .. type(self))
  end
  return f
end

-- ---------------------------------------------------------------------------
-- waiting

local function block(client, gen, timeout)
  return client:_wait(gen, timeout)
end
local waiter = block

-- Install `fn` (checked by zklock.set_waiter) as how zklock sleeps while it
-- waits; nil restores the blocking wait.
function R.set_waiter(fn)
  waiter = fn or block
end

-- The waiter installed now (zklock.loop chains to it).
function R.current_waiter()
  return waiter
end

-- Wake-up entries, zklock.ngx's and zklock.loop's: how a waiter learns
-- that its own object moved (the C core queues the entry's id).  A table
-- w keeps byid (id -> entry, weak values), entry_of (obj -> entry, weak
-- keys) and next_id; an entry is { id, ref = { obj } (weak) } and what its
-- owner keeps in it.  Nothing in it refers to the object strongly
-- (LuaJIT's weak keys are no ephemerons).
local MAX_WAKE_ID = 2 ^ 31 - 1 -- (the C side keeps an unsigned int)

-- Give entry e a fresh id in w and register it; returns e.
function R.new_entry(w, e)
  local id = w.next_id
  while w.byid[id] do id = id % MAX_WAKE_ID + 1 end -- (after a wrap-around)
  w.next_id = id % MAX_WAKE_ID + 1
  e.id, e.ref = id, setmetatable({}, WEAK_VALUES)
  w.byid[id] = e
  return e
end

-- The entry of obj in w, made with make(w) on obj's first wait; nil when
-- obj moved since `gen` (the caller looks again instead of waiting).
function R.entry_for(w, obj, gen, make)
  local e = w.entry_of[obj]
  if e then return e end
  e = make(w)
  e.ref[1] = obj
  w.entry_of[obj] = e
  -- from now on a change of obj queues e.id; anything before it shows in
  -- the change counter
  if obj:_wake(e.id) ~= gen then return nil end
  return e
end

-- Objects waited on -> what abandons that wait (weak keys): zklock.ngx
-- calls it for a request nginx finalized while it waited on the object,
-- instead of releasing or cancelling the object itself (a lock cohort's
-- waiter: its node is the cohort's, lock/cohort.lua).
R.abandon = setmetatable({}, WEAK_KEYS)

-- Sleep as the current waiter does: (client, gen, timeout, obj).
function R.wait(...)
  return waiter(...)
end

-- ---------------------------------------------------------------------------
-- callbacks: queued in C on ZooKeeper's threads, run here, in Lua

-- attempt serial -> { lock =, owner = } for holds with on_revoke or
-- on_lost callbacks, per client: an event names the attempt it is about
local with_callbacks = setmetatable({}, WEAK_KEYS)
R.with_callbacks = with_callbacks

-- ---------------------------------------------------------------------------
-- logging (docs/design.md section 13.1): zklock's own messages and, once a
-- logger is set, the C client's log, both to logger(level, message)

local logger -- nil: stderr (and the C client writes its own lines there)

local function to_stderr(level, msg)
  io.stderr:write(("zklock: %s: %s\n"):format(level, msg))
end

-- Send one message to the logger; a failing logger falls back to stderr.
local function log(level, msg)
  if logger then
    local ok, err = pcall(logger, level, msg)
    if ok then return end
    to_stderr("error", "logger failed: " .. tostring(err))
  end
  to_stderr(level, msg)
end
R.log = log

-- Pass the C client's queued lines to `send` (default: the logger; called
-- on every dispatch), with a word on lines a full queue dropped.
local log_pop = core.log_pop
local function drain_log(send)
  send = send or (logger and log)
  if not send then return end
  while true do
    local line, level, dropped = log_pop()
    if dropped > 0 then
      send("warn", ("%d lines of the ZooKeeper client's log dropped " ..
        "(queue full)"):format(dropped))
    end
    if not line then return end
    send(level, line)
  end
end
R.drain_log = drain_log

-- The logger in use (nil: stderr).
function R.current_logger() return logger end

-- Set (fn) or clear (nil) the logger: fn(level, message).
function R.set_logger(fn)
  logger = fn
  core.log_capture(fn ~= nil)
  if not fn then drain_log(to_stderr) end -- (what was queued goes out)
end

local function report(what, err)
  log("error", ("%s callback failed: %s"):format(what, tostring(err)))
end

-- client -> { fn, ... }: connection-state listeners (zk:on_state); and
-- client -> the last state told to them
local state_listeners = setmetatable({}, WEAK_KEYS)
local last_state = setmetatable({}, WEAK_KEYS)
R.state_listeners = state_listeners

-- Tell the listeners of client: fn(new, old), in order, each under pcall.
local function notify_state(client, new)
  local old = last_state[client]
  last_state[client] = new
  local n = 0
  for _, fn in ipairs(state_listeners[client] or {}) do
    local ok, err = xpcall(function() return fn(new, old) end,
      debug.traceback)
    n = n + 1
    if not ok then report("on_state", err) end
  end
  return n
end

-- client -> the events of the dispatch running now, { i = next, n = count }
-- (a callback that waits dispatches again: it carries on down the same
-- queue, so events run in the order they came, newer ones last)
local queues = setmetatable({}, WEAK_KEYS)

-- why the owner is lent: co -> { "revoke" | "lost" (a callback, with the
-- serial of the attempt it is about) | "ended" }
local acting_why = setmetatable({}, WEAK_KEYS)

-- Run fn(...) acting as `owner`, for `why`; returns ok, err (xpcall's).
local unpack = table.unpack or unpack
local function act(owner, why, fn, ...)
  local co = co_running() or MAIN
  local saved, saved_why = acting[co], acting_why[co]
  acting[co], acting_why[co] = owner, why
  local args, n = { ... }, select("#", ...)
  local ok, err = xpcall(function() return fn(unpack(args, 1, n)) end,
    debug.traceback)
  acting[co], acting_why[co] = saved, saved_why
  return ok, err
end

-- Why the calling code acts for an owner not its own: "revoke" or "lost"
-- inside those callbacks (and the serial of the attempt the event is
-- about), "ended" for an owner that is gone; nil: itself.
function R.acting_why()
  local w = acting_why[co_running() or MAIN]
  if w then return w[1], w[2] end
end

local function run_event(client, reg, ev)
  local n = 0
  if ev[1] == "state" then n = n + notify_state(client, ev[2]) end
  if ev[1] == "lost" and hooks.attempt_lost then
    hooks.attempt_lost(client, ev[3]) -- (a lock cohort's node: lock/cohort.lua)
  end
  if hooks.events then n = n + hooks.events(client, ev[1], ev[2], ev[3]) end
  local r = reg and ev[3] and reg[ev[3]] -- (by the attempt's serial)
  local f = r and unbox(r.lock)
  local fn = f and (ev[1] == "revoke" and f.revoke_fn
    or ev[1] == "lost" and f.lost_fn)
  if fn and r.owner ~= nil then
    local ok, err = act(r.owner, { ev[1], ev[3] }, fn, r.lock)
    n = n + 1
    if not ok then report("on_" .. ev[1], err) end
  end
  return n
end

-- Run the callbacks `client` has queued (or those of `evs`, taken from it
-- already); returns how many ran.  Re-entered (a callback waits, and the
-- wait dispatches), it goes on with the outer call's queue, in order.
local function dispatch(client, evs)
  if logger then drain_log() end
  evs = evs or client:_events()
  local q = queues[client]
  if not q then
    if not evs then return 0 end
    q = { i = 1, n = 0 }
    queues[client] = q
  end
  for _, ev in ipairs(evs or {}) do
    q.n = q.n + 1
    q[q.n] = ev
  end
  local n = 0
  while q.i <= q.n do
    local ev = q[q.i]
    q[q.i] = nil
    q.i = q.i + 1
    n = n + run_event(client, with_callbacks[client], ev)
  end
  q.i, q.n = 1, 0 -- (drained: whoever ran the last event)
  return n
end
R.dispatch = dispatch

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
R.await = await

-- ---------------------------------------------------------------------------
-- errors of a user's function, re-raised after a cleanup (with_lock)

-- An xpcall message handler that keeps where an error was raised: a
-- string comes back with the traceback of the frames between the error
-- and the xpcall appended, the frames that are gone once it is raised
-- again after the cleanup, so that an outer xpcall(debug.traceback) or
-- nginx's error log still shows them; any other value (a table) comes
-- back unchanged, the very same value.  docs/api.md, with_lock.
local xpcall, getinfo = xpcall, debug.getinfo
local MAX_FRAMES = 40
local function keep_traceback(e)
  if type(e) ~= "string" then return e end
  -- the frames from the error down to the xpcall (below it: the caller's,
  -- which the outer traceback shows), as debug.traceback writes them
  local out, level = { e, "\nstack traceback (where it was raised):" }, 2
  while true do
    local info = getinfo(level, "Slnf")
    if not info or info.func == xpcall then break end
    if level > MAX_FRAMES then out[#out + 1] = "\n\t..."; break end
    local where = info.what == "C" and "[C]"
      or ("%s:%d"):format(info.short_src, info.currentline)
    local what = info.what == "main" and "main chunk"
      or info.name and ("function '%s'"):format(info.name)
      or info.what == "C" and "?"
      or ("function <%s:%d>"):format(info.short_src, info.linedefined)
    out[#out + 1] = ("\n\t%s: in %s"):format(where, what)
    level = level + 1
  end
  return table.concat(out)
end
R.keep_traceback = keep_traceback

--- xpcall(fn, R.keep_traceback, ...): ok, and fn's results or its error.
if _VERSION == "Lua 5.1" and not jit then
  -- (PUC Lua 5.1's xpcall passes no arguments: a closure does)
  R.protect = function(fn, ...)
    local args, n = { ... }, select("#", ...)
    return xpcall(function() return fn(unpack(args, 1, n)) end,
      keep_traceback)
  end
else
  R.protect = function(fn, ...)
    return xpcall(fn, keep_traceback, ...)
  end
end

-- fn(...), with cleanup() run if fn does not return: an error raised out
-- of it (a waiter's, say), or, on Lua 5.4, coroutine.close() of the
-- coroutine waiting in it (a to-be-closed guard; `<close>` is loaded from
-- a string so that LuaJIT can parse this file).  cleanup must not wait: a
-- closing coroutine cannot yield.  docs/recipes.md, "abandoned waits".
if _VERSION == "Lua 5.4" then
  R.guarded = assert(load([[
    local pcall, setmetatable = ...
    local guard_mt = { __close = function(g)
      if g.armed then pcall(g.cleanup) end
    end }
    local function disarm(g, ...)
      g.armed = false
      return ...
    end
    return function(cleanup, fn, ...)
      local g <close> = setmetatable({ cleanup = cleanup, armed = true },
        guard_mt)
      return disarm(g, fn(...))
    end]], "=zklock.guard"))(pcall, setmetatable)
else
  local function pass(cleanup, ok, ...)
    if not ok then
      pcall(cleanup)
      error((...), 0)
    end
    return ...
  end
  R.guarded = function(cleanup, fn, ...)
    return pass(cleanup, pcall(fn, ...))
  end
end

-- await for a lock attempt, with the attempt given up (its node deleted at
-- once) whenever the wait does not return.
function R.guarded_await(client, att, deadline, slack)
  return R.guarded(function() att:release() end, await, client, att,
    deadline, slack)
end

-- Release every level of `co`'s hold of `lock` on its behalf (zklock.ngx:
-- the request that took it has ended).  Returns whether it held it.
function R.release_owner(lock, co)
  local f = unbox(lock)
  if not (f and f.owners and f.owners[co]) then return false end
  local ok, err = act(co, { "ended" }, function()
    while f.owners[co] do lock:release() end
  end)
  if not ok then report("release on behalf of an ended coroutine", err) end
  return true
end

-- Does `co` hold `lock`?
function R.holds(lock, co)
  local f = unbox(lock)
  return f ~= nil and f.owners ~= nil and f.owners[co] ~= nil
end

-- The client of a lock object, or nil.
function R.client_of(lock)
  local f = unbox(lock)
  return f and f.client
end

-- ---------------------------------------------------------------------------
-- client

local ACLS = { open = 0, creator = 1, read = 2 }
local DEFAULT_MAX_DATA = 1024 * 1024 - 8192

-- `data` (argument n of fname) fits the client's max_data, or the error.
function R.check_data(client, data, n, fname)
  if type(data) ~= "string" then
    argerror(n, fname, "string expected, got " .. type(data))
  end
  local limit = client:_limits() -- (none once closed: the op says so)
  if limit and #data > limit then
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
    argerror(2, fname, "acl '" .. acl .. "' needs auth or sasl: it " ..
      "names the identities the session authenticates as")
  end
  return preset
end

-- opts.tls and opts.sasl (docs/security.md) as one flat table for C, or
-- nil.  A password comes from `password` or the first line of
-- `password_file`; a file that cannot be read is an argument error.
local TLS_KEYS = { ca = true, cert = true, key = true, key_password = true }
local SASL_KEYS = { mechanism = true, user = true, password = true,
  password_file = true, realm = true, service = true, server = true }
local function check_secure(opts, fname)
  local tls, sasl = opts.tls, opts.sasl
  if tls == nil and sasl == nil then return nil end
  local out = {}
  for _, part in ipairs({ { "tls", tls, TLS_KEYS },
                          { "sasl", sasl, SASL_KEYS } }) do
    local name, t, keys = part[1], part[2], part[3]
    if t ~= nil and type(t) ~= "table" then
      argerror(2, fname, name .. " must be a table")
    end
    R.check_options(t or {}, keys, 2, fname, name .. ".")
    for k, v in pairs(t or {}) do
      if type(v) ~= "string" or v == "" or v:find("\0", 1, true) then
        argerror(2, fname, ("%s.%s must be a non-empty string"):format(name,
          k))
      end
      out[k] = v
    end
  end
  if tls and not (tls.ca and tls.cert and tls.key) then
    argerror(2, fname, "tls needs ca, cert and key (PEM files; the C " ..
      "client always presents a client certificate)")
  end
  if sasl then
    out.mechanism = sasl.mechanism or "DIGEST-MD5"
    if sasl.password and sasl.password_file then
      argerror(2, fname, "sasl: password or password_file, not both")
    end
    if sasl.password_file then
      local f, why = io.open(sasl.password_file, "rb")
      if not f then argerror(2, fname, "sasl.password_file: " .. why) end
      local line = f:read("*l") -- (nil for a directory)
      f:close()
      out.password = line and line:gsub("\r$", "") or ""
      if out.password == "" then
        argerror(2, fname, "sasl.password_file " .. sasl.password_file ..
          ": no password on its first line")
      end
      out.password_file = nil
    end
    if out.mechanism == "DIGEST-MD5" and not (out.user and out.password) then
      argerror(2, fname, "sasl DIGEST-MD5 needs user and password " ..
        "(or password_file)")
    end
  end
  return out
end

-- What `await` polls while the session is in state `passing` (connecting
-- at first, expired while a new session opens): "pending" until it leaves.
function R.session_leaving(client, passing)
  return { poll = function()
    local s, gen = client:_poll()
    return s == passing and "pending" or s, gen
  end }
end
local renews = setmetatable({}, WEAK_KEYS) -- clients that renew sessions
R.renews = renews
-- client -> the participant id written into its lock and lease nodes
R.ids = setmetatable({}, WEAK_KEYS)

-- zklock.connect's options (zklock.ngx.connect adds its own)
R.CONNECT_OPTIONS = R.options({ "session_timeout", "connect_timeout", "acl",
  "max_data", "auth", "renew_session", "id", "tls", "sasl", "cohort",
  "pass_limit" })

-- client -> { on = whether its locks queue in cohorts, pass_limit }: the
-- default of every lock it makes (docs/api.md, "Cohorts")
R.cohorts = setmetatable({}, WEAK_KEYS)
R.COHORT_DEFAULT, R.PASS_LIMIT_DEFAULT = true, 8

-- A cohort option (`cohort`, `pass_limit`) of table opts, argument n of
-- fname: checked; returns them (nil when absent).
function R.check_cohort(opts, n, fname)
  local on, limit = opts.cohort, opts.pass_limit
  if on ~= nil and type(on) ~= "boolean" then
    argerror(n, fname, "cohort must be a boolean")
  end
  if limit ~= nil and (type(limit) ~= "number" or limit ~= floor(limit) or
      limit < 0 or limit > 2 ^ 31 - 1) then
    argerror(n, fname, "pass_limit must be an integer >= 0")
  end
  return on, limit
end

-- Checks the arguments and opens the session without waiting for it.
-- `allowed`: the option names (default R.CONNECT_OPTIONS).
-- @return client, connect_timeout | nil, msg, code
function R.open(hosts, opts, fname, allowed)
  R.check_hosts(hosts, 1, fname)
  if opts ~= nil and type(opts) ~= "table" then
    argerror(2, fname, "table expected, got " .. type(opts))
  end
  opts = R.check_options(opts or {}, allowed or R.CONNECT_OPTIONS, 2, fname)
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
  local acl = check_acl(opts.acl, auth or opts.sasl, fname)
  local md = opts.max_data
  if md ~= nil and (type(md) ~= "number" or md ~= floor(md) or md < 0 or
      md > 2 ^ 31 - 1) then
    argerror(2, fname, "max_data must be an integer from 0 to 2^31-1")
  end
  local renew = opts.renew_session
  if renew ~= nil and type(renew) ~= "boolean" then
    argerror(2, fname, "renew_session must be a boolean")
  end
  local id = opts.id
  if id ~= nil and (type(id) ~= "string" or #id > (md or DEFAULT_MAX_DATA))
      then
    argerror(2, fname, "id must be a string no longer than max_data")
  end
  local secure = check_secure(opts, fname)
  local cohort, pass_limit = R.check_cohort(opts, 2, fname)
  local c, msg, code = core.connect(hosts, floor(st * 1000), acl,
    renew ~= false, md, secure)
  if not c then return nil, msg, code end
  R.ids[c] = id
  R.cohorts[c] = { on = cohort, pass_limit = pass_limit }
  if renew ~= false then renews[c] = true end
  if auth then
    local ok, amsg, acode = c:_add_auth(auth[1], auth[2])
    if not ok then c:close(); return nil, amsg, acode end
  end
  return c, ct
end

-- What a failed acquire of `path` answers: its wait timed out
-- (`timeout` seconds), or the hold C ended before the acquire returned
-- (past max_hold, or the server not heard from for a session timeout:
-- docs/design.md, section 9).  msg, code.
function R.not_acquired(path, timeout)
  return ("timeout: %s not acquired within %gs"):format(path, timeout),
    "timeout"
end
function R.ended_at_once(path)
  return ("lock lost: the hold of %s ended as it began (past max_hold, " ..
    "or no answer from ZooKeeper for a session timeout)"):format(path),
    "lock_lost"
end

local function closed(client)
  if client:state() == "closed" then
    return true, "client is closed", "closed"
  end
end
R.closed = closed

-- how long a release may wait for the server to confirm the deletion
local function grace(client)
  return now() + client:session_timeout()
end
R.grace = grace

-- ---------------------------------------------------------------------------
-- operations: one request (or a short exchange) carried out in C

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
function R.call_op(client, timeout, method, ...)
  local c, msg, code = closed(client)
  if c then return nil, msg, code end
  local op
  op, msg, code = client[method](client, ...)
  return run_op(client, op, msg, code, timeout)
end

-- true, or nil, msg, code
function R.succeeded(ok, msg, code)
  if ok then return true end
  return nil, msg, code
end

return R
