-- make bench-capacity (docs/capacity.md): what one ensemble carries.  For
-- 10, 100 and 1,000 client sessions (spread over PROCS processes, each a
-- cqueues loop: bench/capacity_worker.lua), every session looping with 2
-- coroutines on its own lock and on a lock shared by SHARE sessions, with
-- lock cohorts off and on, on a 3-member ensemble on loopback (and a
-- 5-member one with CAPACITY_MEMBERS="3 5"): over MEASURE seconds, the
-- server's writes (the zxid's advance), watches (wchs, every member) and
-- nodes (srvr), per second and per session, and the clients' cycles and
-- hand-offs per second.  Prints a table; bounded (each point stops by
-- itself at its end time).
local testing = require "zklock.testing"
local core = require "zklock.core"
local tcore = require "zklock.testing.core"

local PROCS = 4
local SHARE = 10
local MEASURE = tonumber(os.getenv("CAPACITY_SECONDS")) or 20
local SIZES = {}
for n in (os.getenv("CAPACITY_SIZES") or "10 100 1000"):gmatch("%d+") do
  SIZES[#SIZES + 1] = tonumber(n)
end
local MEMBERS = {}
for n in (os.getenv("CAPACITY_MEMBERS") or "3"):gmatch("%d+") do
  MEMBERS[#MEMBERS + 1] = tonumber(n)
end
local LUA = os.getenv("ZKLOCK_LUA") or "lua5.4"
local TMP = os.getenv("ZKLOCK_TEST_TMP") or "/tmp"

local function zxid(m)
  local s = m:four_letter("srvr", 5) or ""
  return tonumber(s:match("Zxid: 0x(%x+)") or "", 16), s:match("Mode: (%a+)"),
    tonumber(s:match("Node count: (%d+)") or "")
end

local function watches(members)
  local n = 0
  for _, m in ipairs(members) do
    local s = m:four_letter("wchs", 5) or ""
    n = n + (tonumber(s:match("Total watches:%s*(%d+)")) or 0)
  end
  return n
end

local function leader_of(members)
  for _, m in ipairs(members) do
    local _, mode = zxid(m)
    if mode == "leader" or mode == "standalone" then return m end
  end
end

-- One point: `sessions` sessions, cohort "on" or "off".  Returns its row.
local function point(cl, sessions, cohort)
  local start = core.now()
  -- (connecting: about 1.5 ms a session here, the processes at once)
  local m0 = start + 6 + sessions * 0.015
  local m1 = m0 + MEASURE
  local t_end = m1 + 1
  local files, each = {}, math.ceil(sessions / PROCS)
  local nshared = math.max(1, sessions // SHARE)
  local first = 0
  for p = 1, PROCS do
    local n = math.min(each, sessions - first)
    if n <= 0 then break end
    local out = ("%s/capacity-%d-%d.out"):format(TMP, core.pid(), p)
    os.remove(out)
    os.execute(("%s bench/capacity_worker.lua '%s' %d %d %d %s %.6f %.6f " ..
      "%.6f >'%s' 2>&1 &"):format(LUA, cl.connect_string, first, n, nshared,
      cohort, m0, m1, t_end, out))
    files[#files + 1] = out
    first = first + n
  end
  while core.now() < m0 do tcore.sleep(0.05) end
  local leader = leader_of(cl.members)
  local z0 = zxid(leader)
  local t0 = core.now()
  tcore.sleep(MEASURE / 2)
  local w = watches(cl.members)
  local _, _, nodes = zxid(leader)
  while core.now() < m1 do tcore.sleep(0.05) end
  local z1 = zxid(leader)
  local secs = core.now() - t0
  -- the workers end by themselves (bounded)
  local totals = { own = 0, shared = 0, failed = 0, connected = 0 }
  local deadline = t_end + 60
  for _, f in ipairs(files) do
    local text
    repeat
      local fh = io.open(f)
      text = fh and fh:read("*a") or ""
      if fh then fh:close() end
      if not text:find("own %d+") then tcore.sleep(0.1) end
    until text:find("own %d+") or core.now() > deadline
    for k, v in text:gmatch("(%a+) (%d+)") do
      if totals[k] then totals[k] = totals[k] + tonumber(v) end
    end
    if not text:find("own %d+") then
      io.stderr:write("capacity: a worker said: ", text, "\n")
    end
    os.remove(f)
  end
  local writes = (z1 and z0) and (z1 - z0) / secs or 0
  return { sessions = sessions, cohort = cohort, writes = writes,
    watches = w, nodes = nodes or 0, own = totals.own / MEASURE,
    shared = totals.shared / MEASURE, failed = totals.failed,
    connected = totals.connected }
end

local function row(members, r)
  return ("| %d | %d | %s | %s | %.0f | %.2f | %d | %.2f | %d | %.2f | " ..
    "%.0f | %.0f | %d |"):format(members, r.sessions, r.cohort,
    r.connected == r.sessions and "all" or tostring(r.connected),
    r.writes, r.writes / r.sessions, r.watches, r.watches / r.sessions,
    r.nodes, r.nodes / r.sessions, r.own, r.shared, r.failed)
end

print(("capacity: %d processes, %d s a point, a shared lock per %d " ..
  "sessions, 2 coroutines a session"):format(PROCS, MEASURE, SHARE))
print("| members | sessions | cohort | connected | writes/s | " ..
  "writes/s/session | watches | watches/session | nodes | nodes/session | " ..
  "own cycles/s | shared hand-offs/s | timed out |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | " ..
  "--- | --- |")
for _, members in ipairs(MEMBERS) do
  local cl = testing.cluster(members, { config = { maxClientCnxns = "0",
    globalOutstandingLimit = "10000" } })
  local ok, err = pcall(function()
    for _, n in ipairs(SIZES) do
      for _, cohort in ipairs({ "off", "on" }) do
        print(row(members, point(cl, n, cohort)))
        io.stdout:flush()
      end
    end
  end)
  cl:close()
  if not ok then error(err, 0) end
end
