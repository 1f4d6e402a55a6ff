--- zklock under OpenResty (nginx with the Lua module): waits that yield to
-- nginx's event loop, callbacks from a per-worker timer, and locks that a
-- finished request does not leave behind.
--
--     init_worker_by_lua_block {
--       ZK = assert(require("zklock.ngx").connect("127.0.0.1:2181"))
--     }
--     content_by_lua_block {
--       local m = ZK:mutex("/app/stock")
--       local ok, msg = zklock.with_lock(m, 5, function() ... end)
--     }
--
-- `require "zklock"` inside nginx loads this module by itself (and its
-- connect is this one's); requiring it too is harmless.
-- Loading this module makes every zklock wait in this worker yield: an
-- acquire in a request handler suspends that request only, and the worker
-- goes on serving others.  Each request is its own lock owner, so two
-- requests exclude each other like two processes.  A hold whose request
-- ended without releasing it (it returned, raised, or was ended by
-- `ngx.exit`) is released by the worker's timer, and a waiting request
-- that nginx finalized leaves the queue.  docs/openresty.md tells the
-- rest.
-- @module zklock.ngx

-- (For maintainers.)  How a waiting request is woken: the C core writes a
-- byte to a unix socket whenever something changed and queues the ids of
-- the objects that changed; one timer per client reads that socket with a
-- cosocket and wakes exactly the requests whose lock or operation moved
-- (an ngx.semaphore each).  No polling.
--
-- Owners: nginx reuses a finished request's Lua thread for later
-- requests, so the owner of a hold is a token per request and thread
-- (found through the request's ngx.ctx table, which it follows when the
-- request replaces it), not the thread itself.
--
-- What a request leaves behind when it ends: a timer runs every
-- `sweep_interval`; a hold whose request has ended (it returned, raised,
-- forgot to release, or was ended by ngx.exit: its thread is then idle or
-- serving another request) is released; a waiting request that nginx
-- finalized (client abort with lua_check_client_abort, ngx.exit from
-- another light thread) has its queued node deleted.
local core = require "zklock.core"
local check = require "zklock.rt.check"
local plug = require "zklock.rt.plug"
local log = require "zklock.rt.log"
local events = require "zklock.rt.events"
local wait_rt = require "zklock.rt.wait"
local session = require "zklock.rt.session"
require "zklock.client" -- (every client method, for the clients it opens)
check.internal_file() -- (bad arguments point past this file, at the caller)

if type(ngx) ~= "table" or not ngx.timer then
  error("zklock.ngx: load it inside nginx's Lua module (OpenResty)", 2)
end

local semaphore = require "ngx.semaphore"

local M = {}

local now, costatus = core.now, core.costatus
local ngx_log, ERR, WARN = ngx.log, ngx.ERR, ngx.WARN
local min, huge = math.min, math.huge
local pairs, ipairs, type, pcall = pairs, ipairs, type, pcall
local WEAK_KEYS = { __mode = "k" }
local WEAK_VALUES = { __mode = "v" }

-- phases in which a Lua thread may yield (ngx.semaphore's wait works)
local YIELDABLE = {
  rewrite = true, access = true, content = true, timer = true,
  ssl_cert = true, ssl_session_fetch = true, ssl_client_hello = true,
}

local LONG_WAIT = 60 -- a wait without deadline re-checks this often

-- client -> worker state w:
--   client, sock, live (wake socket read by the loop), done, evs,
--   byid (id -> entry, weak values), entry_of (obj -> entry, weak keys),
--   any (entry for waits without an object), next_id,
--   held (owner -> { lock = true }, weak keys)
-- An entry is { sema, ref = { obj } (weak), waiting, suspect }: nothing in
-- it refers to the object strongly (LuaJIT's weak keys are no ephemerons).
local workers = setmetatable({}, WEAK_KEYS)

local function check_phase(what)
  local phase = ngx.get_phase()
  if not YIELDABLE[phase] then
    error(("zklock: cannot %s in %s_by_lua* (nginx cannot yield there); " ..
      "wait in rewrite/access/content handlers or an ngx.timer"):format(
      what, phase), 3)
  end
end

-- A wake-up entry (rt/wait.lua) with its semaphore.
local function new_entry(w)
  return wait_rt.new_entry(w, { sema = assert(semaphore.new(0)) })
end

-- since: when C saw the change that wakes e (for the latency figures)
local function post(e, since)
  local n = -e.sema:count()
  if n > 0 then
    e.waiting = false
    e.suspect = nil
    e.since = since
    e.sema:post(n)
  end
end

-- Wake-up latency samples: from the change in C to the waiter running.
local SAMPLES = 10000
local function record(w, dt)
  local i = w.n_lat % SAMPLES + 1
  w.lat[i] = dt
  w.n_lat = w.n_lat + 1
end

-- The waiter zklock calls with everything it awaits (see zklock.set_waiter).
local function wait(client, gen, timeout, obj)
  check_phase("wait")
  local w = workers[client]
  if not w then
    -- a client not opened with zklock.ngx.connect: no wake-up socket
    ngx.sleep(min(timeout or 0.005, 0.005))
    return
  end
  local e
  if type(obj) == "userdata" then
    e = wait_rt.entry_for(w, obj, gen, new_entry)
    if not e then return end -- (obj moved meanwhile: look again)
  else
    e = w.any
  end
  -- (a long timeout is waited in LONG_WAIT steps, the caller's loop
  -- re-checking its deadline: ngx.semaphore takes the time as a C int of
  -- milliseconds, which a timeout over ~24.8 days overflows into a
  -- negative number, i.e. no wait at all and a worker spinning)
  local t = timeout or LONG_WAIT
  if t > LONG_WAIT or t ~= t then t = LONG_WAIT end
  if not w.live then t = min(t, 0.005) end -- the loop is not reading yet
  e.waiting = true
  local ok = e.sema:wait(t > 0 and t or 0.001)
  e.waiting = false
  if ok and e.since then
    record(w, now() - e.since)
    e.since = nil
  end
end

-- ---------------------------------------------------------------------------
-- owners: one per request and Lua thread

-- nginx keeps finished requests' Lua threads and resets them for later
-- requests, so a thread is no owner: a hold forgotten by one request would
-- pass to the next on that thread.  Nor is the request pointer, nor the
-- index of its ctx table: the next request on a connection gets the same
-- thread, the same pointer and the same index.  What tells two requests
-- apart is the ctx table itself, so the owners are a token per request
-- and thread, found through the request's ctx table (`by_ctx`, kept here,
-- not in the table); a token refers to its thread and that ctx only
-- weakly.  A request has ended once nginx has let go of its ctx table
-- (lua-resty-core keeps them in the registry's ngx_lua_ctx_tables, at the
-- index the C side holds for the request).  A request that replaces its
-- ctx (`ngx.ctx = {}`) keeps the index, and its owners go with it to the
-- new table (below): the replacement is no end.
local get_request = require("resty.core.base").get_request
local current = setmetatable({}, WEAK_KEYS) -- thread -> its latest token
local ctxs = debug.getregistry().ngx_lua_ctx_tables
-- a request's ctx table -> its tokens (thread -> token; weak keys both)
local by_ctx = setmetatable({}, WEAK_KEYS)

-- The index of the current request's ctx table in ctxs, or nil.
local ctx_slot
do
  local ok, ffi = pcall(require, "ffi")
  local get_ref = ok and ctxs and pcall(function()
    return ffi.C.ngx_http_lua_ffi_get_ctx_ref
  end) and ffi.C.ngx_http_lua_ffi_get_ctx_ref
  if get_ref then
    local in_ssl, ssl_ref = ffi.new("int[1]"), ffi.new("int[1]")
    ctx_slot = function(ctx)
      local r = get_request()
      local ref = r and tonumber(get_ref(r, in_ssl, ssl_ref))
      if ref and ref > 0 and ctxs[ref] == ctx then return ref end
    end
  else
    ctx_slot = function() return nil end
  end
end

local function owner(co)
  if type(co) ~= "thread" or not get_request() then return co end
  local ctx = ngx.ctx
  local toks = by_ctx[ctx]
  if not toks then
    toks = setmetatable({}, WEAK_KEYS)
    by_ctx[ctx] = toks
  end
  local tok = toks[co]
  if not tok then
    tok = { ref = setmetatable({ co, ctx }, WEAK_VALUES), slot = ctx_slot(ctx) }
    toks[co] = tok
    current[co] = tok
  end
  return tok
end

-- `ngx.ctx = t` in a request: its owners move to t (lua-resty-core sets
-- ngx.ctx through the `ngx` table's __newindex, which this wraps; the
-- request keeps its ctx index, the new table taking the old one's place).
do
  local ngx_mt = getmetatable(ngx)
  local set = ngx_mt and ngx_mt.__newindex
  if type(set) == "function" then
    ngx_mt.__newindex = function(t, k, v)
      if k ~= "ctx" or not get_request() then return set(t, k, v) end
      local old = ngx.ctx
      set(t, k, v)
      local new = ngx.ctx
      local toks = new ~= old and by_ctx[old]
      if toks then
        by_ctx[old], by_ctx[new] = nil, toks
        for _, tok in pairs(toks) do
          tok.ref[2], tok.slot = new, ctx_slot(new)
        end
      end
    end
  end
end

-- Has the request (or timer) of owner `tok` ended?
local function ended(tok)
  if type(tok) == "thread" then return costatus(tok) == "dead" end
  if type(tok) ~= "table" or not tok.ref then return false end -- (no
  -- request's: the main thread's, say; it does not end)
  local co, ctx = tok.ref[1], tok.ref[2]
  if tok.slot then return ctx == nil or ctxs[tok.slot] ~= ctx end
  -- (no ctx index: the thread tells, less promptly)
  return not co or costatus(co) == "dead" or current[co] ~= tok
end

-- ---------------------------------------------------------------------------
-- the per-client timer

-- The hold of an ended owner is released in a timer of its own (a release
-- waits for the server); false when no timer could be had (try again).
local function release_later(lock, tok)
  local ok, err = ngx.timer.at(0, function()
    events.release_owner(lock, tok)
  end)
  if not ok then
    ngx_log(ERR, "zklock: cannot release for an ended request: ", err)
  end
  return ok
end

local SWEEP_BATCH = 500 -- wait entries looked at per tick

-- A wait whose request nginx finalized: the semaphore dropped its waiter.
local function sweep_entry(e)
  if e.waiting and e.sema:count() == 0 then
    if e.suspect then -- seen twice, a tick apart: not a wake in flight
      e.waiting, e.suspect = false, nil
      local obj = e.ref[1]
      -- what abandons it (a lock cohort's waiter: lock/cohort.lua), else a
      -- lock attempt lets go of its node; an operation stops
      if obj and not wait_rt.abandon(obj) then
        pcall(obj.release or obj.cancel, obj)
      end
    else
      e.suspect = true
    end
  else
    e.suspect = nil
  end
end

local function sweep(w)
  for tok, locks in pairs(w.held) do
    local gone = ended(tok)
    local any = false
    for lock in pairs(locks) do
      if not events.holds(lock, tok) then
        locks[lock] = nil
      elseif gone and release_later(lock, tok) then
        locks[lock] = nil
      else
        any = true
      end
    end
    if not any then w.held[tok] = nil end
  end
  -- waits whose request nginx finalized: the semaphore dropped them.  A
  -- batch of SWEEP_BATCH entries per tick, from a list of them all made
  -- afresh once it is used up: ten thousand waits would otherwise cost the
  -- worker milliseconds every tick (docs/openresty.md)
  local list = w.sweep_list
  if not list or w.sweep_i > #list then
    list = {}
    for _, e in pairs(w.byid) do list[#list + 1] = e end
    w.sweep_list, w.sweep_i = list, 1
  end
  local first = w.sweep_i
  local last = min(#list, first + SWEEP_BATCH - 1)
  w.sweep_i = last + 1
  for k = first, last do
    local e = list[k]
    list[k] = false -- (the list keeps no entry alive)
    if w.byid[e.id] == e then sweep_entry(e) end -- (not gone since)
  end
end

local function run_callbacks(premature, client, evs)
  if premature then return end
  events.dispatch(client, evs)
end

local READ_TIMEOUT = 3600 -- s; a timed-out read is harmless but logged

-- One pass over what the wake-up socket announced.
local function take(w, everyone)
  local client = w.client
  local ids, all, since = client:_ready()
  if all or everyone then
    for _, e in pairs(w.byid) do post(e, since) end
  else
    for _, id in ipairs(ids) do
      local e = w.byid[id]
      if e then post(e, since) end
    end
  end
  post(w.any, since)
  local evs = w.evs or client:_events()
  w.evs = nil
  if evs and not ngx.timer.at(0, run_callbacks, client, evs) then
    w.evs = evs -- no timer to be had now: next time
  end
end

local function finish(w)
  local client = w.client
  if w.done then return end
  w.done, w.live = true, false
  client:close() -- its nodes go at once; waiters wake and see "closed";
                 -- the byte it writes ends the loop, which closes the socket
  for _, e in pairs(w.byid) do post(e) end
  post(w.any)
  workers[client] = nil
end

-- Reads the wake-up socket for as long as the client lives.
local function loop(premature, w)
  if premature then return finish(w) end
  local client = w.client
  local path, err = client:_wake_listen()
  local sock
  if path then
    sock = ngx.socket.tcp()
    local ok
    ok, err = sock:connect("unix:" .. path)
    if ok then ok, err = client:_wake_accept() end
    if not ok then
      sock:close()
      client:_wake_accept() -- (fails, but takes the listening socket down)
      path = nil
    end
  end
  if not path then
    ngx_log(ERR, "zklock: no wake-up socket (", err, "); waits poll")
    return
  end
  w.live, w.sock = true, sock
  sock:settimeout(READ_TIMEOUT * 1000)
  while not w.done and client:state() ~= "closed" do
    local data, rerr = sock:receiveany(4096)
    if not data and rerr ~= "timeout" then
      if not w.done then ngx_log(WARN, "zklock: wake-up socket: ", rerr) end
      break
    end
    local ok, perr = pcall(take, w)
    if not ok then ngx_log(ERR, "zklock: ", perr) end
  end
  w.live = false
  sock:close()
  if not w.done then pcall(take, w, true) end -- waiters fall back to polling
end

-- Every sweep_interval: ended requests' holds, dropped waiters; and, when
-- the wake-up socket is not read, the wake-ups themselves.
local function tick(premature, w)
  if premature or w.done or ngx.worker.exiting() then return finish(w) end
  if w.client:state() == "closed" then return finish(w) end
  local ok, err = pcall(sweep, w)
  if not ok then ngx_log(ERR, "zklock: ", err) end
  log.drain_log() -- (the C client's log, queued on its threads)
  if not w.live then pcall(take, w, true) end
end

-- metrics across workers: zklock.ngxmetrics
local ngx_metrics = require "zklock.ngxmetrics"
local start_publisher = ngx_metrics.start_publisher

--- The zklock figures in the Prometheus text exposition format, for a
-- `/metrics` location: every worker's added up when nginx declares
-- `lua_shared_dict zklock_metrics 1m` (each worker publishes its figures
-- there every second), else this worker's (docs/openresty.md, "Metrics").
-- @function metrics
-- @treturn string the exposition text
M.metrics = ngx_metrics.metrics

-- connect's options: zklock.connect's and sweep_interval
local CONNECT_OPTIONS = check.options({ "sweep_interval" },
  session.CONNECT_OPTIONS)

--- Open this worker's session, without waiting for it (the first wait
-- does), and start its timer.  Call it in `init_worker_by_lua*`: a session
-- opened in the master (`init_by_lua*`) is not usable in the workers.
-- @string hosts the connect string, as for `zklock.connect`
-- @tparam[opt] table opts as for `zklock.connect` (its `connect_timeout`
--  is not used), and `sweep_interval` (seconds, default 0.1): how often
--  ended requests' holds are looked for
-- @return a client, or nil, message, code
function M.connect(hosts, opts)
  if ngx.get_phase() == "init" then
    error("zklock.ngx.connect: call it in init_worker_by_lua*, not " ..
      "init_by_lua*: a session opened in the master cannot serve the " ..
      "workers", 2)
  end
  local interval = type(opts) == "table" and opts.sweep_interval or 0.1
  if type(interval) ~= "number" or not (interval > 0 and interval < huge) then
    error("bad argument #2 to 'connect' (sweep_interval must be a " ..
      "positive number)", 2)
  end
  local client, msg, code = session.open(hosts, opts, "connect",
    CONNECT_OPTIONS)
  if not client then return nil, msg, code end
  local w = {
    client = client,
    byid = setmetatable({}, WEAK_VALUES),
    entry_of = setmetatable({}, WEAK_KEYS),
    -- (strong: a forgotten hold's owner token lives until the sweep has
    -- given the hold back; a semaphore mutex's object keeps its hold)
    held = {},
    next_id = 1, lat = {}, n_lat = 0,
  }
  w.any = new_entry(w)
  w.byid[w.any.id] = nil -- posted on every wake, kept by w
  workers[client] = w
  local ok, err = ngx.timer.at(0, loop, w)
  if ok then ok, err = ngx.timer.every(interval, tick, w) end
  if ok then start_publisher() end
  if not ok then
    workers[client] = nil
    client:close()
    return nil, "cannot start the zklock timer: " .. tostring(err), "closed"
  end
  return client
end

-- every hold an owner takes is watched for its request's end
plug.register("held", function(lock, tok)
  local client = events.client_of(lock)
  local w = client and workers[client]
  if not w or (type(tok) ~= "thread" and type(tok) ~= "table") then return end
  local locks = w.held[tok]
  if not locks then
    locks = {}
    w.held[tok] = locks
  end
  locks[lock] = true
end)
plug.register("owner", owner)

-- Logging goes to nginx's error log (at the matching level) unless the
-- application set a logger of its own.
local NGX_LEVEL = { error = ngx.ERR, warn = ngx.WARN, info = ngx.INFO,
  debug = ngx.DEBUG }
plug.register("default_logger", function(level, msg)
  ngx_log(NGX_LEVEL[level] or ERR, "zklock: ", msg)
end)
if not log.current_logger() then log.set_logger(plug.hooks.default_logger) end
plug.register("dispatcher", true)
wait_rt.set_waiter(wait)
-- (zklock.connect is M.connect: zklock sets it when it loads in nginx,
-- before or after this module)

--- This worker's wait machinery, for tests and monitoring: `live` (the
-- wake-up socket is read), `entries` (objects with a wake-up entry),
-- `holds` (holds watched for their request's end), `wakeups` (waits ended
-- by a wake-up) and `wake_p50`, `wake_p99`, `wake_max` (seconds from the
-- change in the C core to the waiting request running again, over the
-- last 10000 wake-ups).
-- @param client a client of `zklock.ngx.connect`
-- @tparam[opt] boolean reset start the samples afresh
-- @return the table, or nil for a client not of this worker
function M.stats(client, reset)
  local w = workers[client]
  if not w then return nil end
  local entries, holds = 0, 0
  for _ in pairs(w.byid) do entries = entries + 1 end
  for _, locks in pairs(w.held) do
    for _ in pairs(locks) do holds = holds + 1 end
  end
  local lat = {}
  for i = 1, #w.lat do lat[i] = w.lat[i] end
  table.sort(lat)
  local function pct(p)
    if #lat == 0 then return nil end
    return lat[math.max(1, math.ceil(#lat * p))]
  end
  local s = { live = w.live == true, entries = entries, holds = holds,
    wakeups = w.n_lat, wake_p50 = pct(0.5), wake_p99 = pct(0.99),
    wake_max = lat[#lat] }
  if reset then w.lat, w.n_lat = {}, 0 end
  return s
end

return M
