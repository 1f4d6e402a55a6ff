-- The chaos run's generator (docs/testing.md, "The chaos run"): a seeded
-- random stream that gives the same numbers under Lua 5.1 to 5.4 and
-- LuaJIT, and the plan of a run (its targets: one lock path, semaphore,
-- election or barrier each, with the options they are used with) drawn
-- from it.  Pure: no server, no clock.  Each worker draws its own program
-- from G.stream(seed, worker index), op by op (spec/chaos/worker.lua).
local G = {}

-- Park and Miller's minimal standard generator (multiplier 48271): every
-- product stays below 2^47, exact in a double, so LuaJIT and Lua 5.4 draw
-- the same sequence.
local M = 2147483647
local Stream = {}
Stream.__index = Stream

--- A stream for `seed` (any number), mixed with `salt` (a worker index).
function G.stream(seed, salt)
  local s = math.floor(math.abs(tonumber(seed) or 1)) % M
  s = (s * 31 + (salt or 0) * 7919 + 12345) % M
  if s == 0 then s = 1 end
  local self = setmetatable({ s = s }, Stream)
  for _ = 1, 3 do self:next() end
  return self
end

function Stream:next()
  self.s = (self.s * 48271) % M
  return self.s
end

--- A float in [0, 1).
function Stream:float() return (self:next() - 1) / (M - 1) end

--- An integer in [lo, hi].
function Stream:int(lo, hi) return lo + self:next() % (hi - lo + 1) end

--- True with probability p.
function Stream:chance(p) return self:float() < p end

--- A uniform element of list.
function Stream:pick(list) return list[self:int(1, #list)] end

--- A key of `weights` ({ key = weight }), drawn by weight; keys are taken
-- in sorted order so that the draw does not depend on table order.
function Stream:weighted(weights)
  local keys, total = {}, 0
  for k, w in pairs(weights) do
    if w > 0 then keys[#keys + 1] = k; total = total + w end
  end
  table.sort(keys)
  local x = self:float() * total
  for _, k in ipairs(keys) do
    x = x - weights[k]
    if x < 0 then return k end
  end
  return keys[#keys]
end

--- A path of exactly `len` bytes under `dir` (the long-path option: the
-- limit is 4096, docs/limits.md).
function G.long_path(dir, tag, len)
  local p = dir .. "/" .. tag .. "-"
  return p .. string.rep("x", len - #p)
end

-- How many of each target a plan has, per profile size.
local COUNTS = { mutex = 3, rw = 2, smutex = 2, sem = 1, latch = 1,
  selector = 1, barrier = 1, dbarrier = 1 }

--- The plan of a run: targets under `root` for `workers` workers.
-- `opts` (a profile's `avoid`) leaves options out: `big` (no long paths),
-- `linger` (no lock caching), `cohort` (no lock cohorts).  `focus`
-- "cohort_write" or "renew" (issue 32's compositions, which meet in a lock
-- cohort) puts every mutex in one.
-- @return { seed, root, workers, targets = { name = target }, order =
-- { names... } }
function G.plan(seed, root, workers, opts, focus)
  opts = opts or {}
  local r = G.stream(seed, 0)
  local plan = { seed = seed, root = root, workers = workers, targets = {},
    order = {} }
  local function add(t)
    plan.targets[t.name] = t
    plan.order[#plan.order + 1] = t.name
  end
  for i = 1, COUNTS.mutex do
    local t = { name = "m" .. i, kind = "mutex" }
    -- one mutex in three on long paths, lock and guarded node alike (the
    -- guarded release's multi then nears the server's jute.maxbuffer)
    t.big = not opts.big and i == 3
    if t.big then
      -- (up to the longest a recipe path may be: docs/limits.md)
      t.path = G.long_path(root, "m" .. i, r:pick({ 3900, 4032 }))
      t.counter = G.long_path(root .. "/data", "m" .. i, 4096)
    else
      t.path = root .. "/m" .. i
      t.counter = root .. "/data/m" .. i
    end
    t.linger = r:chance(0.6) and r:pick({ 0.3, 1, 3 }) or nil
    if opts.linger then t.linger = nil end
    add(t)
  end
  for i = 1, COUNTS.rw do
    add({ name = "rw" .. i, kind = "rw", path = root .. "/rw" .. i,
      a = root .. "/data/rw" .. i .. "a", b = root .. "/data/rw" .. i .. "b",
      linger = r:chance(0.3) and 1 or nil })
  end
  for i = 1, COUNTS.smutex do
    add({ name = "sm" .. i, kind = "smutex", path = root .. "/sm" .. i,
      counter = root .. "/data/sm" .. i })
  end
  for i = 1, COUNTS.sem do
    -- (its counter: with_lock's updates alone, conditional, so exact
    -- across the leases; its notes: the leases' unconditional fenced
    -- writes and writes with the release, whose answers are checked)
    add({ name = "s" .. i, kind = "sem", path = root .. "/s" .. i,
      n = r:int(2, 3), counter = root .. "/data/s" .. i,
      notes = root .. "/data/s" .. i .. "n" })
  end
  add({ name = "l1", kind = "latch", path = root .. "/l1" })
  add({ name = "sel1", kind = "selector", path = root .. "/sel1" })
  add({ name = "b1", kind = "barrier", path = root .. "/b1",
    controller = r:int(1, workers) })
  -- the double barrier's members: 2 or 3 workers, one coroutine each
  local members, seen = {}, {}
  local m = math.min(workers, r:int(2, 3))
  while #members < m do
    local w = r:int(1, workers)
    if not seen[w] then seen[w] = true; members[#members + 1] = w end
  end
  table.sort(members)
  add({ name = "db1", kind = "dbarrier", path = root .. "/db1",
    members = members })
  -- lock cohorts (docs/design.md, section 16), on or off per target with
  -- a pass limit; drawn last, so that the draws above stay what they were
  -- for the seeds on record.  avoid.cohort: every one off.
  for _, name in ipairs(plan.order) do
    local t = plan.targets[name]
    if t.kind == "mutex" or t.kind == "rw" then
      t.cohort = r:chance(0.75) and not opts.cohort
      t.pass_limit = r:pick({ 0, 1, 3, 8 })
      if t.kind == "mutex" and not opts.cohort and
          (focus == "cohort_write" or focus == "renew") then
        t.cohort = true -- (after the draws: they stay what they were)
      end
    end
  end
  -- holds on TTL nodes (issue 36: docs/api.md, "Holds that outlive the
  -- process"): a mutex of its own, t1, out of plan.order (so that the
  -- workers' picks of a mutex stay what they were), drawn on a stream of
  -- its own; each worker's one TTL acquirer takes it with an id that its
  -- replacement shares (worker.lua).  avoid.ttl: none.
  if not opts.ttl then
    local rt = G.stream(seed, 131)
    plan.targets.t1 = { name = "t1", kind = "mutex", path = root .. "/t1",
      counter = root .. "/data/t1", ttl = rt:pick({ 1, 2, 4 }),
      cohort = false, pass_limit = 0 }
    plan.extra = { "t1" }
  end
  return plan
end

--- The names of the plan's targets of one kind, in plan order.
function G.of_kind(plan, kind)
  local out = {}
  for _, name in ipairs(plan.order) do
    if plan.targets[name].kind == kind then out[#out + 1] = name end
  end
  return out
end

--- A plan as Lua source (the workers load it with dofile).
function G.serialize(v, indent)
  indent = indent or ""
  if type(v) == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b)
      if type(a) == type(b) then return a < b end
      return type(a) == "number"
    end)
    local parts = {}
    for _, k in ipairs(keys) do
      local key = type(k) == "number" and ("[" .. k .. "]")
        or ("[" .. string.format("%q", k) .. "]")
      parts[#parts + 1] = indent .. "  " .. key .. " = " ..
        G.serialize(v[k], indent .. "  ")
    end
    return "{\n" .. table.concat(parts, ",\n") .. "\n" .. indent .. "}"
  elseif type(v) == "string" then
    return string.format("%q", v)
  else
    return tostring(v)
  end
end

return G
