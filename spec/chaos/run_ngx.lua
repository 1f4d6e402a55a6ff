-- The chaos run's nginx instances (a profile's `nginx`: how many; docs/
-- testing.md, "The chaos run"): each a real nginx of 2 workers running
-- spec/chaos/chaos_ngx.lua against the run's ensemble, loaded by curl
-- loops until the run's end; and the fault that kills one of their
-- workers with SIGKILL, whether it holds a lock, waits for one or neither.
-- The driver then lists the killed worker's nodes until they have gone
-- with its session, waits for the master's new worker to connect its own,
-- and logs K: who, when, the nodes it held and those it waited with at
-- the first listing (-1: no listing answered), when none was left (-1:
-- not within the bound), the new worker's pid (0: none connected)
-- (spec/chaos/checks/killed.lua).
local core = require "zklock.core"
local N = require "spec.nginx"

local X = {}

local WORKERS = 2    -- each instance's
local LOADERS = 3    -- each instance's concurrent requests

local ROOT = os.getenv("PWD")

--- Starts `n` instances for `plan` (written to plan_file) and their load
-- until plan.t_end; their logs go to a directory of their own.  Returns
-- the set: { instances, logs (dir), loads (pids), targets }.
function X.start(H, n, plan, plan_file)
  local set = { instances = {}, loads = {}, targets = {},
    logs = H.tmpname("chaos-ngx") }
  assert(os.execute("mkdir -p '" .. set.logs .. "'"))
  for _, name in ipairs(plan.order) do
    if plan.targets[name].kind == "mutex" then
      set.targets[#set.targets + 1] = plan.targets[name]
    end
  end
  -- (the servers a new worker connects to: the ensemble's members now,
  -- kept by the driver as they change, X.hosts; the plan's are the first
  -- ones, all gone once the voting set has moved)
  set.hosts_file = H.tmpname("chaos-ngx-hosts")
  H.write(set.hosts_file, plan.hosts)
  local env = ("CHAOS_ROOT='%s' CHAOS_PLAN='%s' CHAOS_LOGS='%s' " ..
    "CHAOS_HOSTS='%s'"):format(ROOT, plan_file, set.logs, set.hosts_file)
  local ok, err = pcall(function()
    for i = 1, n do
      set.instances[i] = N.start({ hosts = plan.hosts, workers = WORKERS,
        conf = ROOT .. "/spec/chaos/nginx.conf", env = env })
    end
  end)
  if not ok then -- (those started stop: the caller has no set to stop)
    for _, inst in ipairs(set.instances) do inst:stop() end
    error(err, 0)
  end
  -- (the load: curl loops that stop by themselves at the run's end, in a
  -- process group of their own, killed at stop if still there)
  local secs = math.max(1, math.floor(plan.t_end - core.now()))
  for _, inst in ipairs(set.instances) do
    local script = H.tmpname("chaos-load")
    -- (curl's own bound above a request's longest: the acquire, work,
    -- a fenced write and the release, each bounded by session timeouts;
    -- a refused connection waits a moment before the next)
    H.write(script, ("end=$(( $(date +%%s) + %d ))\nfor i in $(seq %d); " ..
      "do\n  ( while [ $(date +%%s) -lt $end ]; do curl -s -m %d -o " ..
      "/dev/null '%s' || sleep 0.2; done ) &\ndone\nwait\n"):format(secs,
      LOADERS, math.ceil(plan.st * 10 + 30), inst:url("/hold")))
    local fh = assert(io.popen(("setsid sh '%s' >/dev/null 2>&1 & echo $!")
      :format(script)))
    set.loads[#set.loads + 1] = tonumber(fh:read("*l"))
    fh:close()
  end
  return set
end

local proc_stat = require("zklock.testing")._proc_stat
local function alive(pid)
  local s = proc_stat(pid)
  return s ~= nil and s ~= "Z" and s ~= "X"
end

--- The fault: one worker of one instance (drawn from rf) killed with
-- SIGKILL; E logs the K line.  Returns the worker's pid as a string, or
-- false when there was none to kill.
function X.kill(H, set, rf, direct, E, st)
  local inst = set.instances[rf:int(1, #set.instances)]
  local ws = {}
  for _, w in ipairs(inst:workers()) do
    if alive(w) then ws[#ws + 1] = w end
  end
  if #ws == 0 then return false end
  local pid = ws[rf:int(1, #ws)]
  local id = "chaos ngx " .. pid
  os.execute("kill -KILL " .. pid .. " 2>/dev/null")
  local deadline = core.now() + 5
  while alive(pid) and core.now() < deadline do H.nap(0.01) end
  local t_kill = core.now()
  -- its nodes, listed once it can make no more, by the id it writes in
  -- them (the first of a queue holds); again until none is left: when
  -- they went (a create it sent before dying lands in a later listing)
  local function its_nodes()
    local held, queued = 0, 0
    for _, t in ipairs(set.targets) do
      local recs = direct:mutex(t.path):participants(2, true)
      if not recs then return nil end
      for i, r in ipairs(recs) do
        if r.id == id then
          if i == 1 then held = held + 1 else queued = queued + 1 end
        end
      end
    end
    return held, queued
  end
  local held, queued, gone = -1, -1, -1 -- (-1: never listed)
  deadline = t_kill + 3 * st + 10
  repeat
    local h, q = its_nodes()
    if h and held < 0 then held, queued = h, q end
    if h and h + q == 0 then gone = core.now() else H.nap(0.1) end
  until gone >= 0 or core.now() > deadline
  -- the master starts another worker, which opens its own session
  local fresh = 0
  deadline = core.now() + 15
  repeat
    for _, w in ipairs(inst:workers()) do
      if w ~= pid and alive(w) and not H.contains(ws, w) then
        local log = H.read(("%s/ngx-%d.log"):format(set.logs, w)) or ""
        if log:find("\nZ " .. w .. "%.0/0 connected ") or
            log:find("^Z " .. w .. "%.0/0 connected ") or
            log:find("\nNS " .. w .. "%.0 connected ") then
          fresh = w
        end
      end
    end
    if fresh == 0 then H.nap(0.05) end
  until fresh ~= 0 or core.now() > deadline
  E("K", tostring(pid), ("%.6f"):format(t_kill), held, queued,
    ("%.6f"):format(gone), fresh)
  if fresh == 0 then -- (why not, for the finding: KW)
    local seen = {}
    for _, w in ipairs(inst:workers()) do
      if w ~= pid and not H.contains(ws, w) then
        local log = H.read(("%s/ngx-%d.log"):format(set.logs, w)) or ""
        local last = {}
        for line in log:gmatch("[^\n]+") do
          if line:find("^[ZSE] ") or line:find("^NS ") then
            last[#last + 1] = line
          end
        end
        seen[#seen + 1] = ("new worker %d (%s): %s"):format(w,
          alive(w) and "alive" or "gone",
          table.concat(last, " | ", math.max(1, #last - 2)))
      end
    end
    local errs = {}
    for line in inst:log():gmatch("[^\n]+") do
      if line:find("%[error%]") or line:find("%[alert%]") or
          line:find("%[crit%]") then errs[#errs + 1] = line end
    end
    E("KW", tostring(pid), (#seen > 0 and table.concat(seen, "; ") or
      "no new worker") .. "; error.log: " ..
      (table.concat(errs, " | ", math.max(1, #errs - 2)):gsub("\n", " ")))
  end
  return tostring(pid)
end

--- The ensemble's members changed: the servers a new worker connects to
-- (as a deployment keeps its nginx's ZooKeeper hosts current).
function X.hosts(H, set, hosts)
  H.write(set.hosts_file .. ".new", hosts)
  assert(os.rename(set.hosts_file .. ".new", set.hosts_file))
end

--- The instances stopped (gracefully: their sessions end, their nodes go
-- at once), the load with them.
function X.stop(set)
  for _, pid in ipairs(set.loads) do
    if alive(pid) then
      os.execute(("kill -TERM -- -%d 2>/dev/null"):format(pid))
    end
  end
  set.loads = {}
  for _, inst in ipairs(set.instances) do inst:stop() end
end

--- Waits (bounded) for the load to end by itself.
function X.wait_load(H, set, until_t)
  for _, pid in ipairs(set.loads) do
    while alive(pid) and core.now() < until_t do H.nap(0.1) end
  end
end

--- The workers' log files.
function X.logs(set)
  local out = {}
  local p = io.popen("ls '" .. set.logs .. "' 2>/dev/null")
  for name in p:lines() do out[#out + 1] = set.logs .. "/" .. name end
  p:close()
  return out
end

--- Removes the logs (after keeping them, with keep(file, as)).
function X.cleanup(set, keep, remove)
  for _, f in ipairs(X.logs(set)) do
    keep(f, f:match("[^/]+$"))
  end
  if remove then
    os.execute("rm -rf '" .. set.logs .. "'")
    os.remove(set.hosts_file)
  end
end

return X
