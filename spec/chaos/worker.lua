-- One worker process of the chaos run (spec/chaos/run.lua; the log format
-- and the checkers are in spec/chaos/check.lua, the whole in
-- docs/testing.md, "The chaos run").
--
--   worker.lua PLAN INDEX GENERATION LOG
--
-- Several coroutines run at once under a small cooperative scheduler whose
-- waiter yields (the OpenResty shape): each draws ops from its own seeded
-- stream until the plan's end time.  Some share one object per target
-- (shared by every coroutine of the process, as a worker-level object is
-- under nginx), others make their own, some on a client of their own.
-- Every hold, wait, write and read is logged with monotonic, system-wide
-- times; the parent judges the logs.
local zklock = require "zklock"
local core = require "zklock.core"
local G = dofile("spec/chaos/gen.lua")

local plan_file, index, generation, logfile = ...
local plan = dofile(plan_file)
local avoid = plan.avoid or {} -- (compositions left out: gen.lua, run.lua)
-- plan.focus: one of issue 22's compositions (run.lua's C.KNOWN) drawn
-- more often, so that a short run on a fixed seed meets it for sure
local focus = plan.focus
index, generation = tonumber(index), tonumber(generation)
local P = ("%d.%d"):format(index, generation) -- this process, in the logs
local now = core.now
local R = G.stream(plan.seed, index * 1000 + generation)
-- (a second stream for how abandoned waits end, so that R draws as before)
local R2 = G.stream(plan.seed, index * 1000 + generation + 500000)
local MAX_DATA = 1040384 -- connect's default max_data (docs/limits.md)

local log = assert(io.open(logfile, "a"))
log:setvbuf("line")
local function L(...)
  local t = { ... }
  for i = 1, #t do
    local v = t[i]
    t[i] = type(v) == "number" and (v == math.floor(v) and
      string.format("%d", v) or string.format("%.6f", v)) or tostring(v)
  end
  log:write(table.concat(t, " "), "\n")
end

local function connect()
  return zklock.connect(plan.hosts, { session_timeout = plan.st,
    connect_timeout = 30, id = "chaos " .. P, tls = plan.tls,
    sasl = plan.sasl })
end
local zk = assert(connect())

-- a lazy collector in some workers (as in a program that allocates
-- little): what only garbage collection frees stays a while; none at all
-- but the explicit ones under the focus on abandoned waits (a large heap)
if focus == "abandon_lease" then
  collectgarbage("stop")
elseif R:chance(0.3) then
  if not pcall(collectgarbage, "incremental", 1000) then
    collectgarbage("setpause", 1000)
  end
end
L("S", P, core.pid(), now())

-- ---------------------------------------------------------------------------
-- the scheduler

local ABANDON = setmetatable({}, { __tostring = function()
  return "chaos: wait abandoned" end })
local tasks, by_co = {}, {}
local clients = { zk } -- every client to dispatch and close
local has_close = coroutine.close ~= nil

-- The waiter: inside a task, mark the first wait of the current acquire
-- (the node is queued by then: the create and listing were awaited), end
-- the wait with an error when the task planned to abandon it, and yield.
zklock.set_waiter(function(c, gen, t)
  local co = coroutine.running()
  local task = co and by_co[co]
  if not task then return c:_wait(gen, t) end
  if task.tq == false then task.tq = now() end
  if task.abandon_at and now() >= task.abandon_at then
    task.abandon_at = nil
    error(ABANDON, 0)
  end
  coroutine.yield()
end)

local function sleep(d)
  local t = now() + d
  local co = coroutine.running()
  if co and by_co[co] then
    repeat coroutine.yield() until now() >= t
  else
    while now() < t do end
  end
end

local function spawn(name, fn)
  local task = { name = name .. "/" .. P, fn = fn }
  task.co = coroutine.create(function() return fn(task) end)
  by_co[task.co] = task
  tasks[#tasks + 1] = task
  return task
end

-- A Lua error where api.md promises none: a violation for the checker.
local function unexpected(task, what, err)
  L("E", P, task and task.name or "-", now(), what,
    (tostring(err):gsub("%s+", " ")))
end

-- ---------------------------------------------------------------------------
-- holds: believed from the acquire until the last is_held() that said so

local function new_hold(kind, tname, task, token, node, mh, pass)
  local ts = task.ts
  task.ts = nil -- (the acquire's start, for this hold only)
  -- (t1 = -1: not believed until is_held() says so; pass: the hold's pass
  -- within a lock cohort, its token's second half)
  return { kind = kind, target = tname, task = task.name, t0 = now(),
    t1 = -1, ts = ts or -1, lost = -1, flip = 0, token = token or 0,
    node = node or "-", mh = mh or 0, rel_t = -1, rel_e = -1, rel = "none",
    pass = pass or 0 }
end

-- (the time is read before asking: is_held() answers for a moment at or
-- after it, so [t0, t1] lies inside the hold).  is_held() may say false
-- and then true again: a connection back in the same session before the
-- hold was given up (docs/design.md, section 9.2).  But never true on a
-- node other than the hold's own: that is someone else's hold believed.
local function sample(h, held, node)
  local t = now()
  if held then
    h.t1 = t
    if node and h.node ~= "-" and node ~= h.node then h.flip = 1 end
  elseif h.lost < 0 then
    h.lost = t
  end
end

local function log_hold(h)
  L("H", h.kind, h.target, h.task, h.ts, h.t0, h.t1, h.lost, h.flip,
    h.token, h.mh, h.rel_t, h.rel_e, h.rel, h.pass, h.node)
end

-- Release through fn(): the outcome as one word.
local function released(h, fn)
  h.rel_t = now()
  local ok, r, msg, code = pcall(fn)
  h.rel_e = now()
  if not ok then
    h.rel = "raised"
    return nil, r
  end
  h.rel = r and "ok" or tostring(code)
  return r, msg, code
end

-- Work under the hold(s) for about d seconds, sampling is_held().
local function work(d, holds, checks, task)
  local t = now() + d
  repeat
    for i, h in ipairs(holds) do sample(h, checks[i]()) end
    if task.revoked then return end
    sleep(R:float() * 0.03)
  until now() >= t
  for i, h in ipairs(holds) do sample(h, checks[i]()) end
end

local function counter_value(data)
  return tonumber(data and data:match("^%d+") or "0") or 0
end

local function counter_data(v, big)
  local s = tostring(v)
  if big then return s .. " " .. string.rep("x", MAX_DATA - #s - 1) end
  return s
end

-- Does a write of `data` to t.counter, riding with lock's node (the
-- release's multi, or fenced_set's), fit the server's jute.maxbuffer of
-- 1 MiB - 1 with zklock's 1 KiB for the rest (docs/limits.md)?  One that
-- does not is refused before anything is sent, and the hold goes on.
local function fits(lock, t, data)
  return #data + #(lock:node() or "") + #t.counter + 1024 <= 1048575
end

-- An oversized write: the argument error, and nothing lost.
local function refused(task, what, fn)
  local ok, err = pcall(fn)
  if ok or not tostring(err):find("jute.maxbuffer", 1, true) then
    unexpected(task, what .. " too big for the server",
      ok and "accepted" or err)
  end
end

-- Read the counter and write it back plus one, fenced by `lock`.
local function fenced_increment(task, t, lock, token, big)
  local data, _, gcode = zk:get(t.counter, plan.st)
  if data == nil and gcode ~= "no_node" then return end
  local v = counter_value(data) + 1
  if not fits(lock, t, counter_data(v, big)) then
    return refused(task, "fenced_set", function()
      return lock:fenced_set(t.counter, counter_data(v, big), plan.st * 3)
    end)
  end
  local now_token, pass = lock:token()
  token = now_token or token -- (nil at the acquire in a reconnection)
  L("P", t.name, token, v)
  local ok, r, zxid, code = pcall(lock.fenced_set, lock, t.counter,
    counter_data(v, big), plan.st * 3)
  if not ok then return unexpected(task, "fenced_set", r) end
  L("W", t.name, token, r and zxid or 0, v, pass or 0,
    r and "ok" or code == "lock_lost" and "lost" or "unknown")
end

local function log_acquire(kind, tname, task, t_s, res, code, timeout)
  L("A", kind, tname, task.name, t_s, task.tq or -1, now(), res,
    tostring(code), timeout)
  task.tq = nil
end

-- ---------------------------------------------------------------------------
-- objects: shared by the process's coroutines, or a task's own

-- A target's object on client c.  plan.broken names the recipes to break
-- on purpose, to prove the checkers (spec/chaos_spec.lua): a mutex (m2)
-- and a semaphore mutex that let two hold at once, a semaphore of one
-- lease too many, a read/write lock whose writers take the read lock; and
-- below, contenders that lose their place (m3), a release that forgets
-- its node (m1), a latch per worker, a barrier waited on elsewhere, a
-- double barrier of one member too few.
local broken = plan.broken or {}
local function make(c, t)
  if t.kind == "mutex" then
    if broken.mutex and t.name == "m2" then
      return require("zklock.testing").broken_mutex(c, t.path, 2)
    end
    return c:mutex(t.path, { linger = t.linger, cohort = t.cohort,
      pass_limit = t.pass_limit })
  elseif t.kind == "rw" then
    local rw = c:rwlock(t.path, { linger = t.linger, cohort = t.cohort,
      pass_limit = t.pass_limit })
    if broken.rw then return { read = rw.read, write = rw.read } end
    return rw
  elseif t.kind == "smutex" then
    if broken.smutex then
      return require("zklock.testing").broken_mutex(c, t.path, 2)
    end
    return c:semaphore_mutex(t.path)
  elseif t.kind == "sem" then
    return c:semaphore(t.path, t.n + (broken.sem and 1 or 0))
  end
end

local shared = {}
local function shared_obj(t)
  shared[t.name] = shared[t.name] or make(zk, t)
  return shared[t.name]
end

-- What an op acquires on: the shared object, or a new one (on the shared
-- client, or on a client of its own that another task may close while it
-- waits).
local function choose_obj(task, t, new)
  if task.force_shared or R:chance(0.5) then return shared_obj(t), "shared" end
  if R:chance(0.12) then
    local c = connect()
    if c then
      clients[#clients + 1] = c
      if R:chance(0.5) then -- closed under the waiting acquire
        local d = R:float() * 2
        spawn("closer", function()
          sleep(d)
          c:close()
        end)
      end
      task.own_client = c
      return new(c), "client"
    end
  end
  return new(zk), "own"
end

-- Plan how a wait ends early: an error out of the waiter; or, from the
-- scheduler, coroutine.close() of the task (Lua 5.4) or, when the object is
-- the task's own, the task dropped for garbage collection, its object with
-- it, while it waits.
local function plan_abandon(task, timeout, kind)
  local p = focus == "abandon_lease" and kind ~= "mutex" and 0.5 or 0.08
  if not R:chance(p) then return end
  local d = R:float() * math.min(timeout, 3)
  if has_close and R:chance(0.5) or not has_close and R2:chance(0.3) then
    task.close_at = now() + d
  else
    task.abandon_at = now() + d
  end
end

local function is_shared(obj)
  for _, o in pairs(shared) do
    if o == obj or type(o) == "table" and (o.read == obj or o.write == obj)
    then
      return true
    end
  end
  return false
end

local function pick_timeout()
  return R:pick({ 0, 0.5, 2, 2, 5, 5 })
end

local function pick_work()
  return R:pick({ 0.01, 0.05, 0.1, 0.3, 0.6, 1.2 })
end

-- acquire through pcall: the lock (and read data), or nil and an outcome
local function acquire(task, kind, tname, obj, timeout, opts)
  local t_s = now()
  task.ts = nil
  task.tq = false
  task.t_s, task.akind, task.atarget, task.atimeout = t_s, kind, tname,
    timeout
  task.aown = not is_shared(obj)
  if not (avoid.abandon_lease and (kind == "smutex" or kind == "lease" or
      kind == "multi")) then
    plan_abandon(task, timeout, kind)
  end
  local take = obj.acquire
  if broken.fifo and kind == "mutex" and tname == "m3" and timeout > 0.3 then
    -- broken on purpose: a contender that loses its place (gives up its
    -- node after a while and queues again at the back)
    take = function(o, t, op)
      local deadline = now() + t
      while true do
        local left = deadline - now()
        local a, b, c = o:acquire(math.max(0, math.min(0.3, left)), op)
        if a or c ~= "timeout" or left <= 0.3 then return a, b, c end
      end
    end
  end
  local ok, got, data, ver_or_code = pcall(take, obj, timeout, opts)
  task.abandon_at, task.close_at, task.t_s = nil, nil, nil
  if not ok then
    if got == ABANDON then
      log_acquire(kind, tname, task, t_s, "abandon", "-", timeout)
    else
      log_acquire(kind, tname, task, t_s, "raised", "-", timeout)
      unexpected(task, kind .. ":acquire", got)
    end
    return nil
  end
  if not got then
    log_acquire(kind, tname, task, t_s, "fail", ver_or_code, timeout)
    return nil
  end
  log_acquire(kind, tname, task, t_s, "ok", "-", timeout)
  task.ts = kind ~= "multi" and t_s or nil
  return got, data
end

-- A client of a task's own is closed after its op (idempotent: a closer
-- may have closed it already).
local function release_client(task)
  local c = task.own_client
  if not c then return end
  task.own_client = nil
  c:close()
  for i = #clients, 1, -1 do
    if clients[i] == c then table.remove(clients, i) end
  end
end

local function drop(task)
  -- the object goes for garbage collection with its hold
  release_client(task)
  collectgarbage()
  collectgarbage()
end

-- ---------------------------------------------------------------------------
-- the ops

local OPS = {}

-- One hold of a mutex object: acquire (max_hold, guarded read),
-- reentry, work, a fenced or guarded write, release.  Returns "drop" when
-- the hold is to be dropped for garbage collection instead of released,
-- true when it was released.
local function mutex_hold(task, t, obj, how, revocable)
  local opts = {}
  if R:chance(0.3) then opts.max_hold = R:pick({ 0.3, 0.6, 1 }) end
  local guarded = R:chance(0.35)
  if guarded then opts.read = t.counter end
  local big = t.big and R:chance(focus == "big" and 0.7 or 0.3)
  local timeout = pick_timeout()
  if broken.leak and t.name == "m1" then timeout = 5 end -- (seen wedged)
  task.revoked = false
  local got, data = acquire(task, "mutex", t.name, obj, timeout, opts)
  if not got then return end
  local token, pass = obj:token()
  local h = new_hold("mutex", t.name, task, token, obj:node(),
    opts.max_hold, pass)
  local check = function() return obj:is_held(), obj:node() end
  sample(h, check())
  if not revocable and R:chance(0.2) then -- reentrant
    local again = obj:acquire(1)
    if again ~= obj then unexpected(task, "reentrant acquire", "refused") end
    work(pick_work() / 2, { h }, { check }, task)
    if again then released({}, function() return obj:release() end) end
  end
  work(pick_work(), { h }, { check }, task)
  if task.revoked then h.rel = "revoked"; return log_hold(h) end
  if broken.leak and t.name == "m1" then -- a release that forgets its node
    h.rel_t, h.rel_e, h.rel = now(), now(), "ok"
    return log_hold(h)
  end
  if how ~= "shared" and R:chance(0.05) then
    log_hold(h) -- dropped while held: collected, its node deleted
    return "drop"
  end
  if guarded and not fits(obj, t, counter_data(counter_value(data) + 1,
      big)) then
    refused(task, "mutex:release", function()
      return obj:release({ write = t.counter,
        data = counter_data(counter_value(data) + 1, big) })
    end)
    guarded = false -- (then released the plain way, still held)
  end
  if guarded then
    local v = counter_value(data) + 1
    local now_token, now_pass = obj:token()
    h.token = now_token or h.token -- (nil at the acquire in a reconnection)
    h.pass = now_pass or h.pass
    L("P", t.name, h.token, v)
    local r, err, zxid = released(h, function()
      return obj:release({ write = t.counter, data = counter_data(v, big) })
    end)
    L("W", t.name, h.token, r and zxid or 0, v, h.pass,
      r and "ok" or h.rel == "lock_lost" and "lost" or "unknown")
    if h.rel == "raised" then unexpected(task, "mutex:release", err) end
  else
    if R:chance(0.6) then fenced_increment(task, t, obj, h.token, big) end
    sample(h, check())
    local _, err = released(h, function() return obj:release() end)
    if h.rel == "raised" then unexpected(task, "mutex:release", err) end
  end
  log_hold(h)
  return true
end

-- mutex: reentrant, max_hold, linger (the target's), guarded read and
-- write, fenced_set, revocable; now and then several holds in a row on
-- one object (a cached node is reused at once)
function OPS.mutex(task, name)
  local t = plan.targets[name or R:pick(G.of_kind(plan, "mutex"))]
  if broken.leak and t.name == "m1" then task.force_shared = true end
  local obj, how = choose_obj(task, t, function(c) return make(c, t) end)
  if broken.leak and t.name == "m1" then task.force_shared = task.kid end
  local revocable = how ~= "shared" and R:chance(0.3)
  if revocable then
    obj:on_revoke(function(l)
      task.revoked = true
      local ok, err = pcall(l.release, l)
      if not ok then unexpected(task, "on_revoke release", err) end
    end)
  end
  for _ = 1, R:chance(0.4) and R:int(2, 4) or 1 do
    local r = mutex_hold(task, t, obj, how, revocable)
    if r == "drop" then
      obj = nil -- luacheck: ignore
      return drop(task)
    end
    if not r then return end
  end
end

-- semaphore mutex: Curator's, often shared, with max_hold
function OPS.smutex(task)
  local t = plan.targets[R:pick(G.of_kind(plan, "smutex"))]
  local one = not avoid.smutex_shared and -- (the shared object)
    (task.force_shared or R:chance(0.7))
  local obj = one and shared_obj(t) or make(zk, t)
  local opts = {}
  if R:chance(0.4) then
    opts.max_hold = R:pick({ 0.3, 0.6, 1 })
  end
  -- (the focus on abandoned waits waits long, so that a wait stuck behind
  -- one is seen)
  local timeout = focus == "abandon_lease" and 5 or pick_timeout()
  local got = acquire(task, "smutex", t.name, obj, timeout, opts)
  if not got then return end
  local h = new_hold("smutex", t.name, task, obj:token(), obj:node(),
    opts.max_hold)
  local check = function() return obj:is_held(), obj:node() end
  work(pick_work(), { h }, { check }, task)
  if R:chance(0.5) then fenced_increment(task, t, obj, h.token) end
  sample(h, check())
  local _, err = released(h, function() return obj:release() end)
  if h.rel == "raised" then unexpected(task, "smutex:release", err) end
  log_hold(h)
end

-- semaphore: several leases, released in any order, some with max_hold
function OPS.sem(task)
  local t = plan.targets[R:pick(G.of_kind(plan, "sem"))]
  local sem = (task.force_shared or R:chance(0.5)) and shared_obj(t) or
    make(zk, t)
  local holds, checks, leases = {}, {}, {}
  for _ = 1, R:int(1, 3) do
    local opts = R:chance(0.3) and { max_hold = R:pick({ 0.3, 1 }) } or nil
    local lease = acquire(task, "lease", t.name, sem,
      focus == "abandon_lease" and 5 or pick_timeout(), opts)
    if not lease then break end
    local h = new_hold("lease", t.name, task, lease:token(), lease:node(),
      opts and opts.max_hold)
    holds[#holds + 1], leases[#leases + 1] = h, lease
    checks[#checks + 1] = function() return lease:is_held(), lease:node() end
    work(pick_work() / 2, holds, checks, task)
  end
  work(pick_work(), holds, checks, task)
  -- released in a random order; now and then one is dropped instead
  while #leases > 0 do
    local i = R:int(1, #leases)
    local lease, h = table.remove(leases, i), table.remove(holds, i)
    table.remove(checks, i)
    sample(h, lease:is_held(), lease:node())
    if R:chance(0.05) then
      log_hold(h) -- dropped: collected, its node deleted
      lease = nil -- luacheck: ignore
      drop(task)
    else
      local _, err = released(h, function() return lease:release() end)
      if h.rel == "raised" then unexpected(task, "lease:release", err) end
      log_hold(h)
    end
    work(R:float() * 0.1, holds, checks, task)
  end
end

-- The two-node update a writer makes: a then b, each fenced; the value
-- names the hold, so a reader that sees a ~= b knows whose update it met.
local function rw_update(task, t, w, h, n)
  local v = ("%s#%s#%d"):format(P, task.name:match("^[^/]*"), n)
  for _, which in ipairs({ "a", "b" }) do
    local ok, r, zxid, code = pcall(w.fenced_set, w, t[which], v, plan.st * 3)
    if not ok then return unexpected(task, "rw fenced_set", r) end
    L("V", t.name, h.token, which, r and zxid or 0, v,
      r and "ok" or code == "lock_lost" and "lost" or "unknown")
    if not r then return end
    if which == "a" then sleep(broken.rw and 0.3 or R:float() * 0.05) end
  end
end

-- A reader's look at both nodes, logged with whether it still held after
-- (so it held through both reads).
local function read_update(t, h, check)
  local a = zk:get(t.a, plan.st)
  local b = zk:get(t.b, plan.st)
  local held = check()
  sample(h, held)
  L("R", t.name, h.task, h.t0, held and 1 or 0, a or "-", b or "-")
end

local rw_n = 0
local function rw_obj(task, t)
  if task.force_shared or R:chance(0.5) then return shared_obj(t) end
  return make(zk, t)
end

-- rwlock: readers, writers (two-node updates), and downgrades (the write
-- holder takes the read lock, then lets the write lock go, by release or
-- by max_hold)
function OPS.rw(task)
  local t = plan.targets[R:pick(G.of_kind(plan, "rw"))]
  local rw = rw_obj(task, t)
  local mode = R:weighted({ read = 4, write = 3,
    downgrade = focus == "downgrade" and 9 or 3 })
  local timeout = pick_timeout()
  if mode == "read" then
    local got = acquire(task, "read", t.name, rw.read, timeout)
    if not got then return end
    local h = new_hold("read", t.name, task, rw.read:token(), rw.read:node())
    local check = function() return rw.read:is_held(), rw.read:node() end
    work(pick_work() / 2, { h }, { check }, task)
    read_update(t, h, check)
    work(pick_work() / 2, { h }, { check }, task)
    local _, err = released(h, function() return rw.read:release() end)
    if h.rel == "raised" then unexpected(task, "read:release", err) end
    return log_hold(h)
  end
  local opts = {}
  if R:chance(mode == "downgrade" and 0.5 or 0.25) and
      not (mode == "downgrade" and avoid.downgrade) then
    opts.max_hold = R:pick({ 0.3, 0.6, 1 })
  end
  local got = acquire(task, "write", t.name, rw.write, timeout, opts)
  if not got then return end
  local hw = new_hold("write", t.name, task, rw.write:token(),
    rw.write:node(), opts.max_hold)
  local cw = function() return rw.write:is_held(), rw.write:node() end
  rw_n = rw_n + 1
  rw_update(task, t, rw.write, hw, rw_n)
  sample(hw, cw())
  if mode == "write" then
    work(pick_work(), { hw }, { cw }, task)
    local _, err = released(hw, function() return rw.write:release() end)
    if hw.rel == "raised" then unexpected(task, "write:release", err) end
    return log_hold(hw)
  end
  -- downgrade
  local t_s = now()
  task.tq = false
  local ok, r = pcall(rw.read.acquire, rw.read, 0)
  log_acquire("read", t.name, task, t_s, ok and r and "ok" or "fail",
    ok and "-" or "raised", 0)
  if not ok then unexpected(task, "downgrade read:acquire", r) end
  if not (ok and r) then
    released(hw, function() return rw.write:release() end)
    return log_hold(hw)
  end
  local hr = new_hold("read", t.name, task, rw.read:token(), rw.read:node())
  local cr = function() return rw.read:is_held(), rw.read:node() end
  if R:chance(0.5) then -- the write lock goes first, by release
    released(hw, function() return rw.write:release() end)
    log_hold(hw)
    work(pick_work(), { hr }, { cr }, task)
  else -- read and write held on, past a max_hold perhaps
    work(pick_work() * 2, { hw, hr }, { cw, cr }, task)
    read_update(t, hr, cr)
  end
  local _, err = released(hr, function() return rw.read:release() end)
  if hr.rel == "raised" then unexpected(task, "read:release", err) end
  log_hold(hr)
  if hw.rel == "none" then
    local _, err2 = released(hw, function() return rw.write:release() end)
    if hw.rel == "raised" then unexpected(task, "write:release", err2) end
    log_hold(hw)
  end
end

-- multilock over two members: mutexes and read/write write locks
function OPS.multi(task)
  local names = {}
  for _, n in ipairs(G.of_kind(plan, "mutex")) do
    if not plan.targets[n].big then names[#names + 1] = n end
  end
  for _, n in ipairs(G.of_kind(plan, "rw")) do names[#names + 1] = n end
  local a = R:pick(names)
  local b = R:pick(names)
  if a == b then return end
  local members, locks = {}, {}
  for _, n in ipairs({ a, b }) do
    local t = plan.targets[n]
    local l = t.kind == "mutex" and zk:mutex(t.path) or zk:rwlock(t.path).write
    members[#members + 1] = { t = t, l = l,
      kind = t.kind == "mutex" and "mutex" or "write" }
    locks[#locks + 1] = l
  end
  local ml = zk:multilock(locks)
  local got = acquire(task, "multi", a .. "+" .. b, ml, pick_timeout())
  if not got then return end
  local holds, checks = {}, {}
  for i, m in ipairs(members) do
    holds[i] = new_hold(m.kind, m.t.name, task, m.l:token(), m.l:node())
    checks[i] = function() return m.l:is_held(), m.l:node() end
  end
  work(pick_work(), holds, checks, task)
  for i, m in ipairs(members) do
    if m.kind == "mutex" and R:chance(0.5) then
      fenced_increment(task, m.t, m.l, holds[i].token)
    end
  end
  for i, h in ipairs(holds) do sample(h, checks[i]()) end
  local t_r = now()
  local ok, r, msg = pcall(ml.release, ml)
  if not ok then unexpected(task, "multilock:release", r) end
  for _, h in ipairs(holds) do
    h.rel_t, h.rel_e = t_r, now()
    h.rel = not ok and "raised" or r and "ok" or "lock_lost"
    if not r and ok and not tostring(msg):find(h.target, 1, true) then
      h.rel = "ok?" -- the failure named another member
    end
    log_hold(h)
  end
end

-- leader latch: lead for a while, then leave
function OPS.latch(task)
  local t = plan.targets.l1
  local latch = zk:leader_latch(broken.latch and t.path .. "/w" .. index or
    t.path, "chaos " .. task.name)
  latch:start()
  local timeout = pick_timeout()
  local t_s = now()
  task.tq = false
  local ok, r, _, code = pcall(latch.await, latch, timeout)
  log_acquire("leader", t.name, task, t_s, ok and r and "ok" or "fail",
    ok and tostring(code) or "raised", timeout)
  if not ok then unexpected(task, "latch:await", r) end
  if ok and r then
    local h = new_hold("leader", t.name, task, latch:token())
    work(pick_work(), { h }, { function() return latch:has_leadership() end },
      task)
    h.rel_t = now()
    latch:close()
    h.rel_e, h.rel = now(), "ok"
    return log_hold(h)
  end
  latch:close()
end

-- barrier: wait for the controller's barrier to go
function OPS.barrier(task)
  local t = plan.targets.b1
  local b = zk:barrier(broken.barrier and t.path .. "-elsewhere" or t.path)
  local timeout = pick_timeout()
  local t_s = now()
  local ok, r, _, code = pcall(b.wait, b, timeout)
  if not ok then unexpected(task, "barrier:wait", r) end
  L("BW", t.name, task.name, t_s, now(), ok and r and "ok" or
    ok and tostring(code) or "raised", timeout)
end

-- a burst: 2 or 3 more coroutines run one op of a kind at once on the
-- process's shared object (concurrent requests on a worker-level object)
function OPS.burst(task)
  local kind = focus == "smutex_shared" and "smutex" or
    R:pick({ "mutex", "smutex", "sem", "rw" })
  local kids = {}
  for i = 1, R:int(2, 3) do
    kids[i] = spawn("b" .. i, function(kid)
      kid.force_shared, kid.kid = true, true
      local ok, err = pcall(OPS[kind], kid)
      if not ok then unexpected(kid, "burst " .. kind, err) end
      release_client(kid)
    end)
  end
  local ok, err = pcall(OPS[kind], task)
  if not ok then unexpected(task, "burst " .. kind, err) end
  for _, kid in ipairs(kids) do
    while coroutine.status(kid.co) ~= "dead" and not kid.gone do
      sleep(0.01)
    end
  end
end

local WEIGHTS = { mutex = 6, smutex = 3, sem = 2, rw = 5, multi = 2,
  latch = 1, barrier = 1, burst = 2 }

-- (a focus draws its ops three times as often)
local FOCUS_OPS = { downgrade = { "rw" },
  smutex_shared = { "smutex", "burst" }, abandon_lease = { "sem", "smutex",
  "multi" }, linger = { "mutex" }, big = { "mutex" },
  cohort = { "mutex", "burst", "rw" } }
local weights = {}
for op, w in pairs(plan.weights or WEIGHTS) do weights[op] = w end
for _, op in ipairs(FOCUS_OPS[focus] or {}) do weights[op] = weights[op] * 3 end

local function general(task)
  -- (broken on purpose: every coroutine meets the forgotten release on m1
  -- and the contenders that lose their place on m3 first)
  if broken.leak then pcall(OPS.mutex, task, "m1") end
  if broken.fifo then pcall(OPS.mutex, task, "m3") end
  while now() < plan.t_end do
    local op = R:weighted(weights)
    local ok, err = pcall(OPS[op], task)
    if not ok then unexpected(task, op, err) end
    release_client(task)
    sleep(R:float() * 0.05)
  end
end

-- the barrier's controller: set, wait, remove, wait
local function controller()
  local t = plan.targets.b1
  local b = zk:barrier(t.path)
  while now() < plan.t_end do
    local ok = b:set()
    if ok then L("BS", t.name, now()) end
    sleep(0.3 + R:float() * 1.5)
    L("BR", t.name, now())
    b:remove()
    sleep(0.2 + R:float() * 0.8)
  end
end

-- a double barrier member: rounds at fixed times (plan.t0 + k * period),
-- so that the members of a round meet whatever happened before
local function member(task)
  local t = plan.targets.db1
  local period = plan.db_period
  local m = #t.members
  local k = math.floor((now() - plan.t0) / period) + 1
  while plan.t0 + k * period < plan.t_end do
    -- (arrivals spread over half a second)
    local arrive = plan.t0 + k * period +
      (broken.dbarrier and index == t.members[1] and 0 or R:float() * 0.5)
    while now() < arrive do sleep(0.02) end
    local db = zk:double_barrier(t.path .. "/r" .. k,
      broken.dbarrier and index == t.members[1] and m - 1 or m)
    local t_s = now()
    local ok, r, _, code = pcall(db.enter, db, period * 0.4)
    if not ok then unexpected(task, "double_barrier:enter", r) end
    L("DE", t.name, k, P, t_s, now(), ok and r and "ok" or
      ok and tostring(code) or "raised")
    if ok and r then
      sleep(R:float() * 0.3)
      local t_l = now()
      local ok2, r2, _, code2 = pcall(db.leave, db, period * 0.4)
      if not ok2 then unexpected(task, "double_barrier:leave", r2) end
      L("DL", t.name, k, P, t_l, now(), ok2 and r2 and "ok" or
        ok2 and tostring(code2) or "raised")
    end
    k = k + 1
  end
end

-- the selector: a short turn whenever chosen, requeued
local selector
while now() < plan.t0 do sleep(0.01) end -- (everyone connected by then)
if R:chance(0.5) then
  local t = plan.targets.sel1
  local stask = { name = "selector/" .. P }
  selector = zk:leader_selector(t.path, function(s)
    local h = new_hold("leader", t.name, stask, 0)
    local d = now() + 0.02 + R:float() * 0.2
    while now() < d and not s:is_interrupted() do
      sample(h, s:has_leadership())
    end
    sample(h, s:has_leadership())
    h.rel_t, h.rel_e, h.rel = now(), now(), "ok"
    log_hold(h)
  end)
  selector:start()
end

for i = 1, R:int(2, 4) do spawn("g" .. i, general) end
if plan.targets.b1.controller == index then spawn("ctl", controller) end
for _, w in ipairs(plan.targets.db1.members) do
  if w == index then spawn("db", member) end
end

-- run until every task is done; a task closed in its wait (coroutine.close)
-- is logged as abandoned and replaced
local bound = plan.t_end + 60
while true do
  local live = 0
  for i = 1, #tasks do
    local task = tasks[i]
    local due = task.close_at and now() >= task.close_at and task.t_s
    local drop_it = due and task.aown and (not has_close or R2:chance(0.5))
    if due and not drop_it and not has_close then -- (the waiter raises
      task.close_at, task.abandon_at, due = nil, now(), false -- instead)
    end
    if coroutine.status(task.co) == "suspended" then
      if due then
        local ok = drop_it or coroutine.close(task.co)
        L("A", task.akind, task.atarget, task.name, task.t_s, task.tq or -1,
          now(), ok and (drop_it and "dropped" or "abandon") or "raised", "-",
          task.atimeout)
        release_client(task)
        task.gone = true
        by_co[task.co] = nil
        tasks[i] = spawn(task.name:match("^[^/]*"), task.fn)
        tasks[#tasks] = nil
        if drop_it then -- the task, its coroutine and its object go
          task = nil -- luacheck: ignore
          collectgarbage()
          collectgarbage()
        end
      else
        local ok, err = coroutine.resume(task.co)
        if not ok then unexpected(task, "task", debug.traceback(task.co, err)) end
      end
    end
    if coroutine.status(tasks[i].co) ~= "dead" then live = live + 1 end
  end
  for _, c in ipairs(clients) do
    local ok, err = pcall(c.dispatch, c)
    if not ok and c:state() ~= "closed" then unexpected(nil, "dispatch", err) end
  end
  if live == 0 then break end
  if now() > bound then
    L("E", P, "-", now(), "main", "tasks did not finish")
    break
  end
  local _, gen = zk:_poll()
  zk:_wait(gen, 0.01)
end

if selector then selector:close() end
for _, c in ipairs(clients) do c:close() end
L("D", P, now())
log:close()
