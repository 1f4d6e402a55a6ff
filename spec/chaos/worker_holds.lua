-- The chaos worker's parts of issue 33 that every kind of hold shares
-- (spec/chaos/worker.lua): extend drawn on a hold (before its limit,
-- racing it, after it, math.huge; logged XT, with the hold's id), and
-- the callbacks of leases and multilocks (on_lost, on_revoke: logged CB,
-- naming the hold they were called for, and releasing or not).  The
-- checkers of what they log: spec/chaos/checks/ends.lua.  Drawn from R4,
-- a stream of their own, so that R draws as before when the
-- compositions (run.lua's C.COMPOSITIONS: extend, lease_ends) are left
-- out.
return function(W)
  local now, R4, L, sample = W.now, W.R4, W.L, W.sample
  local avoid, focus, unexpected = W.avoid, W.focus, W.unexpected

  W.ext = not avoid.extend
  W.lends = not avoid.lease_ends
  W.lwrite = not avoid.lease_write

  -- ---------------------------------------------------------------------------
  -- extend

  -- Wait until time t, sampling the holds (is_held() through checks).
  local function wait_until(t, holds, checks)
    while now() < t - 0.02 do
      for i, h in ipairs(holds) do sample(h, checks[i]) end
      W.sleep(math.min(0.01, t - now()))
    end
    while now() < t do end -- (the last few ms: to the millisecond)
  end
  W.wait_until = wait_until

  -- Extend the holds (one, or a multilock's members) through
  -- obj:extend(secs), on client c: logged per hold (XT id target task x_s
  -- x_e secs res t1b after; secs -1: math.huge; t1b: the last is_held()
  -- true before the call; after: is_held() just after it, 1 or 0).  A
  -- multilock's lock_lost may leave the members before the one that
  -- ended extended: "maybe".  A closed client makes extend raise (its
  -- misuse): not drawn then.
  local function extend(task, holds, checks, obj, secs, c)
    if c and c:state() == "closed" then return end
    for i, h in ipairs(holds) do sample(h, checks[i]) end
    local t1b = {}
    for i, h in ipairs(holds) do t1b[i] = h.t1 end
    local x_s = now()
    local ok, r, _, code = pcall(obj.extend, obj, secs)
    local x_e = now()
    local after = {}
    for i, h in ipairs(holds) do after[i] = sample(h, checks[i]) end
    if not ok then unexpected(task, "extend", r) end
    local res = not ok and "raised" or r and "ok" or
      (#holds > 1 and code == "lock_lost") and "maybe" or tostring(code)
    for i, h in ipairs(holds) do
      L("XT", h.id, h.target, h.task, x_s, x_e,
        secs == math.huge and -1 or secs, res, t1b[i], after[i] and 1 or 0)
      if r then h.lim = secs ~= math.huge and x_e + secs or nil end
    end
    return ok and r, code
  end
  W.extend = extend

  -- Now and then (extend in), extend the holds (h: one record or a list)
  -- once or twice: "early" (at once, to 0.3 to 1.5 s from now, or
  -- math.huge), "race" (just at the limit, within a few ms either side),
  -- "late" (past it by 0.3 s or more: must answer lock_lost), "huge"
  -- (math.huge, then the hold outlives its old limit).  c: its client.
  local function maybe_extend(task, h, obj, check, c)
    if not (W.ext and R4:chance(focus == "extend" and 0.7 or 0.25)) then
      return
    end
    local holds = h.id and { h } or h
    local checks = type(check) == "function" and { check } or check
    for _ = 1, R4:int(1, 2) do
      local lim = holds[1].lim
      local mode = R4:pick(lim and { "early", "race", "race", "late",
        "huge" } or { "early", "early", "huge" })
      local secs = mode == "huge" and math.huge or
        R4:pick({ 0.3, 0.6, 1.5 })
      if mode == "race" then
        wait_until(lim - 0.012 + R4:float() * 0.02, holds, checks)
      elseif mode == "late" then
        wait_until(lim + 0.3 + R4:float() * 0.1, holds, checks)
      end
      local r = extend(task, holds, checks, obj, secs, c)
      if mode == "huge" and r and lim then -- (it outlives its old limit)
        wait_until(lim + 0.1, holds, checks)
      end
      if not r then return end
    end
  end
  W.maybe_extend = maybe_extend

  -- Now and then (lease_write), work hold h up to just before its limit
  -- (15 ms at most), so that the write that follows may meet its end.
  function W.near_end(h, check)
    if h.lim and R4:chance(focus == "lease_write" and 0.5 or 0.15) then
      wait_until(h.lim - R4:float() * 0.015, { h }, { check })
    end
  end

  -- ---------------------------------------------------------------------------
  -- the callbacks of leases and multilocks

  -- Hold records by the object a callback names: a lease, a multilock's
  -- member lock (weak: the objects go as they would).
  local hold_of = setmetatable({}, { __mode = "k" })
  W.hold_of = hold_of

  -- A lease's callback, for `what` ("lost", "revoke"): logged (CB id what
  -- t target task rel t_e: its start and end), and the lease released in it if its hold drew so
  -- (h.cb_rel[what]); its owner's release then answers lock_lost.
  local function lease_callback(what, tname)
    return function(lease)
      local t = now()
      local h = hold_of[lease]
      local rel = "kept"
      if h and h.cb_rel and h.cb_rel[what] then
        local ok, r, _, code = pcall(lease.release, lease)
        if not ok then unexpected(nil, "lease on_" .. what .. " release", r) end
        rel = not ok and "raised" or r and "released" or tostring(code)
        if ok then h.cb_released = true end
      end
      L("CB", h and h.id or "-", what, t, h and h.target or tname,
        h and h.task or "-", rel, now())
    end
  end

  -- Set a semaphore's callbacks (both, or one drawn).
  function W.lease_callbacks(sem, t)
    local which = R4:pick({ "both", "both", "lost", "revoke" })
    if which ~= "revoke" then
      sem:on_lost(W.callback(lease_callback("lost", t.name)))
    end
    if which ~= "lost" then
      sem:on_revoke(W.callback(lease_callback("revoke", t.name)))
    end
  end

  -- What a lease's hold does in its callbacks: release or not.
  function W.lease_hold(h, lease)
    hold_of[lease] = h
    h.cb_rel = { revoke = R4:chance(0.7), lost = R4:chance(0.3) }
  end

  -- A multilock's callbacks: fn(ml, member), logged per member hold
  -- (its id, or "?" for a lock not among the multilock's), the multilock
  -- released in on_revoke when drawn.  members: member lock -> hold.
  function W.multi_callbacks(ml, members, release_in)
    local function cb(what)
      return function(m, lock)
        local t = now()
        local h = m == ml and members[lock]
        local rel = "kept"
        if release_in[what] and not release_in.done then -- (once)
          local ok, r, _, code = pcall(ml.release, ml)
          if not ok then unexpected(nil, "multilock on_" .. what, r) end
          rel = not ok and "raised" or r and "released" or tostring(code)
          if ok then release_in.done = true end
        end
        L("CB", h and h.id or "?", "m" .. what, t, h and h.target or "-",
          h and h.task or "-", rel, now())
      end
    end
    local which = R4:pick({ "both", "lost", "revoke" })
    if which ~= "revoke" then ml:on_lost(W.callback(cb("lost"))) end
    if which ~= "lost" then ml:on_revoke(W.callback(cb("revoke"))) end
  end
end
