-- The chaos run's checkers of holds (spec/chaos/check.lua): exclusion
-- (believed holds never overlap where they exclude), fencing (accepted
-- fenced writes in token order, the counter's final value), rw (no
-- two-node update seen half done).
return function(K, U)
  local list, hold_text, token_before, holds_by_target = U.list,
    U.hold_text, U.token_before, U.holds_by_target
  local conflicts = U.conflicts

  --- Exclusion: believed holds ([t0, t1]) of one target never overlap where
  -- they exclude (mutex, write, smutex, leader; read against write), and a
  -- semaphore's leases never exceed its count. A hold whose node the chaos
  -- actor deleted is excused from then on (it learns of it by a watch).
  function K.exclusion(logs, plan)
    local v = {}
    local deleted = {}
    for _, x in ipairs(list(logs, "X")) do
      if not deleted[x.node] or x.t < deleted[x.node] then
        deleted[x.node] = x.t
      end
    end
    local by = holds_by_target(logs, function(h) return h.t1 > h.t0 end)
    for target, holds in pairs(by) do
      table.sort(holds, function(a, b) return a.t0 < b.t0 end)
      local t = plan and plan.targets[target]
      if t and t.kind == "sem" then
        -- (a lease whose node the chaos actor deleted counts until then;
        -- one whose node is unknown, "-", until any lease's deletion)
        local dels = {}
        for node, at in pairs(deleted) do
          if node:sub(1, #t.path + 8) == t.path .. "/leases/" then
            dels[#dels + 1] = at
          end
        end
        local ev = {}
        for _, h in ipairs(holds) do
          local t1 = h.t1
          if deleted[h.node] then t1 = math.min(t1, deleted[h.node]) end
          if h.node == "-" then
            for _, at in ipairs(dels) do
              if at > h.t0 then t1 = math.min(t1, at) end
            end
          end
          if t1 > h.t0 then
            ev[#ev + 1] = { h.t0, 1, h }
            ev[#ev + 1] = { t1, -1, h }
          end
        end
        table.sort(ev, function(a, b)
          if a[1] ~= b[1] then return a[1] < b[1] end
          return a[2] < b[2]
        end)
        local cur = 0
        for _, e in ipairs(ev) do
          cur = cur + e[2]
          if cur > t.n then
            v[#v + 1] = { t = e[1], text = ("%d leases of %s (max %d) at " ..
              "%.3f, newest %s"):format(cur, target, t.n, e[1],
              hold_text(e[3])) }
          end
        end
      else
        local active = {}
        for _, b in ipairs(holds) do
          local keep = {}
          for _, a in ipairs(active) do
            if a.t1 > b.t0 then
              keep[#keep + 1] = a
              local excused = deleted[a.node] and deleted[a.node] <= b.t0 or
                deleted[b.node] and deleted[b.node] <= b.t0
              if not excused and conflicts(a, b) then
                v[#v + 1] = { t = b.t0, text = "two holders: " ..
                  hold_text(a) .. " and " .. hold_text(b) }
              end
            end
          end
          keep[#keep + 1] = b
          active = keep
        end
      end
    end
    return v
  end

  --- Fencing: per counter, accepted writes in zxid order never go back in
  -- token (writes of holds never interleave; not a semaphore's, whose
  -- leases are held at once, nor its notes, no target of the plan), and
  -- the final value is the count of accepted increments (plus at most
  -- those of unknown outcome; a semaphore's counter is written by
  -- with_lock's conditional updates alone, so it stays exact too).
  -- `finals`: { target = value }.
  function K.fencing(logs, finals, plan)
    local function exclusive(target)
      if not plan then return true end
      local t = plan.targets[target]
      return t ~= nil and t.kind ~= "sem"
    end
    local v = {}
    local by, unknown, sent = {}, {}, {}
    for _, p in ipairs(list(logs, "P")) do
      sent[p.target] = (sent[p.target] or 0) + 1
    end
    local answered = {}
    for _, w in ipairs(list(logs, "W")) do
      by[w.target] = by[w.target] or {}
      answered[w.target] = (answered[w.target] or 0) + 1
      if w.what == "ok" then table.insert(by[w.target], w)
      elseif w.what == "unknown" then
        unknown[w.target] = (unknown[w.target] or 0) + 1
      end
    end
    for target, acc in pairs(by) do
      table.sort(acc, function(a, b) return a.zxid < b.zxid end)
      local top
      for _, w in ipairs(exclusive(target) and acc or {}) do
        if w.zxid > 0 and w.token > 0 then -- (0: token unknown)
          if top and token_before(w, top) then
            v[#v + 1] = { t = 0, text = ("%s: write of token %s pass %d " ..
              "(zxid %s) after one of token %s pass %d"):format(target,
              tostring(w.token), w.pass or 0, tostring(w.zxid),
              tostring(top.token), top.pass or 0) }
          end
          if not top or token_before(top, w) then top = w end
        end
      end
    end
    for target, final in pairs(finals or {}) do
      local lo = by[target] and #by[target] or 0
      local hi = lo + (unknown[target] or 0) +
        math.max(0, (sent[target] or 0) - (answered[target] or 0))
      if final < lo or final > hi then
        v[#v + 1] = { t = 0, text = ("%s: counter %d, accepted %d, " ..
          "unknown %d: %s"):format(target, final, lo, hi - lo,
          final < lo and "lost updates" or
          "more updates than accepted (a write answered as not applied " ..
          "was)") }
      end
    end
    return v
  end

  --- Read/write: a reader believed held through its reads never sees the
  -- two nodes of a writer's update apart, unless that writer's second write
  -- was refused (its hold ended between them).
  function K.rw(logs)
    local v = {}
    local second = {} -- value -> outcome of its "b" write
    for _, w in ipairs(list(logs, "V")) do
      if w.which == "b" then second[w.v] = w.what end
    end
    for _, r in ipairs(list(logs, "R")) do
      if r.held == 1 and r.a ~= r.b and r.a ~= "-" and second[r.a] == "ok" then
        v[#v + 1] = { t = r.t0, text = ("%s: reader %s saw a=%s b=%s, " ..
          "a writer's update half done"):format(r.target, r.task, r.a, r.b) }
      end
    end
    return v
  end
end
