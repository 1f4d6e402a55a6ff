-- The chaos run's checkers of the calls' contract (spec/chaos/check.lua):
-- no Lua error where api.md promises none, is_held() and max_hold kept;
-- every wait ends by its timeout plus a bound.
return function(K, U)
  local list, hold_text, in_fault, proc_of = U.list, U.hold_text,
    U.in_fault, U.proc_of

  --- The calls' contract (api.md): no Lua error where none is promised;
  -- is_held() never true on a node other than the hold's own (someone
  -- else's hold believed); a hold past its max_hold neither believed nor
  -- released as "ok".  (is_held() false then true again on the same node is
  -- allowed: design.md, section 9.2.)
  function K.contract(logs, margin)
    margin = margin or 0.25
    local v = {}
    for _, e in ipairs(list(logs, "E")) do
      v[#v + 1] = { t = e.t or 0, text = ("%s %s: %s raised %s"):format(e.p,
        e.task, e.what, e.msg) }
    end
    for _, h in ipairs(list(logs, "H")) do
      if h.flip == 1 then
        v[#v + 1] = { t = h.t1, text = "is_held() true on another node " ..
          "than the hold's: " .. hold_text(h) }
      end
      if h.mh > 0 and h.t1 > h.t0 + h.mh + margin then
        v[#v + 1] = { t = h.t1, text = ("is_held() true %.2f s after the " ..
          "acquire, past max_hold %s: %s"):format(h.t1 - h.t0, tostring(h.mh),
          hold_text(h)) }
      end
      if h.rel == "ok" and h.mh > 0 and h.rel_t > h.t0 + h.mh + margin then
        v[#v + 1] = { t = h.rel_t, text = ("released ok %.2f s after the " ..
          "acquire, past max_hold %s: %s"):format(h.rel_t - h.t0,
          tostring(h.mh), hold_text(h)) }
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
