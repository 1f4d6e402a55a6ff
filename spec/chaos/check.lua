-- The chaos run's checkers: pure functions over the workers' logs and the
-- driver's own (faults, deletions, revocations), so that each is proven on
-- made-up logs (spec/chaos_check_spec.lua) as well as on deliberately
-- broken recipes (spec/chaos_spec.lua).  The log format is written by
-- spec/chaos/worker_log.lua; what each checker asserts is in
-- docs/testing.md, "The chaos run".  This file parses the logs and runs
-- the checkers, which live in spec/chaos/checks/: holds.lua (exclusion,
-- fencing, rw), contract.lua (contract, waits), answers.lua (each error
-- code true of the world: part of the contract), ends.lua (how holds end:
-- extend, callbacks; part of the contract too), order.lua (fifo,
-- wedges), barriers.lua (barrier, dbarrier), killed.lua (nginx workers
-- killed), tokens.lua (zklock.check_token's answers), what they share in
-- util.lua.
local K = {}

local function num(s) return tonumber(s) end

-- field specs: name list per line kind (the last field takes the rest)
local FIELDS = {
  H = { "kind", "target", "task", "ts", "t0", "t1", "lost", "flip", "token",
    "mh", "rel_t", "rel_e", "rel", "pass", "node", "cl", "id" },
  A = { "kind", "target", "task", "t_s", "t_q", "t_e", "res", "code",
    "timeout", "cl", "e0", "e1" },
  P = { "target", "token", "v", "tag" },
  W = { "target", "token", "zxid", "v", "pass", "what", "tag", "call", "id",
    "t_s" },
  -- a hold's extend (secs -1: math.huge; t1b: its last is_held() true
  -- before the call; after: is_held() just after, 1 or 0), and a
  -- callback told of a hold (a lease's on_lost or on_revoke, "lost",
  -- "revoke"; a multilock's, "mlost", "mrevoke"; id "-": a lease not the
  -- worker's, "?": a lock not the multilock's; rel: "released" in it, or
  -- "kept"; t, t_e: the callback's start and end)
  XT = { "id", "target", "task", "x_s", "x_e", "secs", "res", "t1b",
    "after" },
  CB = { "id", "what", "t", "target", "task", "rel", "t_e" },
  V = { "target", "token", "which", "zxid", "v", "what" },
  R = { "target", "task", "t0", "held", "a", "b" },
  BS = { "target", "t" },
  BR = { "target", "t" },
  BW = { "target", "task", "t_s", "t_e", "res", "timeout", "e0", "e1" },
  DE = { "target", "k", "p", "t_s", "t_e", "res", "timeout", "e0", "e1" },
  DL = { "target", "k", "p", "t_s", "t_e", "res", "timeout", "e0", "e1" },
  E = { "p", "task", "t", "what", "msg" },
  S = { "p", "pid", "t" },
  D = { "p", "t" },
  -- a client's close begun (C), its state events (Z); the counter read,
  -- naming the write that made its value (G; the driver's too: "final")
  C = { "cl", "t" },
  Z = { "cl", "state", "t" },
  G = { "target", "tag", "t", "how" },
  -- the driver's: F kind t0 t1 who; X t node; Y t target; K (an nginx
  -- worker killed: checks/killed.lua)
  F = { "kind", "t0", "t1", "who" },
  K = { "who", "t", "held", "queued", "gone", "fresh" },
  -- why a killed worker's new one was not seen connected (the driver's
  -- look at the new workers' logs and nginx's error.log)
  KW = { "who", "why" },
  -- an nginx worker's hold begun (O), and its newest is_held() true (OT)
  O = { "id", "target", "task", "t0", "t1", "token", "pass", "node" },
  OT = { "id", "t" },
  X = { "t", "node" },
  Y = { "t", "target" },
  -- the driver's token checks (checks/tokens.lua): res "true", "false" or
  -- the error code
  T = { "target", "token", "t_s", "t_e", "res" },
}
local NUMERIC = { ts = 1, t0 = 1, t1 = 1, lost = 1, flip = 1, token = 1,
  mh = 1, rel_t = 1, rel_e = 1, t_s = 1, t_q = 1, t_e = 1, timeout = 1,
  v = 1, zxid = 1, t = 1, k = 1, held = 1, pass = 1, e0 = 1, e1 = 1,
  x_s = 1, x_e = 1, secs = 1, t1b = 1, after = 1, queued = 1,
  gone = 1, fresh = 1 }

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

local U = dofile("spec/chaos/checks/util.lua")
local list = U.list
for _, m in ipairs({ "holds", "contract", "answers", "ends", "order",
    "barriers", "killed", "tokens" }) do
  dofile("spec/chaos/checks/" .. m .. ".lua")(K, U)
end

K.CHECKS = { "exclusion", "fencing", "rw", "contract", "waits", "fifo",
  "wedges", "barrier", "dbarrier", "processes", "orphans", "killed",
  "tokens" }

--- Run every checker. `env`: { plan, finals, st, t_start, processes =
-- { {p, status, killed, hung}... }, orphans = { paths } }.
-- @return summary { ok, counts = { check = n }, first = { check = {t,
-- text} }, holds, line }
function K.check(logs, env)
  local st = env.st or 2
  local after = 2 * st + 2
  -- (the holds of killed nginx workers first: every checker weighs them)
  local closed = K.close_killed(logs)
  local res = {
    exclusion = K.exclusion(logs, env.plan),
    fencing = K.fencing(logs, env.finals, env.plan),
    rw = K.rw(logs),
    contract = K.contract(logs),
    waits = K.waits(logs, env.wait_bound or (3 * st + 5)),
    fifo = K.fifo(logs, env.plan, after),
    wedges = K.wedges(logs, env.plan, env.gap or 3, after),
    barrier = K.barrier(logs),
    dbarrier = K.dbarrier(logs, env.plan, after),
    processes = {},
    orphans = {},
    killed = K.killed(logs, st + 2),
    tokens = K.tokens(logs),
  }
  for _, x in ipairs(closed) do res.killed[#res.killed + 1] = x end
  -- (an untrue answer breaks the contract too: checks/answers.lua; and
  -- a hold's end not kept, or a callback's untrue news: checks/ends.lua)
  for _, x in ipairs(K.answers(logs)) do
    res.contract[#res.contract + 1] = x
  end
  for _, x in ipairs(K.ends(logs, nil, after, 3 * st + 5)) do
    res.contract[#res.contract + 1] = x
  end
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
  local kinds, ttl = {}, 0
  local targets = env.plan and env.plan.targets or {}
  for _, h in ipairs(list(logs, "H")) do
    kinds[h.kind] = (kinds[h.kind] or 0) + 1
    if targets[h.target] and targets[h.target].ttl then ttl = ttl + 1 end
  end
  local kl, holds = {}, 0
  for k, n in pairs(kinds) do kl[#kl + 1] = k .. "=" .. n; holds = holds + n end
  table.sort(kl)
  s.holds, s.by_kind, s.ttl = holds, kinds, ttl
  -- (holds on TTL nodes, issue 36: among the mutexes')
  s.line = ("holds %d (%s%s); violations: %s"):format(holds,
    table.concat(kl, " "), ttl > 0 and ("; on TTL nodes %d"):format(ttl)
    or "", table.concat(parts, " "))
  return s
end

return K
