-- The chaos run's checkers of order and progress (spec/chaos/check.lua):
-- fifo (no acquire jumps a queued contender; in a lock cohort, the order
-- of the nodes) and wedges (a wait that timed out while the lock was
-- free).
return function(K, U)
  local list, windows, in_fault, token_before, holds_by_target = U.list,
    U.windows, U.in_fault, U.token_before, U.holds_by_target

  --- FIFO (mutexes): an acquire that started after a contender was queued
  -- does not hold before it, unless a fault, a deletion or a revocation
  -- fell in between (they requeue). Lock caching keeps to it too (api.md:
  -- "no cached acquire jumps ahead" of a contender).  In lock cohorts and
  -- on TTL nodes, the order of the nodes (below).
  function K.fifo(logs, plan, after)
    local v = {}
    local ws = windows(logs, after or 0)
    -- deletions and revocations, by target
    local touched = {}
    local function touch(name, t)
      touched[name] = touched[name] or {}
      table.insert(touched[name], { t, t + 1, "all" })
    end
    for _, x in ipairs(list(logs, "X")) do
      for name, t in pairs(plan and plan.targets or {}) do
        if x.node:sub(1, #t.path + 1) == t.path .. "/" then touch(name, x.t) end
      end
    end
    for _, y in ipairs(list(logs, "Y")) do touch(y.target, y.t) end
    local holds = holds_by_target(logs, function(h)
      return h.kind == "mutex" and h.ts >= 0
    end)
    -- A target in lock cohorts (docs/design.md, section 16): a process's
    -- waiters have no node of their own, and a remote contender may be
    -- passed over up to pass_limit times, so its order is the nodes':
    -- holds in time order (they exclude each other) never go back to an
    -- older node (a smaller czxid; one pass after another on the same
    -- node), since a node held first outlived every older one.
    -- A target on TTL nodes (issue 36) too: a node outlives its process's
    -- session, and the acquire that takes it back holds (or waits) in its
    -- old place, ahead of contenders queued since.
    local function cohort(name)
      local t = plan and plan.targets[name]
      return t and (t.cohort or t.ttl)
    end
    local by_node = holds_by_target(logs, function(h)
      return h.kind == "mutex" and cohort(h.target)
    end)
    for name, sorted in pairs(by_node) do
      table.sort(sorted, function(a, b) return a.t0 < b.t0 end)
      local top
      for _, x in ipairs(sorted) do
        if x.token > 0 then
          if top and token_before(x, top) and
              not in_fault(ws, top.t0 - 1, x.t0) and
              not in_fault(touched[name] or {}, top.t0 - 1, x.t0) then
            v[#v + 1] = { t = x.t0, text = ("%s: %s held at %.3f on " ..
              "token %s pass %d, after %s held a newer one (token %s " ..
              "pass %d, at %.3f)"):format(name, x.task, x.t0,
              tostring(x.token), x.pass or 0, top.task, tostring(top.token),
              top.pass or 0, top.t0) }
            break
          end
          if not top or token_before(top, x) then top = x end
        end
      end
    end
    for _, c in ipairs(list(logs, "A")) do
      if c.kind == "mutex" and c.t_q >= 0 and not cohort(c.target) and
          (not plan or plan.targets[c.target].kind == "mutex") then
        -- (a wait that failed ended at its deadline, whenever its coroutine
        -- ran again to say so)
        local c_end = c.t_e
        if c.res ~= "ok" and c.timeout then
          c_end = math.min(c_end, c.t_s + c.timeout)
        end
        for _, x in ipairs(holds[c.target] or {}) do
          if x.ts > c.t_q + 0.1 and x.t0 < c_end - 0.01 and x.task ~= c.task
              and not in_fault(ws, c.t_q - 1, x.t0)
              and not in_fault(touched[c.target] or {}, c.t_q - 1, x.t0) then
            v[#v + 1] = { t = x.t0, text = ("%s: %s started at %.3f, after " ..
              "%s queued (%.3f), and held first (%.3f; the contender's wait " ..
              "ended %.3f, %s)"):format(c.target, x.task, x.ts, c.task, c.t_q,
              x.t0, c.t_e, c.res) }
            break
          end
        end
      end
    end
    return v
  end

  --- Wedges: an exclusive wait that timed out while nobody held the target
  -- for `gap` seconds of it, with no fault about.
  function K.wedges(logs, plan, gap, after)
    local v = {}
    local ws = windows(logs, after or 0)
    local busy = {}
    local hs = list(logs, "H")
    for _, h in ipairs(hs) do
      busy[h.target] = busy[h.target] or {}
      local e = math.max(h.t1, h.rel_e)
      if h.rel == "none" then
        -- dropped for garbage collection: its node goes when the collector
        -- gets to the object (api.md), which nothing bounds; it may be
        -- there until the next hold of the target begins
        e = math.huge
        for _, x in ipairs(hs) do
          if x.target == h.target and x.t0 > h.t0 and x.t0 < e then e = x.t0 end
        end
      end
      table.insert(busy[h.target], { h.t0, e })
    end
    -- a multilock holds its first members while it waits for the next
    for _, a in ipairs(list(logs, "A")) do
      if a.kind == "multi" then
        for name in a.target:gmatch("[^+]+") do
          busy[name] = busy[name] or {}
          table.insert(busy[name], { a.t_s, a.t_e })
        end
      end
    end
    for _, list_ in pairs(busy) do
      table.sort(list_, function(a, b) return a[1] < b[1] end)
    end
    for _, a in ipairs(list(logs, "A")) do
      local t = plan and plan.targets[a.target]
      if (a.kind == "mutex" or a.kind == "write" or a.kind == "smutex") and
          t and a.res == "fail" and a.code == "timeout" and
          a.t_e - a.t_s >= gap and not in_fault(ws, a.t_s, a.t_e) then
        -- the longest stretch of the wait with no hold of the target
        local free_from, longest = a.t_s, 0
        for _, b in ipairs(busy[a.target] or {}) do
          if b[2] > free_from and b[1] < a.t_e then
            if b[1] > free_from then
              longest = math.max(longest, b[1] - free_from)
            end
            free_from = math.max(free_from, b[2])
          end
        end
        longest = math.max(longest, a.t_e - free_from)
        if longest >= gap then
          v[#v + 1] = { t = a.t_e, text = ("%s: %s waited %.2f s and timed " ..
            "out, the lock free for %.2f s of it"):format(a.target, a.task,
            a.t_e - a.t_s, longest) }
        end
      end
    end
    return v
  end
end
