-- The chaos run's checkers of the calls' contract (spec/chaos/check.lua):
-- no Lua error where api.md promises none, is_held() and max_hold kept;
-- every wait ends by its timeout plus a bound.
return function(K, U)
  local list, hold_text, in_fault, proc_of = U.list, U.hold_text,
    U.in_fault, U.proc_of

  -- a hold's limit in words: its max_hold, and its extends
  local function limit_text(h, xts)
    local n = 0
    for _, x in ipairs(xts or {}) do
      if x.res == "ok" or x.res == "maybe" then n = n + 1 end
    end
    if n == 0 then return "max_hold " .. tostring(h.mh) end
    return ("its limit (max_hold %s, then %d extend%s)"):format(
      tostring(h.mh), n, n > 1 and "s" or "")
  end

  --- The calls' contract (api.md): no Lua error where none is promised;
  -- is_held() never true on a node other than the hold's own (someone
  -- else's hold believed); a hold past its limit (its max_hold, as its
  -- extends moved it: U.schedule) neither believed nor released as "ok";
  -- so a hold extended to T2 may be believed until T2, not after.
  -- (is_held() false then true again on the same node is allowed:
  -- design.md, section 9.2.)
  function K.contract(logs, margin)
    margin = margin or 0.25
    local v = {}
    local ext = U.extends(logs)
    for _, e in ipairs(list(logs, "E")) do
      v[#v + 1] = { t = e.t or 0, text = ("%s %s: %s raised %s"):format(e.p,
        e.task, e.what, e.msg) }
    end
    for _, h in ipairs(list(logs, "H")) do
      if h.flip == 1 then
        v[#v + 1] = { t = h.t1, text = "is_held() true on another node " ..
          "than the hold's: " .. hold_text(h) }
      end
      local xts = h.id and ext[h.id]
      local segs = U.schedule(h, xts)
      local function past(t)
        return t > 0 and t > U.limit_at(segs, t).upper + margin
      end
      -- (the last is_held() true, and the last before each extend)
      local believed = h.t1
      for _, x in ipairs(xts or {}) do
        if past(x.t1b) and not past(believed) then believed = x.t1b end
      end
      if past(believed) then
        v[#v + 1] = { t = believed, text = ("is_held() true %.2f s after " ..
          "the acquire, past %s: %s"):format(believed - h.t0,
          limit_text(h, xts), hold_text(h)) }
      end
      if h.rel == "ok" and past(h.rel_t) then
        v[#v + 1] = { t = h.rel_t, text = ("released ok %.2f s after the " ..
          "acquire, past %s: %s"):format(h.rel_t - h.t0, limit_text(h, xts),
          hold_text(h)) }
      end
    end
    return v
  end

  --- Waits end by their deadline plus `bound`, unless their process was
  -- stopped meanwhile.
  function K.waits(logs, bound)
    local v = {}
    local stops = {}
    for _, f in ipairs(list(logs, "F")) do
      if f.kind == "stop" then stops[#stops + 1] = { f.t0, f.t1, f.who } end
    end
    local function check(what, task, t_s, t_e, timeout)
      if t_e - t_s > (timeout or 0) + bound and
          not in_fault(stops, t_s, t_e, proc_of(task)) then
        v[#v + 1] = { t = t_e, text = ("%s of %s took %.2f s, timeout %s"):
          format(what, task, t_e - t_s, tostring(timeout)) }
      end
    end
    for _, a in ipairs(list(logs, "A")) do
      check(a.kind .. " acquire", a.task, a.t_s, a.t_e, a.timeout)
    end
    for _, b in ipairs(list(logs, "BW")) do
      check("barrier wait", b.task, b.t_s, b.t_e, b.timeout)
    end
    for _, h in ipairs(list(logs, "H")) do
      if h.rel_t >= 0 and h.rel_e >= 0 then
        check(h.kind .. " release", h.task, h.rel_t, h.rel_e, 0)
      end
    end
    return v
  end
end
