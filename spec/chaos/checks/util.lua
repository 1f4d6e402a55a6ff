-- What the chaos run's checkers share (spec/chaos/check.lua): the records
-- of a kind, the process of a task, fault windows, which holds exclude
-- each other, a hold in words, the (czxid, pass) order of tokens, hold
-- records by target, a hold's time limits (max_hold and its extends).
local U = {}

function U.list(logs, kind) return logs[kind] or {} end
local list = U.list

-- the worker index of a task name "g1/3.0" or a process tag "3.0"
function U.proc_of(task) return task:match("([%d]+)%.%d+$") end

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

-- ---------------------------------------------------------------------------
-- a hold's time limit, as its max_hold and extends set it (issue 33)

--- The XT records (extends) by hold id, each list in call order.
function U.extends(logs)
  local by = {}
  for _, x in ipairs(list(logs, "XT")) do
    by[x.id] = by[x.id] or {}
    table.insert(by[x.id], x)
  end
  for _, l in pairs(by) do
    table.sort(l, function(a, b) return a.x_s < b.x_s end)
  end
  return by
end

--- The limits of hold h, as segments { from, upper, lower } in time
-- order: from time `from` on (until the next one's), C ends the hold by
-- `upper` at the latest and not before `lower` (math.huge: no end).  Its
-- max_hold counts from its start, in [ts, t0] (ts unknown, -1: no lower
-- bound); an extend that answered ok (xts: its XT records) moves the end
-- to seconds from a moment in [x_s, x_e] (secs -1: none), and while it
-- is under way either end holds; one that answered "maybe" (a
-- multilock's member, perhaps extended) keeps both from then on.
function U.schedule(h, xts)
  local none = math.huge
  local up, lo = none, none
  if h.mh and h.mh > 0 then
    up = h.t0 + h.mh
    lo = h.ts and h.ts >= 0 and h.ts + h.mh or -none
  end
  local segs = { { from = -none, upper = up, lower = lo } }
  for _, x in ipairs(xts or {}) do
    if x.res == "ok" or x.res == "maybe" then
      local nu = x.secs < 0 and none or x.x_e + x.secs
      local nl = x.secs < 0 and none or x.x_s + x.secs
      local prev = segs[#segs]
      local both = { from = x.x_s, upper = math.max(prev.upper, nu),
        lower = math.min(prev.lower, nl) }
      segs[#segs + 1] = both
      segs[#segs + 1] = x.res == "ok" and
        { from = x.x_e, upper = nu, lower = nl } or
        { from = x.x_e, upper = both.upper, lower = both.lower }
    end
  end
  return segs
end

--- The segment of `segs` in force at time t.
function U.limit_at(segs, t)
  local s = segs[1]
  for _, x in ipairs(segs) do
    if x.from <= t then s = x end
  end
  return s
end

--- When hold h is over by its limit for sure: the first end (plus
-- `margin`) that no extend began before; math.huge: never.
function U.limit_end(segs, margin)
  for i, s in ipairs(segs) do
    local nxt = segs[i + 1] and segs[i + 1].from or math.huge
    if s.upper < math.huge and s.upper + margin < nxt then
      return s.upper + margin
    end
  end
  return math.huge
end

U.windows, U.in_fault, U.conflicts, U.hold_text = windows, in_fault,
  conflicts, hold_text
U.token_before, U.holds_by_target = token_before, holds_by_target
return U
