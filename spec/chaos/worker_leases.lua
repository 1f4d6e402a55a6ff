-- The chaos worker's semaphore ops (spec/chaos/worker.lua): leases, one
-- to three per coroutine, some with max_hold, released in any order or
-- dropped; and, issue 33 (drawn from R4: worker_holds.lua), leases as
-- holds: on_lost and on_revoke (set before or after the acquire, the
-- lease released in them or not), a guarded read with the acquire,
-- fenced_set and the write with the release (of the semaphore's notes
-- node), extend (by the lease or the semaphore: its newest), revocations
-- of leases by the workers, and with_lock's update of the semaphore's
-- counter (a conditional write: exact across the leases).
return function(W)
  local plan, now, R, R4, zk, G = W.plan, W.now, W.R, W.R4, W.zk, W.G
  local focus, OPS = W.focus, W.OPS
  local L, unexpected, new_hold, sample, log_hold, released, work =
    W.L, W.unexpected, W.new_hold, W.sample, W.log_hold, W.released, W.work
  local counter_value, counter_data, fenced_increment = W.counter_value,
    W.counter_data, W.fenced_increment
  local make, shared_obj, is_shared, pick_timeout, pick_work, acquire,
    drop = W.make, W.shared_obj, W.is_shared, W.pick_timeout, W.pick_work,
    W.acquire, W.drop
  local write_tag, seen, log_write, call_start, log_acquire = W.write_tag,
    W.seen, W.log_write, W.call_start, W.log_acquire

  -- the node a semaphore's leases write unconditionally (their writes
  -- race: no count is kept of it, only what each answer claims)
  local function notes(t) return { name = t.name .. "n", counter = t.notes } end

  -- One hold through zklock.with_lock(sem, { update = counter }) on an
  -- object of its own (no callbacks: a with_lock lease is not the
  -- worker's to name): fn may run again on fresh data when another
  -- lease's holder wrote first; each run's write is named, and those
  -- run again logged refused (nothing written).  The lease's node is not
  -- known ("-").
  local function sem_update(task, t)
    local sem = make(zk, t)
    local opts = { timeout = pick_timeout(), update = t.counter,
      max_hold = R4:chance(0.4) and R4:pick({ 0.3, 0.6, 1 }) or nil }
    task.revoked, task.tq, task.ts = false, false, nil
    local t_s = now()
    call_start(task, sem)
    local h, last
    local check = function() return sem:is_held() end
    local ok, r, _, code = pcall(W.zklock.with_lock, sem, opts,
      function(data)
        if not h then
          log_acquire("lease", t.name, task, t_s, "ok", "-", opts.timeout)
          task.ts = t_s
          h = new_hold("lease", t.name, task, sem:token(), "-",
            opts.max_hold)
        else -- (run again: its last write met another's)
          log_write(t, last.token, 0, last.v, 0, "refused", last.tag,
            "update", h, last.t_s)
        end
        seen(t, data, "update")
        sample(h, check)
        work(R4:pick({ 0.01, 0.05, 0.2 }), { h }, { check }, task)
        W.maybe_extend(task, h, sem, check, zk)
        W.near_end(h, check)
        local v, tag = counter_value(data) + 1, write_tag()
        last = { v = v, tag = tag, token = sem:token() or h.token }
        L("P", t.name, last.token, v, tag)
        last.t_s = now()
        h.rel_t = last.t_s
        return counter_data(v, false, tag), true
      end)
    if not ok then return unexpected(task, "with_lock update (sem)", r) end
    if not h then
      return log_acquire("lease", t.name, task, t_s, "fail", code,
        opts.timeout)
    end
    h.rel_e, h.rel = now(), r and "ok" or tostring(code)
    log_write(t, last.token, 0, last.v, 0, r and "ok" or
      code == "lock_lost" and "lost" or "unknown", last.tag, "update", h,
      last.t_s)
    log_hold(h)
  end

  -- the callbacks of a shared semaphore object: set once, by whichever
  -- coroutine draws them first (with leases held, perhaps)
  local shared_callbacks = {}

  -- semaphore: several leases, released in any order, some with max_hold
  function OPS.sem(task)
    local t = plan.targets[R:pick(G.of_kind(plan, "sem"))]
    if W.lwrite and R4:chance(focus == "lease_write" and 0.4 or 0.12) then
      return sem_update(task, t)
    end
    local sem = (task.force_shared or R:chance(0.5)) and shared_obj(t) or
      make(zk, t)
    local cbs -- the callbacks set "before" or "after" the first lease
    if W.lends and R4:chance(focus == "lease_ends" and 0.8 or 0.4) then
      if not is_shared(sem) then
        cbs = R4:pick({ "before", "after" })
      elseif not shared_callbacks[t.name] then
        shared_callbacks[t.name] = true
        W.lease_callbacks(sem, t)
      end
    end
    if cbs == "before" then W.lease_callbacks(sem, t) end
    local holds, checks, leases = {}, {}, {}
    for _ = 1, R:int(1, 3) do
      local opts = R:chance(0.3) and { max_hold = R:pick({ 0.3, 1 }) } or nil
      local read = W.lwrite and R4:chance(0.3)
      if read then
        opts = opts or {}
        opts.read = t.notes
      end
      local lease, data = acquire(task, "lease", t.name, sem,
        focus == "abandon_lease" and 5 or pick_timeout(), opts)
      if not lease then break end
      if read then seen(notes(t), data, "read") end
      local h = new_hold("lease", t.name, task, lease:token(), lease:node(),
        opts and opts.max_hold)
      if W.lends then W.lease_hold(h, lease) end
      holds[#holds + 1], leases[#leases + 1] = h, lease
      local check = function() return lease:is_held(), lease:node() end
      checks[#checks + 1] = check
      if cbs == "after" and #leases == 1 then W.lease_callbacks(sem, t) end
      work(pick_work() / 2, holds, checks, task)
      -- (the semaphore's extend and fenced_set are its newest lease's:
      -- this one)
      W.maybe_extend(task, h, R4:chance(0.5) and sem or lease, check, zk)
      if W.lwrite and R4:chance(focus == "lease_write" and 0.6 or 0.3) then
        W.near_end(h, check)
        fenced_increment(task, notes(t), R4:chance(0.5) and sem or lease,
          h.token, false, h)
      end
    end
    work(pick_work(), holds, checks, task)
    -- released in a random order; now and then one is dropped instead
    while #leases > 0 do
      local i = R:int(1, #leases)
      local lease, h = table.remove(leases, i), table.remove(holds, i)
      sample(h, table.remove(checks, i)) -- (lease's is_held and node)
      if R:chance(0.05) then
        log_hold(h) -- dropped: collected, its node deleted
        lease = nil -- luacheck: ignore
        drop(task)
      else
        local write = W.lwrite and
          R4:chance(focus == "lease_write" and 0.6 or 0.3)
        local by_sem = R4:chance(0.5)
        local opts, v, tag
        if write then -- with the release: the semaphore's notes
          W.near_end(h, function() return lease:is_held(), lease:node() end)
          local data = zk:get(t.notes, plan.st)
          seen(notes(t), data, "get")
          v, tag = counter_value(data) + 1, write_tag()
          opts = { write = t.notes, data = counter_data(v, false, tag) }
          L("P", notes(t).name, h.token, v, tag)
        end
        local r, err, zxid = released(h, function()
          if by_sem then return sem:release(lease, opts) end
          return lease:release(opts)
        end)
        if write then
          log_write(notes(t), h.token, r and zxid or 0, v, 0, r and "ok" or
            h.rel == "lock_lost" and "lost" or "unknown", tag, "release",
            h, h.rel_t)
        end
        if h.rel == "raised" then unexpected(task, "lease:release", err) end
        log_hold(h)
      end
      work(R:float() * 0.1, holds, checks, task)
    end
  end

  -- lrevoke (lease_ends): ask the holders of leases of a semaphore (as
  -- many as drawn), or of a lock multilocks take, to let go, as the chaos
  -- actor does, logged as it logs it (Y)
  function OPS.lrevoke(task)
    local names = {}
    for _, n in ipairs(G.of_kind(plan, "mutex")) do
      if not plan.targets[n].big then names[#names + 1] = n end
    end
    for _, n in ipairs(G.of_kind(plan, "rw")) do names[#names + 1] = n end
    local sems = G.of_kind(plan, "sem")
    local t = plan.targets[R4:chance(0.6) and R4:pick(sems) or
      R4:pick(names)]
    L("Y", now(), t.name)
    local ok, err = pcall(W.zklock.revoke, zk, t.path,
      t.kind == "sem" and R4:int(1, t.n) or nil)
    if not ok then unexpected(task, "revoke", err) end
    W.sleep(R4:float() * 0.3)
  end
end
