-- What the chaos run's checkers share (spec/chaos/check.lua): the records
-- of a kind, the process of a task, fault windows, which holds exclude
-- each other, a hold in words, the (czxid, pass) order of tokens, hold
-- records by target.
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

U.windows, U.in_fault, U.conflicts, U.hold_text = windows, in_fault,
  conflicts, hold_text
U.token_before, U.holds_by_target = token_before, holds_by_target
return U
