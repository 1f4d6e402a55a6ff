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
-- times; the parent judges the logs.  This file is the process: its
-- set-up, the scheduler, the tasks and their loop.  The rest share the
-- table W: worker_log.lua (what is logged), worker_objects.lua (objects
-- and the acquire), worker_holds.lua (extend, and the callbacks of leases
-- and multilocks), worker_locks.lua (mutex, semaphore mutex),
-- worker_leases.lua (semaphore), worker_recipes.lua (read/write lock,
-- multilock, latch, barriers, bursts).
local zklock = require "zklock"
local core = require "zklock.core"
local G = dofile("spec/chaos/gen.lua")

local plan_file, index, generation, logfile = ...
local plan = dofile(plan_file)
local avoid = plan.avoid or {} -- (compositions left out: gen.lua, run.lua)
-- plan.focus: one of the compositions (run.lua's C.COMPOSITIONS) drawn
-- more often, so that a short run on a fixed seed meets it for sure
local focus = plan.focus
index, generation = tonumber(index), tonumber(generation)
local P = ("%d.%d"):format(index, generation) -- this process, in the logs
local now = core.now
local R = G.stream(plan.seed, index * 1000 + generation)
-- (a second stream for how abandoned waits end, so that R draws as before)
local R2 = G.stream(plan.seed, index * 1000 + generation + 500000)
-- (a third for issue 32's compositions, worker_locks.lua; a fourth for
-- issue 33's, worker_holds.lua)
local R3 = G.stream(plan.seed, index * 1000 + generation + 1000000)
local R4 = G.stream(plan.seed, index * 1000 + generation + 1500000)
-- (issue 36's on_queued, drawn on a stream of its own: the programs of
-- the seeds on record stay as they were)
local R5 = G.stream(plan.seed, index * 1000 + generation + 2000000)
-- The streams as the modules draw on them: the running task's own set,
-- if it has one (task.streams: issue 36's TTL acquirer below), else the
-- worker's, so that a task with streams of its own leaves every other
-- task's draws what they were.
local by_co = {} -- coroutine -> its task (the scheduler's)
local function streams_of(name, base)
  local p = {}
  return setmetatable(p, { __index = function(_, k)
    local f = function(_, ...)
      local co = coroutine.running()
      local task = co and by_co[co]
      local s = task and task.streams and task.streams[name] or base
      return s[k](s, ...)
    end
    rawset(p, k, f)
    return f
  end })
end
-- what the modules share (plan.broken: the recipes broken on purpose,
-- worker_objects.lua)
local W = { zklock = zklock, G = G, plan = plan, avoid = avoid,
  focus = focus, broken = plan.broken or {}, index = index, P = P,
  now = now, R = streams_of("R", R), R2 = streams_of("R2", R2),
  R3 = streams_of("R3", R3), R4 = streams_of("R4", R4),
  R5 = streams_of("R5", R5), OPS = {},
  MAX_DATA = 1040384 } -- (connect's default max_data: docs/limits.md)
local broken, OPS = W.broken, W.OPS

-- A callback of the workers' (on_revoke, on_lost): while it runs, no wait
-- is abandoned (the waiter below).
W.cb_depth = 0
local function pack(...) return { n = select("#", ...), ... } end
function W.callback(fn)
  return function(...)
    W.cb_depth = W.cb_depth + 1
    local r = pack(pcall(fn, ...))
    W.cb_depth = W.cb_depth - 1
    if not r[1] then error(r[2], 0) end
    return (table.unpack or unpack)(r, 2, r.n)
  end
end
dofile("spec/chaos/worker_log.lua")(W, logfile)
local L, unexpected = W.L, W.unexpected

-- (over TLS, the server takes a client with or without a certificate:
-- worker 1's clients present none, worker 2's do not check the server's
-- host, the others present one and check: docs/security.md, "TLS")
local tls = plan.tls
if tls and index % 3 ~= 0 then
  tls = { ca = tls.ca }
  if index % 3 == 1 then
    tls.cert, tls.key = nil, nil
  else
    tls.cert, tls.key, tls.verify_host = plan.tls.cert, plan.tls.key, false
  end
end

-- (following the ensemble turned off in some workers: run.lua)
local follow
if plan.no_follow and plan.no_follow[index] then follow = false end

local function connect()
  return zklock.connect(plan.hosts, { session_timeout = plan.st,
    connect_timeout = 30, id = "chaos " .. P, tls = tls,
    sasl = plan.sasl, follow_ensemble = follow })
end
local zk = W.new_client(assert(connect())) -- (the shared client, "P/0")

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
local tasks = {}
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
  -- (not a wait inside a callback of ours, W.callback: a release in an
  -- on_revoke that ran inside this task's acquire is not that acquire;
  -- the moving soak, seed 1795803399, had one raise "wait abandoned")
  if task.abandon_at and W.cb_depth == 0 and now() >= task.abandon_at then
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
  local co = coroutine.running()
  local parent = co and by_co[co]
  local task = { name = name .. "/" .. P, fn = fn,
    streams = parent and parent.streams } -- (a child draws as its parent)
  task.co = coroutine.create(function() return fn(task) end)
  by_co[task.co] = task
  tasks[#tasks + 1] = task
  return task
end

W.zk, W.connect, W.clients, W.ABANDON = zk, connect, clients, ABANDON
W.has_close, W.sleep, W.spawn = has_close, sleep, spawn
dofile("spec/chaos/worker_objects.lua")(W)
dofile("spec/chaos/worker_holds.lua")(W)
dofile("spec/chaos/worker_locks.lua")(W)
dofile("spec/chaos/worker_leases.lua")(W)
dofile("spec/chaos/worker_recipes.lua")(W)
local release_client, new_hold, sample, log_hold =
  W.release_client, W.new_hold, W.sample, W.log_hold

-- ---------------------------------------------------------------------------
-- the tasks

local WEIGHTS = { mutex = 6, smutex = 3, sem = 2, rw = 5, multi = 2,
  latch = 1, barrier = 1, burst = 2, revoke = 1 }

-- (a focus draws its ops three times as often)
local FOCUS_OPS = { downgrade = { "rw" },
  smutex_shared = { "smutex", "burst" }, abandon_lease = { "sem", "smutex",
  "multi" }, linger = { "mutex" }, big = { "mutex" },
  cohort = { "mutex", "burst", "rw" },
  cohort_write = { "mutex", "burst", "revoke" }, renew = { "mutex", "burst" },
  lease_ends = { "sem", "lrevoke", "multi" }, lease_write = { "sem", "smutex" },
  extend = { "mutex", "smutex", "sem", "rw", "multi" } }
local weights = {}
for op, w in pairs(plan.weights or WEIGHTS) do weights[op] = w end
if avoid.cohort_write then weights.revoke = nil end -- (R draws as before)
-- (issue 33: the workers revoke leases, and the locks multilocks hold)
if not avoid.lease_ends and not plan.weights then weights.lrevoke = 1 end
for _, op in ipairs(FOCUS_OPS[focus] or {}) do
  weights[op] = (weights[op] or 0) * 3
end

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

-- the selector: a short turn whenever chosen, requeued
local selector
while now() < plan.t0 do sleep(0.01) end -- (everyone connected by then)
if R:chance(0.5) then
  local t = plan.targets.sel1
  local stask = { name = "selector/" .. P }
  selector = zk:leader_selector(t.path, function(s)
    local h = new_hold("leader", t.name, stask, 0)
    local ask = function() return s:has_leadership() end
    local d = now() + 0.02 + R:float() * 0.2
    while now() < d and not s:is_interrupted() do
      sample(h, ask)
    end
    sample(h, ask)
    h.rel_t, h.rel_e, h.rel = now(), now(), "ok"
    log_hold(h)
  end)
  selector:start()
end

for i = 1, R:int(2, 4) do spawn("g" .. i, general) end
-- Holds on a TTL node (issue 36; gen.lua's t1): one acquirer, on a client
-- of its own whose id the worker's replacement shares, so that a
-- replacement takes back the node of the worker killed (docs/api.md,
-- "Holds that outlive the process"); the mutex op's hold on it, drawn on
-- streams of its own.
if plan.targets.t1 then
  local c = zklock.connect(plan.hosts, { session_timeout = plan.st,
    connect_timeout = 30, id = "chaos ttl " .. index, tls = tls,
    sasl = plan.sasl, follow_ensemble = follow })
  if c then
    W.new_client(c)
    clients[#clients + 1] = c
    W.ttl_client = c
    local base = index * 1000 + generation + 2500000
    local function ttl(task)
      task.force_shared = true
      while now() < plan.t_end do
        local ok, err = pcall(OPS.mutex, task, "t1")
        if not ok then unexpected(task, "mutex", err) end
        release_client(task)
        sleep(W.R:float() * 0.05)
      end
    end
    local task = spawn("ttl", ttl)
    task.streams = { R = G.stream(plan.seed, base),
      R2 = G.stream(plan.seed, base + 100), R3 = G.stream(plan.seed, base + 200),
      R4 = G.stream(plan.seed, base + 300), R5 = G.stream(plan.seed, base + 400) }
  else
    unexpected(nil, "connect", "the TTL acquirer's client")
  end
end
if focus == "cohort_write" then -- (revocations all along)
  spawn("revoker", function(task)
    while now() < plan.t_end do OPS.revoke(task) end
  end)
end
if plan.targets.b1.controller == index then spawn("ctl", W.controller) end
for _, w in ipairs(plan.targets.db1.members) do
  if w == index then spawn("db", W.member) end
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
          task.atimeout, W.client_id(task.acl), -1, -1)
        release_client(task)
        task.gone = true
        by_co[task.co] = nil
        tasks[i] = spawn(task.name:match("^[^/]*"), task.fn)
        tasks[i].streams = task.streams
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
for _, c in ipairs(clients) do W.close_client(c) end
L("D", P, now())
W.log:close()