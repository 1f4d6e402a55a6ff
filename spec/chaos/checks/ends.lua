-- The chaos run's checker of how holds end (spec/chaos/check.lua; issue
-- 33; its findings count under the contract checker): an ended hold
-- stays ended, a callback is told of its own hold and only when its news
-- is true, and an extended hold is not over before its new limit.
--
--   ended stays ended   once a hold is over (its limit passed, as its
--                       max_hold and extends set it, plus the margin;
--                       its on_lost told; released in its own callback,
--                       by the callback's end; its client closed), no
--                       extend of it answers ok, no write under it
--                       lands, is_held() is not true and its release
--                       does not answer ok;
--   callbacks true      a lease's on_lost and on_revoke, a multilock's
--                       (fn(ml, member)), name a hold of the worker's
--                       (a lease it holds, a member of that multilock),
--                       not one released before; on_lost at most once,
--                       and only when the hold ended: its limit came,
--                       its node was deleted (X), a fault or its
--                       client's state (Z, C) explains it; on_revoke
--                       only after someone asked (Y: the chaos actor's
--                       or a worker's zklock.revoke of its target);
--   extended, not over  an extend that answered lock_lost just after
--                       is_held() said true, or a release of an
--                       extended hold that answered lock_lost, before
--                       the hold's limit and with nothing to end it; an
--                       extend that answered ok with is_held() false
--                       just after it (in time, or not: never both).
return function(K, U)
  local list, hold_text, windows, in_fault, proc_of = U.list, U.hold_text,
    U.windows, U.in_fault, U.proc_of

  local NAMES = { lost = "on_lost", revoke = "on_revoke",
    mlost = "multilock on_lost", mrevoke = "multilock on_revoke" }

  -- What the logs say of the world around the holds: deletions by node,
  -- revocations by target, clients' closes and state events, faults.
  local function world(logs, after)
    local w = { deleted = {}, revoked = {}, closed = {}, states = {},
      faults = windows(logs, after) }
    for _, x in ipairs(list(logs, "X")) do
      if not w.deleted[x.node] or x.t < w.deleted[x.node] then
        w.deleted[x.node] = x.t
      end
    end
    for _, y in ipairs(list(logs, "Y")) do
      w.revoked[y.target] = w.revoked[y.target] or {}
      table.insert(w.revoked[y.target], y.t)
    end
    for _, c in ipairs(list(logs, "C")) do
      if not w.closed[c.cl] or c.t < w.closed[c.cl] then w.closed[c.cl] = c.t end
    end
    for _, z in ipairs(list(logs, "Z")) do
      w.states[z.cl] = w.states[z.cl] or {}
      table.insert(w.states[z.cl], z)
    end
    return w
  end

  -- Did someone ask the holders of `target` to let go in [a, b]?
  local function asked(w, target, a, b)
    for _, y in ipairs(w.revoked[target] or {}) do
      if y >= a and y <= b then return true end
    end
    return false
  end

  -- Why hold h may have ended by time t without its owner (nil: no
  -- reason the logs show): its limit, its node deleted, a fault, its
  -- client's session (a state event other than "connected") or close;
  -- with `revoke` (bound: how long a revocation takes), a revocation.
  local function reason(w, h, segs, t, tol, bound)
    local from = h.ts >= 0 and h.ts or h.t0
    if t >= U.limit_at(segs, t).lower - tol then return "its limit" end
    if bound and asked(w, h.target, from - bound, t) then
      return "a revocation"
    end
    if w.deleted[h.node] and w.deleted[h.node] <= t then
      return "its node deleted"
    end
    if in_fault(w.faults, from, t, proc_of(h.task)) then return "a fault" end
    if h.cl and w.closed[h.cl] and w.closed[h.cl] <= t then
      return "its client closed"
    end
    for _, z in ipairs(h.cl and w.states[h.cl] or {}) do
      if z.state ~= "connected" and z.t >= from and z.t <= t then
        return "its client " .. z.state
      end
    end
  end

  --- How holds end, as above.  `margin`: how late C may end a hold after
  -- its limit (the contract's, 0.25 s); `after`: how long a fault may
  -- take to end a session; `bound`: how long a revocation may take to
  -- reach a node (a revoke call's), so one asked before the hold began
  -- by more than that did not reach it.
  function K.ends(logs, margin, after, bound)
    margin, after, bound = margin or 0.25, after or 6, bound or 11
    local tol = 0.002
    local v = {}
    local function flag(t, text) v[#v + 1] = { t = t, text = text } end
    local w = world(logs, after)
    local ext = U.extends(logs)
    local holds, cbs, writes = {}, {}, {}
    for _, h in ipairs(list(logs, "H")) do
      if h.id and h.id ~= "-" then holds[h.id] = h end
    end
    for _, c in ipairs(list(logs, "CB")) do
      cbs[c.id] = cbs[c.id] or {}
      table.insert(cbs[c.id], c)
    end
    for _, x in ipairs(list(logs, "W")) do
      if x.id and x.id ~= "-" then
        writes[x.id] = writes[x.id] or {}
        table.insert(writes[x.id], x)
      end
    end

    -- callbacks for no hold of the worker's
    for _, id in ipairs({ "-", "?" }) do
      for _, c in ipairs(cbs[id] or {}) do
        flag(c.t, ("%s called at %.3f by %s for %s"):format(NAMES[c.what] or
          c.what, c.t, tostring(c.target), id == "-" and
          "a lease the worker does not hold" or
          "a lock that is not a member of the multilock"))
      end
    end

    for id, h in pairs(holds) do
      local segs = U.schedule(h, ext[id])
      local text = hold_text(h) .. " (" .. id .. ")"
      -- its end: the limit, on_lost told, released in a callback, its
      -- client closed (the first of them)
      local t_end, why = U.limit_end(segs, margin), "its limit passed"
      local function ends(t, what)
        if t < t_end then t_end, why = t, what end
      end
      local n_lost = 0
      for _, c in ipairs(cbs[id] or {}) do
        local name = NAMES[c.what] or c.what
        if h.rel_e >= 0 and h.rel ~= "none" and c.t > h.rel_e then
          flag(c.t, ("%s told at %.3f, after the owner's release " ..
            "(%.3f): %s"):format(name, c.t, h.rel_e, text))
        end
        if c.what == "lost" or c.what == "mlost" then
          n_lost = n_lost + 1
          if n_lost == 2 then
            flag(c.t, ("%s told twice: %s"):format(name, text))
          end
          ends(c.t, name .. " told")
          if not reason(w, h, segs, c.t, tol) then
            flag(c.t, ("%s told at %.3f with nothing to end the hold (its " ..
              "limit %.3f, no deletion, fault or session event): %s")
              :format(name, c.t, U.limit_at(segs, c.t).lower, text))
          end
        else
          if not asked(w, h.target, (h.ts >= 0 and h.ts or h.t0) - bound,
              c.t) then
            flag(c.t, ("%s told at %.3f, nobody asked (no revocation " ..
              "of %s): %s"):format(name, c.t, h.target, text))
          end
        end
        -- (a multilock's members are let go of one after the other: the
        -- callback's end)
        if c.rel == "released" then
          ends(type(c.t_e) == "number" and c.t_e or c.t,
            "released in its " .. name)
        end
      end
      if h.cl and w.closed[h.cl] then ends(w.closed[h.cl], "its client closed") end

      -- ended stays ended
      for _, x in ipairs(ext[id] or {}) do
        if x.res == "ok" and x.x_s > t_end then
          flag(x.x_s, ("extend at %.3f answered ok, the hold over at %.3f " ..
            "(%s): %s"):format(x.x_s, t_end, why, text))
        end
      end
      for _, x in ipairs(writes[id] or {}) do
        if x.what == "ok" and x.call ~= "release" and x.t_s > t_end then
          flag(x.t_s, ("%s: a write (%s, %s) sent at %.3f landed, the hold " ..
            "over at %.3f (%s): %s"):format(x.target, tostring(x.call),
            tostring(x.tag), x.t_s, t_end, why, text))
        end
      end
      if why ~= "its limit passed" then -- (the limit's: K.contract)
        if h.t1 > t_end then
          flag(h.t1, ("is_held() true at %.3f, the hold over at %.3f " ..
            "(%s): %s"):format(h.t1, t_end, why, text))
        end
        if h.rel == "ok" and h.rel_t > t_end then
          flag(h.rel_t, ("released ok at %.3f, the hold over at %.3f (%s): " ..
            "%s"):format(h.rel_t, t_end, why, text))
        end
      end

      -- extended, not over before its limit
      local extended = false
      for _, x in ipairs(ext[id] or {}) do
        local lim = U.limit_at(segs, x.x_s).lower
        if x.res == "ok" then extended = true end
        if x.res == "ok" and x.after == 0 and x.x_s <= t_end and
            not reason(w, h, segs, x.x_e + tol, tol, bound) then
          flag(x.x_e, ("extend answered ok at %.3f, and is_held() was " ..
            "false just after, nothing to end it: %s"):format(x.x_e, text))
        end
        if x.res == "lock_lost" and x.x_s - x.t1b < tol and
            x.x_e < lim - tol and x.x_s < t_end and
            not reason(w, h, segs, x.x_e, tol, bound) then
          flag(x.x_e, ("extend answered lock_lost at %.3f, held just " ..
            "before, its limit %.3f, nothing to end it: %s"):format(x.x_e,
            lim, text))
        end
      end
      if extended and h.rel == "lock_lost" and h.kind ~= "read" and
          h.rel_t < t_end and h.rel_t < U.limit_at(segs, h.rel_t).lower - tol
          and not reason(w, h, segs, h.rel_e, tol, bound) then
        flag(h.rel_e, ("released at %.3f answering lock_lost, extended to " ..
          "%.3f, nothing to end it: %s"):format(h.rel_t,
          U.limit_at(segs, h.rel_t).lower, text))
      end
    end
    return v
  end
end
