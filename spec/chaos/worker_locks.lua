-- The chaos worker's mutex ops (spec/chaos/worker.lua): a mutex hold
-- with its options (max_hold, a guarded read and write, reentry,
-- fenced_set of a counter, revocation, dropped while held, extend), a
-- hold through with_lock's update, revocations of a cohort's holder, and
-- the semaphore mutex (issue 33: its guarded read and write, with_lock's
-- update, extend).  The semaphore's: worker_leases.lua.
return function(W)
  local plan, now, R, zk, G = W.plan, W.now, W.R, W.zk, W.G
  local focus, avoid, broken = W.focus, W.avoid, W.broken
  local L, unexpected, new_hold, sample, log_hold, released, work =
    W.L, W.unexpected, W.new_hold, W.sample, W.log_hold, W.released, W.work
  local counter_value, counter_data, fits, refused, fenced_increment =
    W.counter_value, W.counter_data, W.fits, W.refused, W.fenced_increment
  local make, shared_obj, choose_obj, pick_timeout, pick_work, acquire,
    drop = W.make, W.shared_obj, W.choose_obj, W.pick_timeout, W.pick_work,
    W.acquire, W.drop
  local OPS, R3, R4 = W.OPS, W.R3, W.R4
  local write_tag, seen, log_write, call_start, log_acquire = W.write_tag,
    W.seen, W.log_write, W.call_start, W.log_acquire

  -- The compositions of issue 32 (run.lua's C.COMPOSITIONS), drawn from
  -- R3 so that R draws the same when they are left out.  cohort_write: a
  -- write with the release of a hold that ends meanwhile (its max_hold
  -- running out as it works up to it, an on_revoke that releases, in a
  -- cohort that would pass the hold on); renew: cohort waiters queued
  -- long, met by a session expiry the client renews.
  local cw = not avoid.cohort_write
  local cw_focus = focus == "cohort_write"
  local renew = not avoid.renew

  -- Work under hold h: a while, or (cohort_write) up to just before its
  -- max_hold (15 ms at most), so that it may run out as the release's
  -- write is on its way.
  local function hold_work(h, check, task)
    if not (cw and h.lim and R3:chance(cw_focus and 0.7 or 0.2)) then
      return work(pick_work(), { h }, { check }, task)
    end
    local t = h.lim - R3:float() * 0.015 -- (t0 + mh, or where an extend put it)
    repeat
      sample(h, check)
      if task.revoked then return end
      W.sleep(math.min(R3:float() * 0.03, t - now()))
    until now() >= t
  end

  -- ---------------------------------------------------------------------------
  -- the ops

  -- One hold of a mutex object: acquire (max_hold, guarded read),
  -- reentry, work, a fenced or guarded write, release.  Returns "drop" when
  -- the hold is to be dropped for garbage collection instead of released,
  -- true when it was released.
  local function mutex_hold(task, t, obj, how, revocable)
    local opts = {}
    if R:chance(cw_focus and 0.6 or 0.3) then
      opts.max_hold = R:pick({ 0.3, 0.6, 1 })
    end
    local guarded = R:chance(cw_focus and 0.8 or 0.35)
    if guarded then opts.read = t.counter end
    local big = t.big and R:chance(focus == "big" and 0.7 or 0.3)
    local timeout = pick_timeout()
    if broken.leak and t.name == "m1" then timeout = 5 end -- (seen wedged)
    if renew and t.cohort and R3:chance(focus == "renew" and 0.8 or 0.1) then
      timeout = 10 -- (still queued when a session expires)
    end
    task.revoked = false
    local got, data = acquire(task, "mutex", t.name, obj, timeout, opts)
    if not got then return end
    if guarded then seen(t, data, "read") end
    local token, pass = obj:token()
    local h = new_hold("mutex", t.name, task, token, obj:node(),
      opts.max_hold, pass)
    local check = function() return obj:is_held(), obj:node() end
    sample(h, check)
    if not revocable and R:chance(0.2) then -- reentrant
      -- (api.md: a hold lost since makes it answer lock_lost, and
      -- is_held() is false by then; any other answer is a refusal)
      local again, _, code = obj:acquire(1)
      if again ~= obj and not (code == "lock_lost" and not obj:is_held()) then
        unexpected(task, "reentrant acquire", "refused: " .. tostring(code))
      end
      work(pick_work() / 2, { h }, { check }, task)
      if again then released({}, function() return obj:release() end) end
    end
    W.maybe_extend(task, h, obj, check, W.owner(obj))
    hold_work(h, check, task)
    if task.revoked then h.rel = "revoked"; return log_hold(h) end
    if broken.leak and t.name == "m1" then -- a release that forgets its node
      h.rel_t, h.rel_e, h.rel = now(), now(), "ok"
      return log_hold(h)
    end
    if how ~= "shared" and R:chance(0.05) then
      log_hold(h) -- dropped while held: collected, its node deleted
      return "drop"
    end
    local v, tag, new
    if guarded then
      v, tag = counter_value(data) + 1, write_tag()
      new = counter_data(v, big, tag)
    end
    if guarded and not fits(obj, t, new) then
      local t_r = now()
      if refused(task, "mutex:release", function()
        return obj:release({ write = t.counter, data = new })
      end) then -- (lost meanwhile: that release ended it, nothing written)
        h.rel_t, h.rel_e, h.rel = t_r, now(), "lock_lost"
        log_hold(h)
        return true
      end
      guarded = false -- (then released the plain way, still held)
    end
    if guarded then
      local now_token, now_pass = obj:token()
      h.token = now_token or h.token -- (nil at the acquire in a reconnection)
      h.pass = now_pass or h.pass
      L("P", t.name, h.token, v, tag)
      local r, err, zxid = released(h, function()
        return obj:release({ write = t.counter, data = new })
      end)
      log_write(t, h.token, r and zxid or 0, v, h.pass,
        r and "ok" or h.rel == "lock_lost" and "lost" or "unknown", tag,
        "release", h, h.rel_t)
      if h.rel == "raised" then unexpected(task, "mutex:release", err) end
    else
      if R:chance(0.6) then
        fenced_increment(task, t, obj, h.token, big, h)
      end
      sample(h, check)
      local _, err = released(h, function() return obj:release() end)
      if h.rel == "raised" then unexpected(task, "mutex:release", err) end
    end
    log_hold(h)
    return true
  end

  -- One hold through zklock.with_lock(obj, { update = counter }): the
  -- counter read with the acquire, its value plus one written with the
  -- release (cohort_write; a semaphore mutex's: lease_write).  The hold
  -- works a while, or up to just before its max_hold.
  local function with_update(task, t, obj, kind)
    kind = kind or "mutex"
    local opts = { timeout = pick_timeout(), update = t.counter,
      max_hold = R3:chance(0.6) and R3:pick({ 0.3, 0.6, 1 }) or nil }
    task.revoked, task.tq, task.ts = false, false, nil
    local t_s = now()
    call_start(task, obj)
    local h, v, tag
    local ok, r, _, code = pcall(W.zklock.with_lock, obj, opts,
      function(data)
        log_acquire(kind, t.name, task, t_s, "ok", "-", opts.timeout)
        task.ts = t_s
        local token, pass = obj:token()
        h = new_hold(kind, t.name, task, token, obj:node(),
          opts.max_hold, pass)
        seen(t, data, "update")
        local check = function() return obj:is_held(), obj:node() end
        sample(h, check)
        W.maybe_extend(task, h, obj, check, W.owner(obj))
        hold_work(h, check, task)
        v, tag = counter_value(data) + 1, write_tag()
        local now_token, now_pass = obj:token()
        h.token, h.pass = now_token or h.token, now_pass or h.pass
        L("P", t.name, h.token, v, tag)
        h.rel_t = now()
        return counter_data(v, false, tag), true
      end)
    if not ok then return unexpected(task, "with_lock update", r) end
    if not h then
      return log_acquire(kind, t.name, task, t_s, "fail", code,
        opts.timeout)
    end
    h.rel_e, h.rel = now(), r and "ok" or tostring(code)
    -- (with_lock gives no zxid: 0, out of the fencing order)
    log_write(t, h.token, 0, v, h.pass, r and "ok" or
      code == "lock_lost" and "lost" or "unknown", tag, "update", h,
      h.rel_t)
    log_hold(h)
  end

  -- revoke: ask the holder of a mutex in a lock cohort to let go
  -- (cohort_write), as the chaos actor does, logged as it logs it (Y)
  function OPS.revoke(task)
    local names = {}
    for _, n in ipairs(G.of_kind(plan, "mutex")) do
      if plan.targets[n].cohort then names[#names + 1] = n end
    end
    if #names == 0 then return end
    local t = plan.targets[R3:pick(names)]
    L("Y", now(), t.name)
    local ok, err = pcall(W.zklock.revoke, zk, t.path)
    if not ok then unexpected(task, "revoke", err) end
    W.sleep(R3:float() * 0.2)
  end

  -- mutex: reentrant, max_hold, linger (the target's), guarded read and
  -- write, fenced_set, revocable; now and then several holds in a row on
  -- one object (a cached node is reused at once); with_lock's update
  function OPS.mutex(task, name)
    local t = plan.targets[name or R:pick(G.of_kind(plan, "mutex"))]
    if focus == "renew" and not name and R3:chance(0.6) then
      t = plan.targets.m1 -- (several waiters of a process in one cohort)
    end
    if broken.leak and t.name == "m1" then task.force_shared = true end
    local obj, how = choose_obj(task, t, function(c) return make(c, t) end)
    if broken.leak and t.name == "m1" then task.force_shared = task.kid end
    local revocable = how ~= "shared" and R:chance(cw_focus and 0.7 or 0.3)
    if revocable then
      obj:on_revoke(W.callback(function(l)
        task.revoked = true
        local ok, err = pcall(l.release, l)
        if not ok then unexpected(task, "on_revoke release", err) end
      end))
    end
    -- (not on the recipes broken on purpose: with_lock refuses to update
    -- what is not a zklock mutex)
    if cw and not name and not next(broken) and
        R3:chance(cw_focus and 0.4 or 0.1) then
      return with_update(task, t, obj)
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

  -- semaphore mutex: Curator's, often shared, with max_hold; issue 33
  -- (lease_write): a guarded read and write of its counter, with_lock's
  -- update; extend
  local lw = W.lwrite
  function OPS.smutex(task)
    local t = plan.targets[R:pick(G.of_kind(plan, "smutex"))]
    local one = not avoid.smutex_shared and -- (the shared object)
      (task.force_shared or R:chance(0.7))
    local obj = one and shared_obj(t) or make(zk, t)
    if lw and not one and not next(broken) and
        R4:chance(focus == "lease_write" and 0.4 or 0.12) then
      return with_update(task, t, obj, "smutex")
    end
    local opts = {}
    if R:chance(0.4) then
      opts.max_hold = R:pick({ 0.3, 0.6, 1 })
    end
    local guarded = lw and not next(broken) and
      R4:chance(focus == "lease_write" and 0.6 or 0.3)
    if guarded then opts.read = t.counter end
    -- (the focus on abandoned waits waits long, so that a wait stuck behind
    -- one is seen)
    local timeout = focus == "abandon_lease" and 5 or pick_timeout()
    local got, data = acquire(task, "smutex", t.name, obj, timeout, opts)
    if not got then return end
    if guarded then seen(t, data, "read") end
    local h = new_hold("smutex", t.name, task, obj:token(), obj:node(),
      opts.max_hold)
    local check = function() return obj:is_held(), obj:node() end
    W.maybe_extend(task, h, obj, check, zk)
    work(pick_work(), { h }, { check }, task)
    if guarded then -- its value plus one, written with the release
      W.near_end(h, check)
      local v, tag = counter_value(data) + 1, write_tag()
      L("P", t.name, h.token, v, tag)
      local r, err, zxid = released(h, function()
        return obj:release({ write = t.counter,
          data = counter_data(v, false, tag) })
      end)
      log_write(t, h.token, r and zxid or 0, v, 0, r and "ok" or
        h.rel == "lock_lost" and "lost" or "unknown", tag, "release", h,
        h.rel_t)
      if h.rel == "raised" then unexpected(task, "smutex:release", err) end
      return log_hold(h)
    end
    if R:chance(0.5) then fenced_increment(task, t, obj, h.token, nil, h) end
    sample(h, check)
    local _, err = released(h, function() return obj:release() end)
    if h.rel == "raised" then unexpected(task, "smutex:release", err) end
    log_hold(h)
  end
end
