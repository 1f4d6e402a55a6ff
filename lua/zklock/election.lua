-- Leader election, Curator compatible: the leader latch (LeaderLatch)
-- and the leader selector (LeaderSelector).
--
-- Latch: every participant
-- keeps one protected ephemeral sequential node `<path>/_c_<uuid>-latch-<seq>`
-- whose data is its participant id; the lowest node leads, and each
-- participant watches only its predecessor.  A latch is a lock attempt of
-- the latch kind carried out in C (the mutex's machine: pipelined create
-- and listing, lost-create recovery, uint32 ordering, the self watch), that
-- never gives up by itself: after a session loss or a foreign deletion of
-- its node it joins again.
--
-- Selector: a mutex on `path` (Curator InterProcessMutex nodes, data = the
-- participant id); when we hold it, `fn(selector)` runs, where callbacks
-- run (under zklock.ngx, in a timer of its own), and leadership lasts until
-- fn returns.  Loading this module adds `leader_latch` and
-- `leader_selector` to the client methods.  docs/design.md, section 12.
-- (The doc comments below are on zklock's page of the reference:
-- config.ld.)

--- @module zklock
local core = require "zklock.core"
local check = require "zklock.rt.check"
local plug = require "zklock.rt.plug"
local log = require "zklock.rt.log"
local wait = require "zklock.rt.wait"
local op = require "zklock.rt.op"
local session = require "zklock.rt.session"
local L = require "zklock.lock"
local token = require "zklock.token"
check.internal_file()

local box, unbox = core.box, core.unbox
local client_methods = core.client_methods
local setmetatable, type = setmetatable, type
local now = core.now
local WEAK_KEYS = { __mode = "k" }
local WEAK_VALUES = { __mode = "v" }
local argerror, check_path = check.argerror, check.check_path
local check_timeout, closed = check.check_timeout, op.closed
local await = wait.await

local Latch = { __name = "zklock.leader_latch" }
Latch.__index = Latch

-- client -> { [attempt serial] = latch fields }: the attempts whose events
-- still mean something to a latch or selector (its current attempt, and
-- the one a latch last told on_change(true) of, until it tells false);
-- and client -> { [latch fields] = true } (every latch started, not closed)
local by_attempt = setmetatable({}, WEAK_KEYS)
local started = setmetatable({}, WEAK_KEYS)

local function fields(self, fname)
  return check.checked(self, Latch, fname, "leader latch")
end

--- @type Client

--- A leader latch on `path`, on the nodes of Curator's `LeaderLatch`:
-- each participant keeps `<path>/_c_<uuid>-latch-<seq>`; the lowest node
-- leads.
-- @string path the election's directory
-- @tparam[opt] string id the participant id written into our node
--  (default: the client's, see `zklock.connect`)
-- @return a latch (see LeaderLatch)
function client_methods:leader_latch(path, id)
  if not core.is_client(self) then
    argerror(1, "leader_latch", "zklock client expected")
  end
  check_path(path, 1, "leader_latch", check.RECIPE_PATH_MAX)
  if id ~= nil then check.check_data(self, id, 2, "leader_latch") end
  return box(Latch, { client = self, path = path,
    id = id or L.owner_data(self), fns = {} })
end

-- The attempt serial -> fields registry of client.
local function attempts(client)
  local reg = by_attempt[client]
  if not reg then
    reg = setmetatable({}, WEAK_VALUES)
    by_attempt[client] = reg
  end
  return reg
end

-- Forget attempt `serial` of f unless it is still f's current attempt or
-- the one told as leading.
local function forget(f, serial)
  if serial and serial ~= f.serial and serial ~= f.told then
    attempts(f.client)[serial] = nil
  end
end

-- f's attempt is now att (nil: none): events of the one before it are
-- stale from now on (but for a "lost" of the attempt told as leading).
local function set_attempt(f, att)
  local old = f.serial
  f.att, f.serial = att, att and att:serial()
  if f.serial then attempts(f.client)[f.serial] = f end
  forget(f, old)
end

-- Tell the on_change listeners: leading (true) or not (false), once per
-- change.  serial: the attempt that leads (for true).
local function tell(f, leading, serial)
  local old = f.told
  f.told = leading and serial or nil
  forget(f, old)
  if f.leading == leading then return 0 end
  f.leading = leading
  local n = 0
  for _, fn in ipairs(f.fns) do
    local ok, err = xpcall(function() return fn(leading) end, debug.traceback)
    n = n + 1
    if not ok then
      log.log("error", "on_change callback failed: " .. tostring(err))
    end
  end
  return n
end

-- Join the queue with a fresh node: a new attempt, whose events alone
-- count from now on.  Returns true, or nil, msg, code when the session
-- cannot take it now (a later renewal or await joins again).
local function join(f)
  local client = f.client
  if f.att then f.att:release() end
  local att = client:_lock(f.path, f.selector and "mutex" or "latch", 1, f.id)
  att:notify_held() -- (a latch's on_change(true), a selector's turn)
  set_attempt(f, att)
  local ok, msg, code = att:start()
  if not ok then set_attempt(f, nil); return nil, msg, code end
  return true
end

-- Is the attempt over (lost, failed, given up)?  Then it must join again.
local function ended(f)
  if not f.att then return true end
  local st = f.att:poll()
  return st == "failed" or st == "done"
end

-- start() of a latch or a selector (what: its name in the error).
local function begin(self, f, what)
  if f.started then argerror(1, "start", what .. " already started") end
  local c, msg, code = closed(f.client)
  if c then return nil, msg, code end
  f.started = true
  local set = started[f.client]
  if not set then
    set = setmetatable({}, WEAK_KEYS)
    started[f.client] = set
  end
  set[f] = true
  f.client:_want_state(true) -- (a renewed session joins again)
  local ok
  ok, msg, code = join(f)
  if not ok then return nil, msg, code end
  return self
end

-- close() of a latch or a selector: no more joining; our node goes now
-- unless a selector's turn still runs (it goes when fn returns).
local function leave(f)
  if f.closed then return end
  f.closed = true
  if started[f.client] then started[f.client][f] = nil end
  if f.att and not f.running then
    local att = f.att
    set_attempt(f, nil) -- (its late events are stale now)
    att:release()
    if not closed(f.client) then await(f.client, att, op.grace(f.client)) end
  end
  local told = f.told
  f.told = nil
  forget(f, told)
end

-- Does client have latches or selectors that must hear of a renewed
-- session (zk:on_state(nil) keeps the notices on then)?
plug.register("elections", function(client)
  return next(started[client] or {}) ~= nil
end)

-- The latch part of dispatch: "held" and "lost" of our attempts (attempt:
-- the serial the event carries); a renewed session joins every latch
-- whose attempt ended.  An event of an attempt the latch has left since
-- (it joined again, or closed) is stale and changes nothing: its "held"
-- must not call on_change(true) for a node already given back, nor its
-- "lost" end the hold of a newer attempt (under zklock.ngx, callbacks run
-- later, in a timer, after a wait may have joined again).  The one thing
-- such a "lost" still says: leadership told with on_change(true) ended.
plug.register("events", function(client, kind, arg, attempt)
  if kind == "state" then
    if arg ~= "renewed" and arg ~= "reconnected" then return 0 end
    for f in pairs(started[client] or {}) do
      local wants = not f.selector or f.requeue or f.turns == 0
      if not f.closed and not f.running and wants and ended(f) then
        join(f)
      end
    end
    return 0
  end
  if kind ~= "held" and kind ~= "lost" then return 0 end
  local reg = attempt and by_attempt[client]
  local f = reg and reg[attempt]
  if not f or f.closed then return 0 end
  if attempt ~= f.serial then -- an attempt left behind
    if kind == "lost" and attempt == f.told then return tell(f, false) end
    return 0
  end
  if f.selector then return f.selector(kind, arg) end
  if kind == "held" then return tell(f, true, attempt) end
  local n = tell(f, false)
  join(f) -- (a session gone: joins once renewed)
  return n
end)

--- A leader latch, as `zk:leader_latch(path)` returns it.  A lost session
-- or a foreign deletion of our node ends leadership at once; the latch
-- then joins again by itself.  `__close` leaves, as `close()`.
-- @type LeaderLatch

--- Join the election.  Raises when started already or closed.
-- @return the latch, or nil, message, code when the session refuses
function Latch:start()
  return begin(self, fields(self, "start"), "leader latch")
end

--- Wait to lead, at most `timeout` seconds (nil: for ever; 0: answers at
-- once).  Waiting does not leave the election: a timeout leaves the node
-- queued.
-- @tparam[opt] number timeout seconds
-- @return true, or nil, message, code (`"timeout"`, `"closed"`...)
function Latch:await(timeout)
  local f = fields(self, "await")
  timeout = check_timeout(timeout, 1, "await")
  if not f.started or f.closed then
    argerror(1, "await", "leader latch not started, or closed")
  end
  local client = f.client
  local deadline = timeout and now() + timeout
  while true do
    local c, msg, code = closed(client)
    if c then return nil, msg, code end
    if ended(f) then
      local ok
      ok, msg, code = join(f)
      if not ok and code == "session_expired" and session.renews(client) then
        -- a new session is opening: wait for it, then join
        if await(client, session.session_leaving(client, "expired"),
            deadline) == "timeout" then
          return nil, "timeout", "timeout"
        end
      elseif not ok then
        return nil, msg, code
      end
    end
    if f.att then
      local st = await(client, f.att, deadline, 0)
      if st == "held" then
        if f.att:held() then return true end
        -- ours, but the server is not heard from: wait for news, until
        -- the deadline (a time run out is no wait: the waiter must never
        -- see a negative timeout, which the core once read as no limit)
        local _, gen = client:_poll()
        local left = deadline and deadline - now()
        if left and left <= 0 then return nil, "timeout", "timeout" end
        wait.wait(client, gen, left and math.min(left, 0.1) or 0.1)
      elseif st == "timeout" then
        return nil, "timeout", "timeout"
      end
    end
    if deadline and now() >= deadline then return nil, "timeout", "timeout" end
  end
end

--- True while we lead, as far as this process can know (the margin of
-- `lock:is_held()` from when the server last heard us).
-- @treturn boolean
function Latch:has_leadership()
  local f = fields(self, "has_leadership")
  if f.closed or not f.att then return false end
  return f.att:held()
end

--- `fn(leading)` is called with true when we come to lead and false when
-- we stop (session lost, our node deleted by someone else), in Lua, where
-- `on_lost` callbacks run.
-- @func fn `fn(leading)`
-- @return the latch
function Latch:on_change(fn)
  local f = fields(self, "on_change")
  if type(fn) ~= "function" then
    argerror(1, "on_change", "function expected, got " .. type(fn))
  end
  f.fns[#f.fns + 1] = fn
  return self
end

local function records(f, timeout, all)
  local c, msg, code = closed(f.client)
  if c then return nil, msg, code end
  return op.call_op(f.client, timeout or f.client:session_timeout(),
    "_holders", f.path, "latch", 1, nil, all)
end

--- The current leader's id, or nil when nobody leads.
-- @tparam[opt] number timeout seconds (default: the session timeout)
-- @return the id, or nil; or nil, message, code
function Latch:leader(timeout)
  local f = fields(self, "leader")
  timeout = check_timeout(timeout, 1, "leader")
  local h, msg, code = records(f, timeout, false)
  if not h then return nil, msg, code end
  return h[1] and h[1].id
end

--- Every participant in queue order: `{ id =, node =, leader = bool }`.
-- @tparam[opt] number timeout seconds (default: the session timeout)
-- @return a list, or nil, message, code
function Latch:participants(timeout)
  local f = fields(self, "participants")
  timeout = check_timeout(timeout, 1, "participants")
  local all, msg, code = records(f, timeout, true)
  if not all then return nil, msg, code end
  local out = {}
  for i, r in ipairs(all) do
    out[i] = { id = r.id, node = r.node, leader = i == 1 }
  end
  return out
end

--- The fencing token of our node (its czxid) while we lead; with
-- `"string"`, in the form that sorts (docs/api.md, "Tokens for outside
-- resources").
-- @tparam[opt] string form `"string"` for the string form
-- @treturn ?number the token, or nil
function Latch:token(form)
  local f = fields(self, "token")
  token.check_form(form, 1, "token")
  if f.closed or not f.att or not f.att:held() then return nil end
  return (token.answer(select(2, f.att:info()), nil, form))
end

--- Leave the election: our node goes (leadership, if we had it, ends,
-- and no `on_change` is called).  Idempotent; also what `__close` does,
-- and a collected latch's node goes too.
-- @return true
function Latch:close()
  local f = fields(self, "close")
  if not f.closed then leave(f); f.leading = false end -- (no on_change)
  return true
end

function Latch.__close(self)
  local f = unbox(self)
  if f and not f.closed then self:close() end
end

function Latch.__tostring(self)
  local f = unbox(self)
  return ("zklock.leader_latch{%s, %s}: %s"):format(f.path,
    f.closed and "closed" or f.leading and "leading" or
    f.started and "started" or "new", core.addr(self))
end

-- ---------------------------------------------------------------------------
-- the leader selector

local Selector = { __name = "zklock.leader_selector" }
Selector.__index = Selector

local function sel_fields(self, fname)
  return check.checked(self, Selector, fname, "leader selector")
end

local function report(err)
  log.log("error", "leader selector function failed: " .. tostring(err))
end

-- Our turn: run fn(selector) to its end, give leadership back, queue
-- again if asked.  Under zklock.ngx in a timer of its own (it may yield;
-- the worker goes on).
local function run_turn(f)
  if f.running or f.closed then return 0 end
  f.running, f.interrupted = true, false
  local function body()
    local ok, err = xpcall(function() return f.fn(f.self) end,
      debug.traceback)
    if not ok then report(err) end
    f.running = false
    f.turns = f.turns + 1
    local att = f.att
    set_attempt(f, nil) -- (its late events are stale now)
    if att then att:release() end -- leadership ends with fn
    if f.requeue and not f.closed and not closed(f.client) then join(f) end
  end
  if plug.hooks.dispatcher and ngx and ngx.timer then
    local ok, err = ngx.timer.at(0, function(premature)
      if premature then f.running = false; return end
      body()
    end)
    if not ok then f.running = false; report(err) end
  else
    body()
  end
  return 1
end

-- leader_selector's options
local SELECTOR_OPTIONS = check.options({ "requeue", "id" })

--- @type Client

--- A leader selector on `path` (Curator LeaderSelector): once started,
-- `fn(selector)` runs each time this participant is chosen, where
-- callbacks run (zklock waits, `zk:dispatch()`; under zklock.ngx in a
-- timer of its own); leadership lasts until fn returns.  An error in `fn`
-- is logged, and the turn ends as if it returned.
-- @string path the election's directory (a mutex's, Curator's nodes)
-- @func fn `fn(selector)`, a turn
-- @tparam[opt] table opts `requeue` (default true: queue again after each
--  turn), `id` (the participant id; default: the client's)
-- @return a selector (see LeaderSelector)
function client_methods:leader_selector(path, fn, opts)
  if not core.is_client(self) then
    argerror(1, "leader_selector", "zklock client expected")
  end
  check_path(path, 1, "leader_selector", check.RECIPE_PATH_MAX)
  if type(fn) ~= "function" then
    argerror(2, "leader_selector", "function expected, got " .. type(fn))
  end
  if opts ~= nil and type(opts) ~= "table" then
    argerror(3, "leader_selector", "table expected, got " .. type(opts))
  end
  opts = check.check_options(opts or {}, SELECTOR_OPTIONS, 3,
    "leader_selector")
  if opts.id ~= nil then check.check_data(self, opts.id, 3, "leader_selector") end
  local f = { client = self, path = path, fn = fn, turns = 0,
    id = opts.id or L.owner_data(self), requeue = opts.requeue ~= false }
  local sel = box(Selector, f)
  f.self = sel
  f.selector = function(kind)
    if kind == "held" then return run_turn(f) end
    -- lost (a hold: C tells no other): fn is asked to stop.  A hold
    -- whose turn is not running (its timer could not start) joins again,
    -- by the rule of a renewed session; the late news of a turn that
    -- ended does not (its next attempt is queued, or requeue is false).
    f.interrupted = true
    if not f.running and not f.closed and (f.requeue or f.turns == 0) and
        ended(f) then
      join(f)
    end
    return 0
  end
  return sel
end

--- A leader selector, as `zk:leader_selector(path, fn)` returns it.
-- `__close` leaves, as `close()`.
-- @type LeaderSelector

--- Join: wait for our turns.  Raises when started already.
-- @return the selector, or nil, message, code
function Selector:start()
  return begin(self, sel_fields(self, "start"), "leader selector")
end

--- Ask the running fn to stop (it checks `is_interrupted()`).
function Selector:interrupt()
  sel_fields(self, "interrupt").interrupted = true
end

--- True once asked to stop: by `interrupt()`, `close()`, or a lost
-- session or node.  A lost hold is seen here at once, from C (the margin
-- of `is_held()`, a foreign deletion, an expiry), even by a fn that never
-- lets callbacks run.
-- @treturn boolean
function Selector:is_interrupted()
  local f = sel_fields(self, "is_interrupted")
  if not f.interrupted and f.running and f.att and not f.att:held() then
    f.interrupted = true
  end
  return f.interrupted == true
end

--- True while fn runs and we still hold (the margin of `is_held()`).
-- @treturn boolean
function Selector:has_leadership()
  local f = sel_fields(self, "has_leadership")
  return f.running == true and f.att ~= nil and f.att:held()
end

--- How many turns have run to their end.
-- @treturn int
function Selector:turns()
  return sel_fields(self, "turns").turns
end

--- Leave: no more turns; a running fn is interrupted, and leadership ends
-- when it returns.  Idempotent; also what `__close` does.
-- @return true
function Selector:close()
  local f = sel_fields(self, "close")
  if not f.closed then f.interrupted = true; leave(f) end
  return true
end

function Selector.__close(self)
  local f = unbox(self)
  if f and not f.closed then self:close() end
end

function Selector.__tostring(self)
  local f = unbox(self)
  return ("zklock.leader_selector{%s, %s}: %s"):format(f.path,
    f.closed and "closed" or f.running and "leading" or
    f.started and "started" or "new", core.addr(self))
end

return { Latch = Latch, Selector = Selector }
