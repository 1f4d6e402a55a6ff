-- The torture run: workers contend on one mutex of a 3-member ensemble,
-- through loopback proxies, while a fault injector (bounded in count and
-- time) in turn kills a holder, freezes a holder past its session timeout,
-- pauses a server, restarts one, kills the leader and cuts connections.
-- Then spec/torture_check.lua judges the workers' logs.
--
--   lua5.4 spec/torture.lua [short|full|broken]
--
-- prints one line (cycles, faults by kind, overlaps, lost updates,
-- orphans...) and exits 0 when it holds; "broken" runs a deliberately
-- broken lock and exits 0 when the checker reports the overlap.  `make
-- torture` runs "full" and "broken"; spec/torture_spec.lua runs "short".
local H = require "spec.helpers"
local C = dofile("spec/torture_check.lua")
local testing, zklock, core = H.testing, H.zklock, H.core

local T = {}

T.PROFILES = {
  -- work: seconds spent under the lock per hold (so that the faults fall
  -- while the workers contend).  The schedule is by count, not by the
  -- clock: workers go on past `cycles` until the injector has made all
  -- `faults` (every kind in turn, so faults >= #KINDS means every kind at
  -- least once), however slow the machine; `seconds` only bounds the
  -- whole run.
  short = { workers = 6, cycles = 80, work = 0.03, st = 2, faults = 6,
    seconds = 420 },
  full = { workers = 8, cycles = 200, work = 0.04, st = 3, faults = 18,
    seconds = 900 },
  broken = { workers = 5, cycles = 10, work = 0.002, st = 2, faults = 0,
    seconds = 60, broken = true },
}
T.KINDS = { "kill_holder", "stop_holder", "pause_server", "restart_server",
  "kill_leader", "cut" }

local function ppid(pid)
  local s = H.read("/proc/" .. pid .. "/stat")
  return s and tonumber(s:match("%) %S+ (%d+)"))
end

-- The worker (index, interpreter pid) holding the lock now, or nil.
local function holder(direct, lock, procs)
  local names = lock:participants(2)
  if not names or not names[1] then return nil end
  local data = direct:get(names[1], 2)
  local pid = data and tonumber(data:match("pid (%d+)"))
  if not pid then return nil end
  local parent = ppid(pid)
  for i, p in ipairs(procs) do
    if p.pid == parent then return i, pid end
  end
end

local function signal(pid, sig)
  os.execute(("kill -%s %d 2>/dev/null"):format(sig, pid))
end

--- Run a profile; returns the checker's summary (with `faults` by kind and
-- `line`, the one-line report).
function T.run(name)
  local prof = assert(T.PROFILES[name], "no profile " .. tostring(name))
  local cl = testing.cluster(3)
  local proxies, hosts = {}, {}
  local procs, logs, killed, dead = {}, {}, 0, {}
  local faults = {}
  local direct, gate
  local ok, err = pcall(function()
    for i, m in ipairs(cl.members) do
      proxies[i] = testing.proxy(m)
      hosts[i] = proxies[i]:connect_string()
    end
    direct = assert(zklock.connect(cl.connect_string,
      { session_timeout = 10 }))
    local tag = core.uuid():sub(1, 8)
    local path, counter = "/torture/lock-" .. tag, "/torture/count-" .. tag
    assert(direct:set(counter, "0"))
    local lock = direct:mutex(path)
    gate = H.tmpname("gate")
    local deadline = core.now() + prof.seconds
    local runtimes = H.runtimes() -- (workers of both, alternating)
    for i = 1, prof.workers do
      logs[i] = H.tmpname("torture-log")
      local rt = runtimes[(i - 1) % #runtimes + 1]
      procs[i] = H.spawn_lua(rt[1], rt[2], "spec/workers/torture.lua",
        table.concat(hosts, ","),
        path, counter, logs[i], prof.cycles, prof.st,
        prof.broken and "broken" or "lock", gate, deadline, prof.work,
        gate .. ".faults-done")
    end
    H.write(gate, "go")

    local function running()
      local n = 0
      for i, p in ipairs(procs) do
        if not dead[i] and not p:status() then n = n + 1 end
      end
      return n
    end

    -- the fault injector
    local injected, k = 0, 0
    local next_at = core.now() + 1.5
    -- (a bound on the whole run, far beyond what it takes: the workers
    -- stop at `deadline`, the injector a while before them)
    local stop_at = deadline - 30
    local inject = {
      kill_holder = function()
        if prof.workers - killed <= 5 then return false end -- keep 5
        local i, pid = holder(direct, lock, procs)
        if not i then return false end
        signal(pid, "KILL")
        dead[i], killed = true, killed + 1
        return true
      end,
      stop_holder = function()
        local i, pid = holder(direct, lock, procs)
        if not i then return false end
        signal(pid, "STOP")
        H.nap(prof.st + 1.5) -- the fault's length: past the timeout
        signal(pid, "CONT")
        return true
      end,
      pause_server = function()
        local m = cl.members[math.random(#cl.members)]
        m:pause()
        H.nap(prof.st + 1)
        m:resume()
        return true
      end,
      restart_server = function()
        local leader = cl:leader(10)
        for _, m in ipairs(cl.members) do
          if m ~= leader then m:restart(30); return true end
        end
        return false
      end,
      kill_leader = function()
        local leader = cl:leader(10)
        if not leader then return false end
        signal(leader:pid(), "KILL")
        H.nap(1)
        leader:stop(1) -- (bookkeeping: it is dead)
        leader:start(30)
        return true
      end,
      cut = function()
        for _, p in ipairs(proxies) do p:cut() end
        return true
      end,
    }
    while injected < prof.faults and core.now() < stop_at and
        running() > 0 do
      if core.now() >= next_at then
        local kind = T.KINDS[k % #T.KINDS + 1]
        if inject[kind]() then
          k = k + 1
          injected = injected + 1
          faults[kind] = (faults[kind] or 0) + 1
          assert(cl:wait_quorum(30))
          next_at = core.now() + prof.st
        else -- (no live holder right now, say): the same kind, soon
          next_at = core.now() + 0.2
        end
      end
      H.nap(0.05)
    end
    H.write(gate .. ".faults-done", "done") -- workers may finish now

    -- liveness: every worker not killed finishes
    local wait_until = deadline + 30
    while running() > 0 and core.now() < wait_until do H.nap(0.1) end
    for i, p in ipairs(procs) do
      if not dead[i] and not p:status() then p:kill("KILL") end
    end
    -- the killed holder's node goes with its session
    local orphans
    local t = core.now() + prof.st * 3 + 10
    repeat
      orphans = lock:participants(5)
      orphans = orphans and #orphans or -1
      if orphans ~= 0 then H.nap(0.1) end
    until orphans == 0 or core.now() > t
    local final = tonumber((direct:get(counter, 10)))
    local workers = {}
    for i = 1, prof.workers do workers[i] = C.parse(H.read(logs[i])) end
    T.last = C.check(workers, final, orphans, prof.cycles, killed)
  end)
  for _, p in ipairs(procs) do p:cleanup() end
  for _, f in ipairs(logs) do os.remove(f) end
  if gate then os.remove(gate); os.remove(gate .. ".faults-done") end
  if direct then direct:close() end
  for _, p in ipairs(proxies) do p:close() end
  cl:close()
  if not ok then error(err, 0) end
  local s = T.last
  s.faults = faults
  local fl = {}
  for _, kind in ipairs(T.KINDS) do fl[#fl + 1] = kind .. "=" .. (faults[kind] or 0) end
  s.line = ("torture %s: %d workers, %d holds, faults %s; overlaps=%d " ..
    "token_violations=%d lost_updates=%d (counter %s, accepted %d, " ..
    "unknown %d, rejected %d) incomplete=%d orphans=%d failed_acquires=%d")
    :format(name, s.workers, s.holds, table.concat(fl, " "), s.overlaps,
      s.token_violations, s.lost_updates, tostring(s.final), s.accepted,
      s.unknown, s.rejected, s.incomplete, s.orphans, s.failed_acquires)
  if s.first_overlap then
    s.line = s.line .. "; first overlap: " .. s.first_overlap
  end
  if s.failed_codes and s.failed_codes ~= "" then
    s.line = s.line .. "; failed acquires by code: " .. s.failed_codes
  end
  return s
end

if not pcall(debug.getlocal, 4, 1) then -- run as a script
  local name = arg[1] or "short"
  math.randomseed(os.time())
  local s = T.run(name)
  local good = name == "broken" and s.overlaps > 0 or s.ok
  print(s.line .. (good and ": PASS" or ": FAIL"))
  os.exit(good and 0 or 1)
end

return T
