-- The chaos run's checkers of barriers (spec/chaos/check.lua): no wait
-- passes a standing barrier; a double barrier's members enter and leave
-- together.
return function(K, U)
  local list, windows, in_fault = U.list, U.windows, U.in_fault

  --- Barrier: no wait returns true while the barrier stands (set before
  -- the wait began, not yet removed when it returned).
  function K.barrier(logs)
    local v = {}
    local ev = {}
    for _, s in ipairs(list(logs, "BS")) do ev[#ev + 1] = { s.t, "set" } end
    for _, r in ipairs(list(logs, "BR")) do ev[#ev + 1] = { r.t, "remove" } end
    table.sort(ev, function(a, b) return a[1] < b[1] end)
    for _, w in ipairs(list(logs, "BW")) do
      if w.res == "ok" then
        local standing = false
        for _, e in ipairs(ev) do
          if e[1] > w.t_e then break end
          if e[2] == "set" and e[1] <= w.t_s then standing = true
          elseif e[2] == "remove" then standing = false end
        end
        if standing then
          v[#v + 1] = { t = w.t_e, text = ("barrier wait of %s returned at " ..
            "%.3f while the barrier stood"):format(w.task, w.t_e) }
        end
      end
    end
    return v
  end

  --- Double barrier, per round: nobody enters before every member arrived,
  -- nobody leaves before every member began to leave, and in a round with
  -- no fault every member that entered leaves.
  function K.dbarrier(logs, plan, after)
    local v = {}
    local ws = windows(logs, after or 0)
    local rounds = {}
    for _, kind in ipairs({ "DE", "DL" }) do
      for _, r in ipairs(list(logs, kind)) do
        local key = r.target .. "/" .. r.k
        rounds[key] = rounds[key] or { DE = {}, DL = {}, target = r.target }
        rounds[key][kind][r.p:match("^(%d+)")] = r
      end
    end
    for key, rd in pairs(rounds) do
      local t = plan and plan.targets[rd.target]
      local members = t and t.members or {}
      local all_in, lo, hi = true, math.huge, -math.huge
      for _, m in ipairs(members) do
        local e = rd.DE[tostring(m)]
        if not e or e.res ~= "ok" then all_in = false end
        if e then lo = math.min(lo, e.t_s); hi = math.max(hi, e.t_e) end
      end
      for p, e in pairs(rd.DE) do
        if e.res == "ok" then
          for q, f in pairs(rd.DE) do
            if f.t_s > e.t_e + 0.05 then
              v[#v + 1] = { t = e.t_e, text = ("%s: member %s entered at " ..
                "%.3f, before member %s arrived (%.3f)"):format(key, p, e.t_e,
                q, f.t_s) }
            end
          end
        end
      end
      -- (a member whose session a fault ended has left by then)
      for p, l in pairs(rd.DL) do
        if l.res == "ok" and not in_fault(ws, lo, l.t_e) then
          for q, e in pairs(rd.DE) do
            local lq = rd.DL[q]
            if e.res == "ok" and lq and lq.t_s > l.t_e + 0.05 then
              v[#v + 1] = { t = l.t_e, text = ("%s: member %s left at %.3f, " ..
                "before member %s began to leave (%.3f)"):format(key, p,
                l.t_e, q, lq.t_s) }
            end
          end
        end
      end
      if all_in and #members > 0 then
        local last = hi
        for _, l in pairs(rd.DL) do last = math.max(last, l.t_e) end
        if not in_fault(ws, lo, last) then
          for _, m in ipairs(members) do
            local l = rd.DL[tostring(m)]
            if not l or l.res ~= "ok" then
              v[#v + 1] = { t = last, text = ("%s: member %d entered and " ..
                "did not leave (%s)"):format(key, m,
                l and l.res or "no leave") }
            end
          end
        end
      end
    end
    return v
  end
end
