-- The chaos worker's other recipes (spec/chaos/worker.lua): the
-- read/write lock (readers, two-node updates, downgrades; extend), the
-- multilock (on_lost, on_revoke, max_hold and extend: issue 33), the
-- leader latch, the barrier and its controller, the double barrier's
-- members, and bursts of coroutines on one shared object.
return function(W)
  local plan, P, now, R, R4, zk, G = W.plan, W.P, W.now, W.R, W.R4, W.zk,
    W.G
  local index, focus, avoid, broken = W.index, W.focus, W.avoid, W.broken
  local L, unexpected, new_hold, sample, log_hold, released, work =
    W.L, W.unexpected, W.new_hold, W.sample, W.log_hold, W.released, W.work
  local log_acquire, fenced_increment = W.log_acquire, W.fenced_increment
  local make, shared_obj, pick_timeout, pick_work, acquire,
    release_client = W.make, W.shared_obj, W.pick_timeout, W.pick_work,
    W.acquire, W.release_client
  local spawn, sleep, OPS = W.spawn, W.sleep, W.OPS
  local call_start, expiries = W.call_start, W.expiries

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
    local held = sample(h, check)
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
      W.maybe_extend(task, h, rw.read, check, zk)
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
    W.maybe_extend(task, hw, rw.write, cw, zk)
    rw_n = rw_n + 1
    rw_update(task, t, rw.write, hw, rw_n)
    sample(hw, cw)
    if mode == "write" then
      work(pick_work(), { hw }, { cw }, task)
      local _, err = released(hw, function() return rw.write:release() end)
      if hw.rel == "raised" then unexpected(task, "write:release", err) end
      return log_hold(hw)
    end
    -- downgrade
    local t_s = now()
    task.tq = false
    call_start(task, rw.read)
    local ok, r, _, code = pcall(rw.read.acquire, rw.read, 0)
    log_acquire("read", t.name, task, t_s, ok and r and "ok" or "fail",
      ok and (r and "-" or tostring(code)) or "raised", 0)
    if not ok then unexpected(task, "downgrade read:acquire", r) end
    if not (ok and r) then
      released(hw, function() return rw.write:release() end)
      return log_hold(hw)
    end
    local hr = new_hold("read", t.name, task, rw.read:token(), rw.read:node())
    local cr = function() return rw.read:is_held(), rw.read:node() end
    -- (the downgraded read extended alone, or the write it rests on)
    if W.ext and R4:chance(0.5) then
      W.maybe_extend(task, hr, rw.read, cr, zk)
    else
      W.maybe_extend(task, hw, rw.write, cw, zk)
    end
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

  -- multilock over two members: mutexes and read/write write locks;
  -- issue 33: its on_lost and on_revoke (set before or after the
  -- acquire; releasing it in on_revoke, or on_lost, when drawn),
  -- max_hold for every member, extend
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
      local l = t.kind == "mutex" and zk:mutex(t.path) or
        zk:rwlock(t.path).write
      members[#members + 1] = { t = t, l = l,
        kind = t.kind == "mutex" and "mutex" or "write" }
      locks[#locks + 1] = l
    end
    local ml = zk:multilock(locks)
    local by_lock, release_in, cbs, opts = {}, {}, nil, nil
    if W.lends and R4:chance(focus == "lease_ends" and 0.7 or 0.3) then
      cbs = R4:pick({ "before", "after" })
      release_in.revoke = R4:chance(focus == "lease_ends" and 0.9 or 0.7)
      release_in.lost = R4:chance(0.3)
      if cbs == "before" then W.multi_callbacks(ml, by_lock, release_in) end
    end
    if (W.ext or W.lends) and R4:chance(0.3) then
      opts = { max_hold = R4:pick({ 0.3, 0.6, 1 }) }
    end
    -- (its members' holds have no acquire start, ts: a member in a lock
    -- cohort, as every multilock's is, may be passed ahead of a
    -- contender of its process, which the fifo checker must not see)
    local got = acquire(task, "multi", a .. "+" .. b, ml, pick_timeout(),
      opts)
    if not got then return end
    local holds, checks = {}, {}
    for i, m in ipairs(members) do
      -- (a member in a lock cohort may be passed the hold: its pass too)
      local token, pass = m.l:token()
      holds[i] = new_hold(m.kind, m.t.name, task, token, m.l:node(),
        opts and opts.max_hold, pass)
      by_lock[m.l] = holds[i]
      checks[i] = function() return m.l:is_held(), m.l:node() end
    end
    if cbs == "after" then W.multi_callbacks(ml, by_lock, release_in) end
    local d = pick_work()
    if cbs and R4:chance(focus == "lease_ends" and 0.5 or 0.1) then
      -- a member revoked while it holds (by another coroutine, as the
      -- workers' and the chaos actor's revocations are logged: Y)
      local who, at = R4:pick(members).t, R4:float() * 0.3
      d = math.max(d, at + 0.3) -- (the hold hears it)
      spawn("revoker", function()
        sleep(at)
        L("Y", now(), who.name)
        pcall(W.zklock.revoke, zk, who.path)
      end)
    end
    W.maybe_extend(task, holds, ml, checks, zk)
    work(d, holds, checks, task)
    for i, m in ipairs(members) do
      if m.kind == "mutex" and R:chance(0.5) then
        fenced_increment(task, m.t, m.l, holds[i].token, nil, holds[i])
      end
    end
    for i, h in ipairs(holds) do sample(h, checks[i]) end
    local t_r = now()
    local ok, r, msg = pcall(ml.release, ml)
    if not ok then unexpected(task, "multilock:release", r) end
    for _, h in ipairs(holds) do
      h.rel_t, h.rel_e = t_r, now()
      h.rel = not ok and "raised" or r and "ok" or "lock_lost"
      if release_in.done and ok and not r then
        h.rel = "ended" -- (released in its callback: as it should say)
      elseif not r and ok and not tostring(msg):find(h.target, 1, true) then
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
    call_start(task, latch)
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
    local t_s, e0 = now(), expiries(zk, true)
    local ok, r, _, code = pcall(b.wait, b, timeout)
    if not ok then unexpected(task, "barrier:wait", r) end
    L("BW", t.name, task.name, t_s, now(), ok and r and "ok" or
      ok and tostring(code) or "raised", timeout, e0, expiries(zk))
  end

  -- a burst: 2 or 3 more coroutines run one op of a kind at once on the
  -- process's shared object (concurrent requests on a worker-level object)
  function OPS.burst(task)
    local kind = focus == "smutex_shared" and "smutex" or
      focus == "lease_write" and "sem" or -- (updates at once: conflicts)
      (focus == "cohort_write" or focus == "renew") and "mutex" or
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
      local t_s, e0 = now(), expiries(zk, true)
      local ok, r, _, code = pcall(db.enter, db, period * 0.4)
      if not ok then unexpected(task, "double_barrier:enter", r) end
      L("DE", t.name, k, P, t_s, now(), ok and r and "ok" or
        ok and tostring(code) or "raised", period * 0.4, e0, expiries(zk))
      if ok and r then
        sleep(R:float() * 0.3)
        local t_l, e2 = now(), expiries(zk, true)
        local ok2, r2, _, code2 = pcall(db.leave, db, period * 0.4)
        if not ok2 then unexpected(task, "double_barrier:leave", r2) end
        L("DL", t.name, k, P, t_l, now(), ok2 and r2 and "ok" or
          ok2 and tostring(code2) or "raised", period * 0.4, e2,
          expiries(zk))
      end
      k = k + 1
    end
  end


  W.controller = controller
  W.member = member
end
