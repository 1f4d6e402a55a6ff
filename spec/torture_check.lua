-- The torture run's checker: pure functions over the workers' logs (see
-- spec/workers/torture.lua for the format), so that it can be proven on
-- made-up logs as well as on a deliberately broken lock.
local C = {}

--- Parse one worker's log text.
-- @return { holds = { {t0, t1, token}... }, writes = { {zxid, token,
-- value, what}... }, sent = writes sent (P lines), failed = { code = n },
-- done = holds or nil }
function C.parse(text)
  local w = { holds = {}, writes = {}, failed = {}, done = nil }
  for line in (text or ""):gmatch("[^\n]+") do
    local kind, rest = line:match("^(%u) (.*)$")
    if kind == "H" then
      local t0, t1, token = rest:match("^(%S+) (%S+) (%S+)$")
      w.holds[#w.holds + 1] = { tonumber(t0), tonumber(t1), tonumber(token) }
    elseif kind == "W" then
      local zxid, token, value, what = rest:match("^(%S+) (%S+) (%S+) (%S+)$")
      w.writes[#w.writes + 1] = { tonumber(zxid), tonumber(token),
        tonumber(value), what }
    elseif kind == "P" then
      w.sent = (w.sent or 0) + 1
    elseif kind == "F" then
      w.failed[rest] = (w.failed[rest] or 0) + 1
    elseif kind == "D" then
      w.done = tonumber(rest)
    end
  end
  return w
end

--- Pairs of holds (of different workers or not) whose intervals overlap.
-- @return count, holds, and the first overlapping pair as text (for the
-- run's line: which workers, when, which tokens)
function C.overlaps(workers)
  local all = {}
  for wi, w in ipairs(workers) do
    for _, h in ipairs(w.holds) do
      all[#all + 1] = { h[1], h[2], wi, h[3] }
    end
  end
  table.sort(all, function(a, b) return a[1] < b[1] end)
  local n, last, first = 0, nil, nil
  for _, h in ipairs(all) do
    if last and h[1] < last[2] then
      n = n + 1
      first = first or ("worker %d [%.6f, %.6f] token %s and worker %d " ..
        "[%.6f, %.6f] token %s"):format(last[3], last[1], last[2],
        tostring(last[4]), h[3], h[1], h[2], tostring(h[4]))
    end
    if not last or h[2] > last[2] then last = h end
  end
  return n, #all, first
end

--- Accepted fenced writes in the server's order (zxid) whose token is not
-- higher than that of every write accepted before it.
function C.token_violations(workers)
  local acc = {}
  for _, w in ipairs(workers) do
    for _, x in ipairs(w.writes) do
      if x[4] == "ok" then acc[#acc + 1] = x end
    end
  end
  table.sort(acc, function(a, b) return a[1] < b[1] end)
  local n, top = 0, -math.huge
  for _, x in ipairs(acc) do
    if x[2] <= top then n = n + 1 end
    if x[2] > top then top = x[2] end
  end
  return n, #acc
end

--- Check everything; `final` is the counter's value at the end, `orphans`
-- the lock nodes left, `cycles` what each worker had to do, `killed` how
-- many workers were killed on purpose.
-- @return summary table; summary.ok is true when nothing is wrong
function C.check(workers, final, orphans, cycles, killed)
  local s = { workers = #workers, killed = killed or 0 }
  s.overlaps, s.holds, s.first_overlap = C.overlaps(workers)
  s.token_violations, s.accepted = C.token_violations(workers)
  s.rejected, s.unknown, s.failed_acquires = 0, 0, 0
  local codes = {}
  s.finished, s.incomplete = 0, 0
  for _, w in ipairs(workers) do
    for _, x in ipairs(w.writes) do
      if x[4] == "lost" then s.rejected = s.rejected + 1
      elseif x[4] == "unknown" then s.unknown = s.unknown + 1 end
    end
    -- a write sent with no outcome logged: its worker was killed meanwhile
    if w.sent and w.sent > #w.writes then
      s.unknown = s.unknown + (w.sent - #w.writes)
    end
    for code, n in pairs(w.failed) do
      s.failed_acquires = s.failed_acquires + n
      codes[code] = (codes[code] or 0) + n
    end
    if w.done and w.done >= cycles then s.finished = s.finished + 1 end
  end
  -- a killed worker does not finish; every other one must
  s.incomplete = #workers - s.killed - s.finished
  if s.incomplete < 0 then s.incomplete = 0 end
  -- every accepted write added one; a write of unknown outcome may have
  s.final = final
  local lo, hi = s.accepted, s.accepted + s.unknown
  final = final or 0
  s.lost_updates = final < lo and lo - final or final > hi and final - hi
    or 0
  s.orphans = orphans or 0
  local fc = {}
  for code, n in pairs(codes) do fc[#fc + 1] = code .. "=" .. n end
  table.sort(fc)
  s.failed_codes = table.concat(fc, " ")
  s.ok = s.overlaps == 0 and s.token_violations == 0 and s.lost_updates == 0
    and s.incomplete == 0 and s.orphans == 0
  return s
end

return C
