-- The chaos run (docs/testing.md, "The chaos run"): worker processes of
-- both runtimes run random programs over every recipe and option
-- (spec/chaos/worker.lua), drawn from one seed, against real servers
-- behind fault-injecting proxies, while this process injects faults and,
-- as the chaos actor, deletes lock nodes and revokes holders.  Then
-- spec/chaos/check.lua judges the logs.
--
--   lua5.4 spec/chaos/run.lua [PROFILE [SEED]]      (make chaos, make soak)
--
-- prints the seed first and one line at the end; exits 0 when no checker
-- found anything ("broken" profiles: when every checker they aim at did).
local H = require "spec.helpers"
local G = dofile("spec/chaos/gen.lua")
local K = dofile("spec/chaos/check.lua")
local RN = dofile("spec/chaos/run_ngx.lua")
local testing, zklock, core = H.testing, H.zklock, H.core

local C = {}

-- faults (the ensemble profiles'; `moving`'s: reconfig, membership
-- changed by dynamic reconfiguration, the clients following it (issue
-- 35): a follower, the leader or the observer replaced by a new member,
-- or the whole voting set moved as follow_spec moves it, one member at
-- a time): kill (SIGKILL a worker; a new one takes its place), stop
-- (SIGSTOP past the session), pause (a server frozen past the session),
-- restart (a server, or a follower), kill_leader (ensemble), cut (every
-- connection through the proxies), expire (the proxies stall both ways
-- past the session: every session through them expires); `moving`'s
-- partition: a minority of the members (the leader perhaps among them)
-- cut off from the rest by a packet filter for twice the session
-- timeout, then healed (zklock.testing's cluster:cut)
C.FAULTS = { "kill", "stop", "pause", "restart", "cut", "expire",
  "kill_leader" }

-- The compositions issue 22 named, each a switch a profile's `avoid` can
-- turn off (every profile has them all on since issue 22 fixed them): a
-- downgrade whose write hold ends other than by release, by max_hold or
-- by the chaos actor's deletion (item 1); a semaphore mutex shared by
-- coroutines, whose holds end by max_hold, deletion or a fault (item 2);
-- waits abandoned in a semaphore, semaphore mutex or multilock acquire
-- (item 3); lock caching (linger) with a contender (item 4); long paths
-- with data at max_data (item 5: a guarded release too big for the
-- server, refused).
-- Issue 25 added lock cohorts (a client's waiters queued in front of one
-- node, holds passed with no request: targets draw them on or off).
-- Issue 32 added two that meet in a cohort (they keep cohorts in when
-- they are the one kept): cohort_write, a write with the release of a
-- hold that ends meanwhile (max_hold running out as the holder works up
-- to it, an on_revoke that releases: the workers revoke too; with_lock's
-- update); renew, cohort waiters queued long when a session expires and
-- the client renews it (focused, a profile with no faults gets the
-- proxies' stall, "expire", every ~4 s).
-- Issue 33 added three (each drawn from worker streams of its own, so
-- that the programs of the seeds on record stay what they were when it
-- is left out): lease_ends, leases with on_lost and on_revoke (set before
-- or after the acquire, releasing or not), revoked by the chaos actor and
-- the workers, their nodes deleted by the chaos actor, and a multilock's
-- on_lost and on_revoke; lease_write, a lease's fenced_set and write with
-- the release, with_lock's update under a semaphore of several leases
-- (a counter kept exact) and under a semaphore mutex; extend, on every
-- kind of hold, before its limit, racing it, after it, and math.huge.
C.COMPOSITIONS = { "downgrade", "smutex_shared", "abandon_lease",
  "linger", "big", "cohort", "cohort_write", "renew", "lease_ends",
  "lease_write", "extend", "ttl" }
-- Issue 36 added ttl: holds on TTL nodes (gen.lua's t1), one acquirer per
-- worker on streams of its own, its id shared with its replacement.
-- (How often the servers look for expired TTL nodes: a killed acquirer's
-- node nobody takes back outlives its TTL by up to that.)
local TTL_CHECK = 0.5
-- (what a composition keeps in when it is the one kept: extend meets
-- cohort passes, lingering nodes and downgrades)
C.NEEDS = { cohort_write = { cohort = true }, renew = { cohort = true },
  extend = { cohort = true, linger = true, downgrade = true } }
-- The seeds that found them on the code before issue 22, issue 32's
-- defects 1 (cohort_write) and 3 (renew) on the code before its fixes,
-- and issue 33's multilock released in its callback, whose other members
-- raised (lease_ends) (docs/testing.md, "What the chaos run found"):
-- make chaos-found replays each, focused; on the fixed code, every one
-- passes.
C.FOUND = { { "downgrade", 2 }, { "smutex_shared", 1 },
  { "abandon_lease", 2 }, { "linger", 2 }, { "big", 1 },
  { "cohort_write", 1 }, { "renew", 4 }, { "lease_ends", 1 } }

-- How the sessions of a standalone run are secured (docs/security.md):
-- drawn from the seed (its own stream: the other draws stay as they
-- were), or TRANSPORT= / transport= chooses.  An ensemble run is plain
-- (zklock.testing's ensembles have no TLS).
C.TRANSPORTS = { "plain", "tls", "sasl" }

C.PROFILES = {
  -- every recipe broken on purpose (worker.lua's plan.broken): chaos_spec
  -- requires each checker to find its own
  broken = { workers = 4, seconds = 20, st = 2, chaos_every = 0,
    broken = { mutex = true, smutex = true, sem = true, rw = true,
      latch = true, barrier = true, dbarrier = true, leak = true,
      fifo = true, tokens = true },
    -- (leaders, leases and read/write more often, so that two at once
    -- are met)
    weights = { mutex = 8, smutex = 3, sem = 4, rw = 8, multi = 1,
      latch = 4, barrier = 2, burst = 2 } },
  -- make test: one standalone server, 20 s of load, a fault every ~3 s
  short = { workers = 4, seconds = 20, st = 2, fault_every = 3,
    chaos_every = 1.5, faults = { "kill", "stop", "cut", "expire", "pause",
      "restart" } },
  -- no faults, no chaos actor: the recipes and options alone, issue 22's
  -- compositions included (ONLY= and FOCUS= pick one)
  quick = { workers = 4, seconds = 10, st = 2, chaos_every = 0 },
  -- make soak: a 3-member ensemble, 30 minutes, every fault kind
  soak = { workers = 6, seconds = 1800, st = 2, fault_every = 4,
    chaos_every = 2, ensemble = true, faults = C.FAULTS },
  -- make chaos: the same for 3 minutes
  chaos = { workers = 5, seconds = 180, st = 2, fault_every = 6,
    chaos_every = 1.5, ensemble = true, faults = C.FAULTS },
  -- make chaos PROFILE=moving: an ensemble of 5 members and an observer
  -- that takes dynamic reconfiguration, the workers connected to the
  -- members themselves (no proxy: they follow the ensemble, issue 35),
  -- membership changes among the faults; and 2 nginx instances of 2
  -- workers with zklock.ngx under load, their workers killed with SIGKILL
  -- among the faults (nginx_kill: run_ngx.lua)
  moving = { workers = 5, seconds = 180, st = 3, fault_every = 3.5,
    chaos_every = 1.5, ensemble = 5, observers = 1, reconfig = true,
    direct = true, nginx = 2, partitions = true,
    faults = { "reconfig", "reconfig", "kill_leader", "pause", "restart",
      "partition", "nginx_kill", "nginx_kill" } },
}

--- A profile like `name`'s, with only the composition `only` left in
-- (nil or "all": every one; "none": none of them); with `focus`, its ops
-- drawn more often.
function C.only(name, only, focus)
  local p = {}
  for k, v in pairs(C.PROFILES[name]) do p[k] = v end
  p.name = name .. (only and "/" .. only or "") .. (focus and "+focus" or "")
  p.avoid = {}
  for _, k in ipairs(C.COMPOSITIONS) do
    p.avoid[k] = only ~= nil and only ~= "all" and k ~= only and
      not (C.NEEDS[only] and C.NEEDS[only][k])
  end
  p.focus = focus and only or nil
  if p.focus == "renew" and not p.fault_every then
    p.faults, p.fault_every = { "expire" }, 4
  end
  return p
end

local function delete(zk, path)
  local op = zk:_delete(path)
  if not op then return end
  H.await(zk, op, core.now() + 5)
end

-- lock nodes of a target, as the chaos actor sees them (a semaphore's:
-- its leases)
local function lock_nodes(zk, t)
  local dir = (t.kind == "smutex" or t.kind == "sem") and
    t.path .. "/leases" or t.path
  local ok, names = pcall(H.children, zk, dir)
  local out = {}
  for _, n in ipairs(ok and names or {}) do
    if H.is_lock_node(n) then
      out[#out + 1] = dir .. "/" .. n
    end
  end
  table.sort(out)
  return out
end

--- Run `profile` (a name or a table) with `seed`; returns the checker's
-- summary, with `line`, `seed`, `faults` (by kind), `elapsed`.
function C.run(profile, seed, opts)
  opts = opts or {}
  opts.keep = opts.keep or os.getenv("CHAOS_KEEP") == "1"
  local name = type(profile) == "string" and profile or profile.name or
    "custom"
  local prof = type(profile) == "table" and profile or
    assert(C.PROFILES[profile], "no profile " .. tostring(profile))
  seed = seed or (os.time() + core.pid()) % 2147483646 + 1
  local log = opts.log or print
  log(("chaos %s: seed %d"):format(name, seed))
  local st = prof.st
  local srv, cl, members
  local transport = "plain"
  if prof.ensemble then
    -- (partitions: a packet filter's, where this machine has one)
    local cuts, why
    if prof.partitions then
      cuts, why = testing.partitions()
      if not cuts then log("chaos: no partition faults here: " .. why) end
    end
    cl = testing.cluster(prof.ensemble == true and 3 or prof.ensemble,
      { reconfig = prof.reconfig, partitions = cuts or nil,
        ttl_check = TTL_CHECK })
    for _ = 1, prof.observers or 0 do assert(cl:add({ observer = true })) end
    members = cl.members -- (moved in place by a reconfiguration)
  else
    transport = opts.transport or prof.transport or
      C.TRANSPORTS[G.stream(seed, 55):int(1, #C.TRANSPORTS)]
    -- (TLS: a client certificate wanted, not needed, so that the
    -- workers' clients without one take part: worker.lua)
    srv = testing.server({ tls = transport == "tls", ttl_check = TTL_CHECK,
                           client_auth = transport == "tls" and "want" or nil,
                           sasl = transport == "sasl" })
    members = { srv }
  end
  local proxies, hosts = {}, {}
  local procs, direct = {}, nil
  local events = H.tmpname("chaos-driver")
  local efh = assert(io.open(events, "w"))
  efh:setvbuf("line")
  local function E(...) efh:write(table.concat({ ... }, " "), "\n") end
  local faults, summary = {}, nil
  local plan_file = H.tmpname("chaos-plan")
  local ngx_set -- (a profile's nginx instances: run_ngx.lua)
  local t_start = core.now()
  local ok, err = pcall(function()
    for i, m in ipairs(members) do
      proxies[i] = testing.proxy(m)
      hosts[i] = proxies[i]:connect_string()
    end
    local direct_hosts = {}
    for i, m in ipairs(members) do direct_hosts[i] = m.connect_string end
    direct = assert(zklock.connect(table.concat(direct_hosts, ","),
      { session_timeout = 10, tls = srv and srv.tls,
        sasl = srv and srv.sasl }))
    local root = "/chaos/" .. core.uuid():sub(1, 8)
    local avoid = prof.avoid or {}
    local plan = G.plan(seed, root, prof.workers, avoid, prof.focus)
    plan.avoid = avoid
    -- (a profile whose ensemble moves: the members themselves, followed)
    plan.hosts = prof.direct and cl.connect_string or table.concat(hosts, ",")
    plan.tls, plan.sasl = srv and srv.tls, srv and srv.sasl
    -- (follow_ensemble = false, drawn per worker, where the ensemble does
    -- not move: it must change nothing there; where it moves, every
    -- client follows, or it would lose its session for good when its
    -- members are gone: docs/ensemble.md)
    if not prof.reconfig then
      local rn = G.stream(seed, 61)
      plan.no_follow = {}
      for i = 1, prof.workers do plan.no_follow[i] = rn:chance(0.5) end
    end
    plan.st = st
    plan.weights = prof.weights
    plan.db_period = 4
    plan.t0 = core.now() + 3 -- (the workers connect meanwhile)
    plan.t_end = plan.t0 + prof.seconds
    plan.broken = prof.broken
    -- (the contender that loses its place on m3 is found by the time
    -- order of queueing, which a lock cohort's targets do not keep)
    if prof.broken and prof.broken.fifo then plan.targets.m3.cohort = false end
    plan.focus = prof.focus
    H.write(plan_file, "return " .. G.serialize(plan))
    local runtimes = H.runtimes()

    local function spawn(i, gen)
      local rt = runtimes[(i - 1) % #runtimes + 1]
      local logfile = H.tmpname("chaos-log-" .. i .. "." .. gen)
      local p = H.spawn_lua(rt[1], rt[2], "spec/chaos/worker.lua", plan_file,
        i, gen, logfile)
      p.index, p.gen, p.logfile = i, gen, logfile
      return p
    end
    local slots = {}
    for i = 1, prof.workers do
      slots[i] = { spawn(i, 0) }
    end
    local function live(i) return slots[i][#slots[i]] end
    for i = 1, prof.workers do procs[#procs + 1] = live(i) end

    local rf = G.stream(seed, 77)  -- the fault schedule
    local rc = G.stream(seed, 99)  -- the chaos actor
    local next_fault = plan.t0 + (prof.fault_every or 0)
    local next_chaos = plan.t0 + (prof.chaos_every or 0)
    local fault_stop = plan.t_end - 2 * st
    local targets = {}
    for _, n in ipairs(plan.order) do
      local k = plan.targets[n].kind
      if k == "mutex" or k == "rw" or k == "smutex" or
          (k == "sem" and not avoid.lease_ends) then -- (leases: issue 33)
        targets[#targets + 1] = plan.targets[n]
      end
    end

    ngx_set = prof.nginx and RN.start(H, prof.nginx, plan, plan_file)
    local inject = dofile("spec/chaos/faults.lua")({ H = H, prof = prof,
      rf = rf, members = members, cl = cl, proxies = proxies, st = st,
      live = live, spawn = spawn, slots = slots, procs = procs,
      ngx = ngx_set, RN = RN, direct = direct, E = E })

    -- The token checker's process (issue 36): about once a second, the
    -- current holder of a mutex or semaphore mutex, listed, and its
    -- token and the one listed before on that target asked of
    -- zklock.check_token; each answer logged (T) for checks/tokens.lua.
    -- (broken.tokens: a check that says every token holds, to prove it)
    local rk = G.stream(seed, 111)
    local next_token = plan.t0 + 1
    local ttargets, seen_token = {}, {}
    for _, n in ipairs(plan.order) do
      local k = plan.targets[n].kind
      if k == "mutex" or k == "smutex" then
        ttargets[#ttargets + 1] = plan.targets[n]
      end
    end
    local check_token = prof.broken and prof.broken.tokens and
      function() return true end or zklock.check_token
    local function token_step()
      local t = ttargets[rk:int(1, #ttargets)]
      local lk = t.kind == "mutex" and direct:mutex(t.path) or
        direct:semaphore(t.path, 1)
      local recs = lk:holders(2)
      local ask = { recs and recs[1] and recs[1].token, seen_token[t.name] }
      -- (broken: also a token that is not the holder's, for certain, so
      -- that the lie is there to find whenever a hold lasts over a check)
      if prof.broken and prof.broken.tokens and ask[1] then
        ask[2] = ask[1] - 1
      end
      if ask[1] then seen_token[t.name] = ask[1] end
      for i = 1, 2 do
        local token = ask[i]
        if token then
          local c0 = core.now()
          local ok, _, code = check_token(direct, t.path, token,
            { timeout = 2 })
          local c1 = core.now()
          E("T", t.name, ("%.0f"):format(token), ("%.6f"):format(c0),
            ("%.6f"):format(c1), ok == true and "true" or ok == false and
            "false" or tostring(code))
        end
      end
    end

    local function chaos_step()
      local t = targets[rc:int(1, #targets)]
      if rc:chance(0.5) then
        local nodes = lock_nodes(direct, t)
        if avoid.downgrade then -- (a downgrader's write node: item 1)
          for i = #nodes, 1, -1 do
            if nodes[i]:find("__WRIT__", 1, true) then table.remove(nodes, i) end
          end
        end
        if #nodes == 0 then return end
        local node = nodes[rc:int(1, #nodes)]
        E("X", ("%.6f"):format(core.now()), node)
        delete(direct, node)
      else
        E("Y", ("%.6f"):format(core.now()), t.name)
        -- (a semaphore's: as many of its leases as drawn)
        zklock.revoke(direct, t.path, t.kind == "smutex" and 1 or
          t.kind == "sem" and rc:int(1, t.n) or nil)
      end
    end

    while core.now() < plan.t_end do
      local now = core.now()
      if prof.fault_every and now >= next_fault and now < fault_stop then
        local kind = rf:pick(prof.faults)
        local t0 = core.now()
        local who = inject[kind]()
        if who then
          E("F", kind, ("%.6f"):format(t0), ("%.6f"):format(core.now()), who)
          faults[kind] = (faults[kind] or 0) + 1
          if cl then cl:wait_quorum(30) end
        end
        next_fault = core.now() + prof.fault_every * (0.5 + rf:float())
      end
      if prof.chaos_every and prof.chaos_every > 0 and now >= next_chaos then
        pcall(chaos_step)
        next_chaos = core.now() + prof.chaos_every * (0.5 + rc:float())
      end
      if #ttargets > 0 and now >= next_token and now < plan.t_end then
        pcall(token_step)
        next_token = core.now() + 0.5 + rk:float()
      end
      H.nap(0.05)
    end

    -- every worker ends by itself (bounded); those that do not are hung
    local processes = {}
    local wait_until = plan.t_end + 60
    for _, p in ipairs(procs) do
      while not p.killed and not p:status() and core.now() < wait_until do
        H.nap(0.1)
      end
      local rec = { p = p.index .. "." .. p.gen, killed = p.killed,
        status = p:status() }
      if not p.killed and not rec.status then
        rec.hung = true
        p:kill("KILL")
      elseif not p.killed and rec.status ~= 0 then
        rec.output = (p:output():gsub("%s+", " ")):sub(1, 600)
      end
      processes[#processes + 1] = rec
    end
    -- the nginx instances' load ends by itself too; then they stop
    if ngx_set then
      RN.wait_load(H, ngx_set, core.now() + 4 * st + 15)
      RN.stop(ngx_set)
    end
    -- what the workers wrote, and what is left
    local finals = {}
    local named = {}
    for _, n in ipairs(plan.order) do named[#named + 1] = n end
    for _, n in ipairs(plan.extra or {}) do named[#named + 1] = n end
    for _, n in ipairs(named) do
      local t = plan.targets[n]
      if t.counter then
        local data, _, code = direct:get(t.counter, 10)
        if data or code == "no_node" then
          finals[n] = tonumber(data and data:match("^%d+") or "0")
        end
        -- (the write it names: checks/answers.lua)
        local tag = data and data:match("^%d+ (%S+)")
        if tag then E("G", n, tag, ("%.6f"):format(core.now()), "final") end
      end
      if t.notes then -- (a semaphore's notes: what they name, no count)
        local data = direct:get(t.notes, 10)
        local tag = data and data:match("^%d+ (%S+)")
        if tag then
          E("G", n .. "n", tag, ("%.6f"):format(core.now()), "final")
        end
      end
    end
    direct:close()
    direct = nil
    local orphans
    local deadline = core.now() + 3 * st + 10
    repeat
      orphans = {}
      for _, m in ipairs(members) do
        for _, p in ipairs(H.ephemerals(m)) do
          if p:sub(1, 7) == "/chaos/" then orphans[#orphans + 1] = p end
        end
        if #orphans > 0 then break end
      end
      if #orphans > 0 then H.nap(0.2) end
    until #orphans == 0 or core.now() > deadline
    efh:close()
    local logs = K.parse(H.read(events))
    for _, p in ipairs(procs) do K.parse(H.read(p.logfile), logs) end
    for _, f in ipairs(ngx_set and RN.logs(ngx_set) or {}) do
      K.parse(H.read(f), logs)
    end
    summary = K.check(logs, { plan = plan, finals = finals, st = st,
      processes = processes, orphans = orphans })
    summary.t_start = plan.t0
  end)
  -- CHAOS_KEEP_DIR=dir: the logs copied there (the run directory of
  -- make chaos goes at its end)
  local keep_dir = os.getenv("CHAOS_KEEP_DIR")
  local function keep(file, as)
    local f = keep_dir and io.open(file)
    if f then
      f:close()
      H.write(keep_dir .. "/" .. as, H.read(file))
    end
  end
  for _, p in ipairs(procs) do
    p:kill("CONT")
    p:cleanup()
    keep(p.logfile, "log-" .. p.index .. "." .. p.gen)
    if not opts.keep then os.remove(p.logfile) end
  end
  if ngx_set then
    RN.stop(ngx_set)
    RN.cleanup(ngx_set, keep, not opts.keep)
  end
  keep(events, "driver")
  keep(plan_file, "plan")
  if not opts.keep then os.remove(events); os.remove(plan_file) end
  if direct then direct:close() end
  for _, p in ipairs(proxies) do p:close() end
  if cl then cl:close() end
  if srv then srv:close() end
  if not ok then error(err, 0) end
  summary.seed = seed
  if opts.keep then log("chaos: logs kept: " .. plan_file .. " and " .. events) end
  summary.faults = faults
  summary.elapsed = core.now() - t_start
  local fl, nf = {}, 0
  local kinds, listed = {}, {}
  for _, kind in ipairs(C.FAULTS) do
    kinds[#kinds + 1], listed[kind] = kind, true
  end
  local more = {} -- (a profile's own kinds: moving's reconfig)
  for kind in pairs(faults) do
    if not listed[kind] then more[#more + 1] = kind end
  end
  table.sort(more)
  for _, kind in ipairs(more) do kinds[#kinds + 1] = kind end
  for _, kind in ipairs(kinds) do
    if faults[kind] then
      fl[#fl + 1] = kind .. "=" .. faults[kind]
      nf = nf + faults[kind]
    end
  end
  summary.nfaults = nf
  summary.transport = transport
  summary.line = ("chaos %s seed %d (%s): %d workers%s, %.0f s, faults %d " ..
    "(%s); %s"):format(name, seed, transport, prof.workers,
      prof.nginx and (" and %d nginx of 2"):format(prof.nginx) or "",
      prof.seconds, nf, table.concat(fl, " "), summary.line)
  for _, check in ipairs(K.CHECKS) do
    local f = summary.first[check]
    if f then
      summary.line = summary.line .. ("\n  %s: first%s: %s"):format(check,
        f.t > 0 and (" after %.1f s"):format(f.t - summary.t_start) or "",
        f.text)
    end
  end
  return summary
end

if not pcall(debug.getlocal, 4, 1) then -- run as a script
  -- arguments in any order: a profile name, a seed (a number),
  -- "only=COMPOSITION" (one of C.COMPOSITIONS, "none" or "all": which of
  -- issue 22's compositions to keep), "focus=COMPOSITION" (only that one, drawn
  -- more often), "seconds=N" (the profile's length: make soak
  -- PROFILE=moving)
  local name, seed, only, focus, transport = "chaos", nil, nil, nil, nil
  local seconds
  for _, a in ipairs(arg) do
    if tonumber(a) then seed = tonumber(a)
    elseif a:match("^seconds=%d+$") then seconds = tonumber(a:match("=(.*)$"))
    elseif a:match("^transport=") then transport = a:match("=(.*)$")
    elseif a:match("^only=") then only = a:match("^only=(.*)$")
    elseif a:match("^focus=") then only = a:match("^focus=(.*)$"); focus = true
    else name = a end
  end
  if name == "found" then -- make chaos-found: C.FOUND's seeds, focused
    local ok = true
    for _, f in ipairs(C.FOUND) do
      local s = C.run(C.only("quick", f[1], true), f[2])
      print(s.line)
      ok = ok and s.ok
    end
    print(ok and "chaos: PASS" or "chaos: FAIL")
    os.exit(ok and 0 or 1)
  end
  assert(C.PROFILES[name], "no profile " .. name)
  local prof = (only or seconds) and C.only(name, only, focus) or name
  if seconds then prof.seconds = seconds end
  local s = C.run(prof, seed, { transport = transport })
  print(s.line)
  print(s.ok and "chaos: PASS" or ("chaos: FAIL (replay: make chaos " ..
    "PROFILE=" .. name .. " SEED=" .. s.seed ..
    (transport and " TRANSPORT=" .. transport or "") ..
    (only and (focus and " FOCUS=" or " ONLY=") .. only or "") .. ")"))
  os.exit(s.ok and 0 or 1)
end

return C
