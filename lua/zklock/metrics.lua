--- Metrics: per client and per process, for every recipe kind, the counts
-- of acquires, timeouts, failures, releases and losses, and the
-- distributions of wait and hold times (docs/design.md section 13).
--
-- A distribution is a log-linear histogram: 8 buckets per doubling from
-- 1 microsecond, so a quantile read from it is within about 4.5% of the
-- true one, at a cost of one `math.log` and two table writes an
-- observation. Buckets of different clients and processes add up, which
-- is how zklock.ngx merges its workers.
-- @module zklock.metrics
local M = {}

local log, floor, huge = math.log, math.floor, math.huge
local pairs, ipairs, tonumber, setmetatable =
  pairs, ipairs, tonumber, setmetatable
local sort, concat = table.sort, table.concat

local BASE = 1e-6 -- s: the lower bound of bucket 0
local SUB = 8 -- buckets per doubling
local SCALE = SUB / log(2)

-- (of the acquires: passes, those passed on within a lock cohort with no
-- request; the rest were handed over through ZooKeeper: docs/api.md)
M.COUNTERS = { "acquires", "timeouts", "errors", "releases", "losses",
  "passes" }
M.QUANTILES = { 0.5, 0.9, 0.99 }

--- A new, empty distribution.
function M.dist()
  return { n = 0, sum = 0, max = 0, b = {} }
end

--- Bucket number of `x` seconds (0 for anything up to BASE).
local function bucket(x)
  if x <= BASE or x ~= x then return 0 end
  return floor(log(x / BASE) * SCALE)
end
M.bucket = bucket

--- The geometric middle of bucket `i`: what a quantile in it reads as.
function M.middle(i)
  return BASE * 2 ^ ((i + 0.5) / SUB)
end

-- Add x, already clean (a number >= 0), in bucket i, to d.
local function add_at(d, x, i)
  d.n = d.n + 1
  d.sum = d.sum + x
  if x > d.max then d.max = x end
  local b = d.b
  b[i] = (b[i] or 0) + 1
end

-- x as a distribution takes it: a negative or NaN time counts as 0.
local function clean(x)
  if x < 0 or x ~= x then return 0 end
  return x
end

--- Add one observation of `x` seconds to distribution `d`.
local function observe(d, x)
  x = clean(x)
  add_at(d, x, bucket(x))
end
M.observe = observe

--- The `q` quantile (0 < q <= 1) of `d`, or nil when it is empty: the
-- middle of the bucket holding the observation of rank ceil(q * n), never
-- above the largest observation.
function M.quantile(d, q)
  if d.n == 0 then return nil end
  local keys = {}
  for i in pairs(d.b) do keys[#keys + 1] = i end
  sort(keys)
  local rank = q * d.n
  rank = rank > floor(rank) and floor(rank) + 1 or rank
  if rank < 1 then rank = 1 end
  local seen = 0
  for _, i in ipairs(keys) do
    seen = seen + d.b[i]
    if seen >= rank then
      local v = M.middle(i)
      return v < d.max and v or d.max
    end
  end
  return d.max
end

--- Add distribution `src` into `dst`.
function M.merge(dst, src)
  dst.n = dst.n + src.n
  dst.sum = dst.sum + src.sum
  if src.max > dst.max then dst.max = src.max end
  for i, c in pairs(src.b) do dst.b[i] = (dst.b[i] or 0) + c end
end

local function new_kind()
  local k = { wait = M.dist(), hold = M.dist() }
  for _, c in ipairs(M.COUNTERS) do k[c] = 0 end
  return k
end
M.new_kind = new_kind

-- kind name -> its figures, per client (weak) and for the whole process
local per_client = setmetatable({}, { __mode = "k" })
local process = {}
M.process = process

local enabled = true

--- Turn the recording on or off (on by default); for `make bench`.
function M.enable(on)
  enabled = on and true or false
end

local function kinds_of(client)
  local t = per_client[client]
  if not t then
    t = {}
    per_client[client] = t
  end
  return t
end

-- The figures of kind on client, and the process's: each observation
-- goes into both (its bucket reckoned once: every acquire and release
-- records one; issue 34).
local function pair(client, kind)
  local t = kinds_of(client)
  local k = t[kind]
  if not k then k = new_kind(); t[kind] = k end
  local p = process[kind]
  if not p then p = new_kind(); process[kind] = p end
  return k, p
end

local function count(client, kind, counter)
  if not enabled then return end
  local k, p = pair(client, kind)
  k[counter] = k[counter] + 1
  p[counter] = p[counter] + 1
end

--- An acquire of `kind` on `client` ended after `wait` seconds with `code`
-- (nil: it holds; pass: passed on within a lock cohort).
function M.acquire_ended(client, kind, wait, code, pass)
  if not enabled then return end
  if code ~= nil then
    return count(client, kind, code == "timeout" and "timeouts" or "errors")
  end
  local k, p = pair(client, kind)
  if pass then k.passes, p.passes = k.passes + 1, p.passes + 1 end
  k.acquires, p.acquires = k.acquires + 1, p.acquires + 1
  wait = clean(wait)
  local i = bucket(wait)
  add_at(k.wait, wait, i)
  add_at(p.wait, wait, i)
end

--- A hold of `kind` ended by its holder's release after `hold` seconds.
function M.released(client, kind, hold)
  if not enabled then return end
  local k, p = pair(client, kind)
  k.releases, p.releases = k.releases + 1, p.releases + 1
  hold = clean(hold)
  local i = bucket(hold)
  add_at(k.hold, hold, i)
  add_at(p.hold, hold, i)
end

--- A hold of `kind` ended without its holder's release (docs/api.md,
-- `lock_lost`): counted once, when the holder learns it.
function M.lost(client, kind)
  count(client, kind, "losses")
end

local function summary(d)
  local s = { count = d.n, sum = d.sum, max = d.n > 0 and d.max or nil }
  for _, q in ipairs(M.QUANTILES) do
    s["p" .. floor(q * 100 + 0.5)] = M.quantile(d, q)
  end
  return s
end

local function report(kinds)
  local out = {}
  for name, k in pairs(kinds or {}) do
    local r = { wait = summary(k.wait), hold = summary(k.hold) }
    for _, c in ipairs(M.COUNTERS) do r[c] = k[c] end
    out[name] = r
  end
  return out
end

--- `client`'s figures: kind -> { acquires, timeouts, errors, releases,
-- losses, wait = { count, sum, max, p50, p90, p99 }, hold = { ... } }.
function M.client_report(client)
  return report(per_client[client])
end

--- The whole process's figures, as client_report.
function M.process_report()
  return report(process)
end

-- ---------------------------------------------------------------------------
-- Serialized figures (to merge processes: zklock.ngx's workers) and the
-- Prometheus text exposition format

--- `kinds` as one line of text: kind counters... n sum max i:c i:c ...
function M.serialize(kinds)
  local lines = {}
  for name, k in pairs(kinds) do
    local f = { name }
    for _, c in ipairs(M.COUNTERS) do f[#f + 1] = k[c] end
    for _, d in ipairs { k.wait, k.hold } do
      local b = {}
      for i, c in pairs(d.b) do b[#b + 1] = i .. ":" .. c end
      f[#f + 1] = ("%d %.17g %.17g %s"):format(d.n, d.sum, d.max,
        #b > 0 and concat(b, ",") or "-")
    end
    lines[#lines + 1] = concat(f, " ")
  end
  return concat(lines, "\n")
end

local function parse_dist(n, sum, max, b)
  local d = { n = tonumber(n), sum = tonumber(sum), max = tonumber(max),
    b = {} }
  if b ~= "-" then
    for i, c in b:gmatch("(%-?%d+):(%d+)") do
      d.b[tonumber(i)] = tonumber(c)
    end
  end
  return d
end

--- Add the figures of serialized `text` into `kinds`; false if malformed.
function M.merge_text(kinds, text)
  for line in text:gmatch("[^\n]+") do
    local w = {}
    for x in line:gmatch("%S+") do w[#w + 1] = x end
    local nc = #M.COUNTERS
    if #w ~= 1 + nc + 8 then return false end
    local k = kinds[w[1]]
    if not k then k = new_kind(); kinds[w[1]] = k end
    for j, c in ipairs(M.COUNTERS) do k[c] = k[c] + (tonumber(w[1 + j]) or 0) end
    M.merge(k.wait, parse_dist(w[nc + 2], w[nc + 3], w[nc + 4], w[nc + 5]))
    M.merge(k.hold, parse_dist(w[nc + 6], w[nc + 7], w[nc + 8], w[nc + 9]))
  end
  return true
end

local HELP = {
  acquires = "Holds taken: acquires that returned the lock or lease.",
  timeouts = "Acquires that gave up at their timeout.",
  errors = "Acquires that failed otherwise (session, connection, ACL).",
  releases = "Holds ended by their holder's release.",
  losses = "Holds that ended without their holder's release " ..
    "(session expired, node deleted, max_hold).",
  passes = "Of the acquires, those passed on within a lock cohort, with " ..
    "no request (the rest went through ZooKeeper).",
}

local function num(x)
  if x == huge then return "+Inf" end
  if x ~= x then return "NaN" end
  return ("%.9g"):format(x)
end

--- `kinds` in the Prometheus text exposition format (version 0.0.4).
function M.prometheus(kinds)
  local names = {}
  for name in pairs(kinds) do names[#names + 1] = name end
  sort(names)
  local out = {}
  local function add(s) out[#out + 1] = s end
  for _, c in ipairs(M.COUNTERS) do
    local metric = "zklock_" .. c .. "_total"
    add("# HELP " .. metric .. " " .. HELP[c])
    add("# TYPE " .. metric .. " counter")
    for _, name in ipairs(names) do
      add(('%s{kind="%s"} %s'):format(metric, name, num(kinds[name][c])))
    end
  end
  for _, which in ipairs { "wait", "hold" } do
    local metric = "zklock_" .. which .. "_seconds"
    add("# HELP " .. metric .. (which == "wait"
      and " Time from acquire to hold, of the acquires that held."
      or " Time from hold to release, of the holds released."))
    add("# TYPE " .. metric .. " summary")
    for _, name in ipairs(names) do
      local d = kinds[name][which]
      for _, q in ipairs(M.QUANTILES) do
        add(('%s{kind="%s",quantile="%s"} %s'):format(metric, name,
          num(q), num(M.quantile(d, q) or 0 / 0)))
      end
      add(('%s_sum{kind="%s"} %s'):format(metric, name, num(d.sum)))
      add(('%s_count{kind="%s"} %s'):format(metric, name, num(d.n)))
    end
  end
  return concat(out, "\n") .. "\n"
end

return M
