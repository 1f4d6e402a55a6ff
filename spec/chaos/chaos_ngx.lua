-- The chaos run's nginx participant (spec/chaos/run.lua, a profile with
-- `nginx`; docs/testing.md, "The chaos run"): every worker of a real nginx
-- with zklock.ngx opens its session in init_worker, and each request of
-- GET /hold takes one of the plan's mutexes, works under it sampling
-- is_held(), may write the target's counter fenced by its token, and
-- releases.  Its log is a chaos worker's (spec/chaos/worker_log.lua,
-- shared as it is), process tag "<pid>.0", plus the lines the driver
-- needs when it kills the worker with SIGKILL mid-hold: O (a hold begun,
-- logged as the acquire returns: id, target, task, t0, -1, token, pass,
-- node) and OT (id, each newer is_held() true).  A
-- hold with an O and no H was killed: the checker gives it the end it
-- had, its last true answer (spec/chaos/checks/killed.lua).
local zngx = require "zklock.ngx"
local core = require "zklock.core"

local M = {}

local W -- (this worker's: worker_log.lua's table)
local TARGETS = {} -- the plan's mutexes
local n_req = 0

function M.init_worker()
  local root = assert(os.getenv("CHAOS_ROOT"), "CHAOS_ROOT is not set")
  local plan = dofile(assert(os.getenv("CHAOS_PLAN"), "no CHAOS_PLAN"))
  local G = dofile(root .. "/spec/chaos/gen.lua")
  local pid = ngx.worker.pid()
  local P = ("%d.0"):format(pid)
  W = { plan = plan, P = P, now = core.now, R = G.stream(plan.seed, pid),
    MAX_DATA = 1040384, sleep = ngx.sleep }
  dofile(root .. "/spec/chaos/worker_log.lua")(W,
    ("%s/ngx-%d.log"):format(assert(os.getenv("CHAOS_LOGS")), pid))
  W.L("S", P, pid, W.now())
  for _, name in ipairs(plan.order) do
    if plan.targets[name].kind == "mutex" then
      TARGETS[#TARGETS + 1] = plan.targets[name]
    end
  end
  -- (the moving profile's workers reach the members themselves, and
  -- follow the ensemble: so does zklock.ngx; a worker started after the
  -- members changed connects to those of now, which the driver keeps in
  -- CHAOS_HOSTS: the plan's may all be gone, docs/ensemble.md)
  local f = io.open(os.getenv("CHAOS_HOSTS") or "")
  local hosts = f and f:read("*l") or plan.hosts
  if f then f:close() end
  W.zk = W.new_client(assert(zngx.connect(hosts, {
    session_timeout = plan.st, connect_timeout = 30,
    id = "chaos ngx " .. pid })))
  -- (connected already: on_state tells of changes from its call on, and
  -- the first connection may come before it: the moving soak, seed
  -- 1795803399, had a new worker connected with no Z line)
  if W.zk:state() == "connected" then
    W.L("Z", W.client_id(W.zk), "connected", W.now())
  end
  -- (its session's state 5 and 15 s on, for the driver's look at a new
  -- worker not seen connected: run_ngx.lua, KW; no checker reads NS)
  for _, d in ipairs({ 5, 15 }) do
    ngx.timer.at(d, function()
      W.L("NS", P, W.zk:state(), W.zk:servers(), W.now())
    end)
  end
end

-- Ask is_held() (W.sample), and log each newer true answer (OT): a hold
-- cut short by SIGKILL ends, for the checkers, at its last one.
local function sample(h, check)
  local before = h.t1
  local held = W.sample(h, check)
  if h.t1 > before then W.L("OT", h.id, h.t1) end
  return held
end

-- Work for about d seconds under hold h, sampling is_held().
local function work(h, check, d)
  local t = W.now() + d
  repeat
    sample(h, check)
    ngx.sleep(W.R:float() * 0.03)
  until W.now() >= t
  sample(h, check)
end

--- GET /hold: one hold of a mutex drawn from the plan.
function M.hold()
  local R = W.R
  n_req = n_req + 1
  local t = TARGETS[R:int(1, #TARGETS)]
  local task = { name = ("n%d/%s"):format(n_req, W.P) }
  -- (the target's cohort options, as the workers' (worker_objects.lua):
  -- a target out of lock cohorts has a node per acquire, and the fifo
  -- checker holds it to its nodes' order; nginx's used the default, a
  -- cohort, and jumped the queue of a target out of them: the moving
  -- soak's fifo finding, seed 1795815466.  No linger: a request's lock
  -- object is used once)
  local m = W.made_on(W.zk:mutex(t.path, { cohort = t.cohort,
    pass_limit = t.pass_limit }), W.zk)
  local timeout = R:pick({ 0.5, 2, 2, W.plan.st * 2 })
  W.call_start(task, m)
  local t_s = W.now()
  local ok, got, _, code = pcall(m.acquire, m, timeout)
  if not ok then
    W.log_acquire("mutex", t.name, task, t_s, "raised", "-", timeout)
    W.unexpected(task, "mutex:acquire", got)
    return ngx.say("raised")
  end
  if not got then
    W.log_acquire("mutex", t.name, task, t_s, "fail", code, timeout)
    return ngx.say("not held: ", code)
  end
  -- (O before anything else: a hold is on record from its acquire; its
  -- first is_held() true follows as an OT)
  local token, pass = m:token()
  task.ts = t_s -- (the acquire's start: new_hold takes it)
  local h = W.new_hold("mutex", t.name, task, token, m:node(), nil, pass)
  W.L("O", h.id, t.name, task.name, h.t0, -1, h.token, h.pass, h.node)
  W.log_acquire("mutex", t.name, task, t_s, "ok", "-", timeout)
  local check = function() return m:is_held(), m:node() end
  local held_ok, err = pcall(function()
    sample(h, check)
    work(h, check, R:pick({ 0.02, 0.1, 0.3, 0.6 }))
    if R:chance(0.5) then
      W.fenced_increment(task, t, m, h.token, false, h)
      sample(h, check)
    end
  end)
  if not held_ok then W.unexpected(task, "mutex hold", err) end
  local _, rerr = W.released(h, function() return m:release() end)
  if h.rel == "raised" then W.unexpected(task, "mutex:release", rerr) end
  W.log_hold(h)
  ngx.say(h.rel)
end

return M
