-- The chaos run's checkers: pure functions over the workers' logs and the
-- driver's own (faults, deletions, revocations), so that each is proven on
-- made-up logs (spec/chaos_check_spec.lua) as well as on deliberately
-- broken recipes (spec/chaos_spec.lua).  The log format is written by
-- spec/chaos/worker.lua; what each checker asserts is in docs/testing.md,
-- "The chaos run".
local K = {}

local function num(s) return tonumber(s) end

-- field specs: name list per line kind (the last field takes the rest)
local FIELDS = {
  H = { "kind", "target", "task", "ts", "t0", "t1", "lost", "flip", "token",
    "mh", "rel_t", "rel_e", "rel", "pass", "node" },
  A = { "kind", "target", "task", "t_s", "t_q", "t_e", "res", "code",
    "timeout" },
  P = { "target", "token", "v" },
  W = { "target", "token", "zxid", "v", "pass", "what" },
  V = { "target", "token", "which", "zxid", "v", "what" },
  R = { "target", "task", "t0", "held", "a", "b" },
  BS = { "target", "t" },
  BR = { "target", "t" },
  BW = { "target", "task", "t_s", "t_e", "res", "timeout" },
  DE = { "target", "k", "p", "t_s", "t_e", "res" },
  DL = { "target", "k", "p", "t_s", "t_e", "res" },
  E = { "p", "task", "t", "what", "msg" },
  S = { "p", "pid", "t" },
  D = { "p", "t" },
  -- the driver's: F kind t0 t1 who; X t node; Y t target
  F = { "kind", "t0", "t1", "who" },
  X = { "t", "node" },
  Y = { "t", "target" },
}
local NUMERIC = { ts = 1, t0 = 1, t1 = 1, lost = 1, flip = 1, token = 1,
  mh = 1, rel_t = 1, rel_e = 1, t_s = 1, t_q = 1, t_e = 1, timeout = 1,
  v = 1, zxid = 1, t = 1, k = 1, held = 1, pass = 1 }

--- Parse log text into records by kind: { H = {...}, A = {...}, ... }.
function K.parse(text, into)
  local out = into or {}
  for line in (text or ""):gmatch("[^\n]+") do
    local kind, rest = line:match("^(%u%u?) (.*)$")
    local names = kind and FIELDS[kind]
    if names then
      local rec, i, pos = {}, 1, 1
      while i <= #names do
        local name = names[i]
        local v
        if i == #names then
          v = rest:sub(pos)
        else
          local s, e = rest:find(" ", pos, true)
          if not s then v = rest:sub(pos); pos = #rest + 1
          else v = rest:sub(pos, s - 1); pos = e + 1 end
        end
        rec[name] = NUMERIC[name] and num(v) or v
        i = i + 1
      end
      out[kind] = out[kind] or {}
      out[kind][#out[kind] + 1] = rec
    end
  end
  return out
end

local function list(logs, kind) return logs[kind] or {} end

-- the worker index of a task name "g1/3.0" or a process tag "3.0"
local function proc_of(task) return task:match("([%d]+)%.%d+$") end

-- ---------------------------------------------------------------------------
-- windows of trouble: a fault excuses what it may explain

--- Faults as windows { t0, t1, who } stretched by `after` seconds (the
-- time a session may take to end after it).
local function windows(logs, after)
  local w = {}
  for _, f in ipairs(list(logs, "F")) do
    w[#w + 1] = { f.t0, f.t1 + after, f.who, f.kind }
  end
  return w
end

local function in_fault(ws, a, b, who)
  for _, w in ipairs(ws) do
    if w[1] < b and a < w[2] and (not who or w[3] == "all" or w[3] == who)
    then
      return true
    end
  end
  return false
end

-- ---------------------------------------------------------------------------
-- the checkers: each returns a list of violations { t = when, text = ... }

-- Which hold kinds exclude which, per target kind.
local function conflicts(a, b)
  if a.kind == "lease" then return false end -- counted, not paired
  if a.kind == "read" and b.kind == "read" then return false end
  if (a.kind == "read" or b.kind == "read") and a.task == b.task then
    return false -- a downgrade: the same holder
  end
  return true
end

local function hold_text(h)
  return ("%s %s of %s [%.3f, %.3f] token %s"):format(h.kind, h.target,
    h.task, h.t0, h.t1, tostring(h.token))
end

-- Tokens are (czxid, pass) pairs: a lock cohort's passes share the node's
-- czxid (docs/design.md, section 16).  Does a's come before b's?
local function token_before(a, b)
  return a.token < b.token or
    (a.token == b.token and (a.pass or 0) < (b.pass or 0))
end

-- The hold records (H) that keep(h) says, by target, in log order.
local function holds_by_target(logs, keep)
  local by = {}
  for _, h in ipairs(list(logs, "H")) do
    if keep(h) then
      by[h.target] = by[h.target] or {}
      table.insert(by[h.target], h)
    end
  end
  return by
end

--- Exclusion: believed holds ([t0, t1]) of one target never overlap where
-- they exclude (mutex, write, smutex, leader; read against write), and a
-- semaphore's leases never exceed its count. A hold whose node the chaos
-- actor deleted is excused from then on (it learns of it by a watch).
function K.exclusion(logs, plan)
  local v = {}
  local deleted = {}
  for _, x in ipairs(list(logs, "X")) do
    if not deleted[x.node] or x.t < deleted[x.node] then deleted[x.node] = x.t end
  end
  local by = holds_by_target(logs, function(h) return h.t1 > h.t0 end)
  for target, holds in pairs(by) do
    table.sort(holds, function(a, b) return a.t0 < b.t0 end)
    local t = plan and plan.targets[target]
    if t and t.kind == "sem" then
      local ev = {}
      for _, h in ipairs(holds) do
        ev[#ev + 1] = { h.t0, 1, h }
        ev[#ev + 1] = { h.t1, -1, h }
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
-- token (writes of holds never interleave), and the final value is the
-- count of accepted increments (plus at most those of unknown outcome).
-- `finals`: { target = value }.
function K.fencing(logs, finals)
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
    for _, w in ipairs(acc) do
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
        "unknown %d: lost updates"):format(target, final, lo, hi - lo) }
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

--- FIFO (mutexes): an acquire that started after a contender was queued
-- does not hold before it, unless a fault, a deletion or a revocation
-- fell in between (they requeue). Lock caching keeps to it too (api.md:
-- "no cached acquire jumps ahead" of a contender).  In lock cohorts, the
-- order of the nodes (below).
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
  local function cohort(name)
    local t = plan and plan.targets[name]
    return t and t.cohort
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
              "did not leave (%s)"):format(key, m, l and l.res or "no leave") }
          end
        end
      end
    end
  end
  return v
end

K.CHECKS = { "exclusion", "fencing", "rw", "contract", "waits", "fifo",
  "wedges", "barrier", "dbarrier", "processes", "orphans" }

--- Run every checker. `env`: { plan, finals, st, t_start, processes =
-- { {p, status, killed, hung}... }, orphans = { paths } }.
-- @return summary { ok, counts = { check = n }, first = { check = {t,
-- text} }, holds, line }
function K.check(logs, env)
  local st = env.st or 2
  local after = 2 * st + 2
  local res = {
    exclusion = K.exclusion(logs, env.plan),
    fencing = K.fencing(logs, env.finals),
    rw = K.rw(logs),
    contract = K.contract(logs),
    waits = K.waits(logs, env.wait_bound or (3 * st + 5)),
    fifo = K.fifo(logs, env.plan, after),
    wedges = K.wedges(logs, env.plan, env.gap or 3, after),
    barrier = K.barrier(logs),
    dbarrier = K.dbarrier(logs, env.plan, after),
    processes = {},
    orphans = {},
  }
  for _, p in ipairs(env.processes or {}) do
    if p.hung then
      res.processes[#res.processes + 1] = { t = 0, text = "worker " .. p.p ..
        " did not finish" }
    elseif not p.killed and p.status ~= 0 then
      res.processes[#res.processes + 1] = { t = 0, text = ("worker %s " ..
        "exited %s: %s"):format(p.p, tostring(p.status), p.output or "") }
    end
  end
  for _, o in ipairs(env.orphans or {}) do
    res.orphans[#res.orphans + 1] = { t = 0, text = "orphan node " .. o }
  end
  local s = { ok = true, counts = {}, first = {}, found = res }
  local parts = {}
  for _, name in ipairs(K.CHECKS) do
    local list_ = res[name]
    s.counts[name] = #list_
    if #list_ > 0 then
      s.ok = false
      local first = list_[1]
      for _, x in ipairs(list_) do
        if x.t > 0 and (first.t == 0 or x.t < first.t) then first = x end
      end
      s.first[name] = first
    end
    parts[#parts + 1] = name .. "=" .. #list_
  end
  local kinds = {}
  for _, h in ipairs(list(logs, "H")) do
    kinds[h.kind] = (kinds[h.kind] or 0) + 1
  end
  local kl, holds = {}, 0
  for k, n in pairs(kinds) do kl[#kl + 1] = k .. "=" .. n; holds = holds + n end
  table.sort(kl)
  s.holds, s.by_kind = holds, kinds
  s.line = ("holds %d (%s); violations: %s"):format(holds,
    table.concat(kl, " "), table.concat(parts, " "))
  return s
end

return K
