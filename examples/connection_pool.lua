-- A connection pool shared by processes: a database that takes at most 3
-- connections, and 10 worker processes that each run jobs on it.  A
-- semaphore of 3 leases stands for the 3 connections: a worker takes a
-- lease before it "connects" and gives it back after.
--
--   lua5.4 examples/connection_pool.lua HOSTS [workers] [jobs]
--
-- Each job logs when it held its connection; the parent prints the most
-- connections that were open at once, and exits non-zero if that was ever
-- more than 3 or a job went missing.
local here = arg[0]:match("^(.*)/") or "."
dofile(here .. "/paths.lua") -- no LUA_PATH needed
local zklock = require "zklock"
local core = require "zklock.core"

local CONNECTIONS = 3
local hosts, workers, jobs, role, log = ...

-- Bad or missing arguments: a usage line on stderr, exit 64 (args.lua).
local usage, number_arg = dofile(here .. "/args.lua")(
  "HOSTS [workers] [jobs]")

workers = number_arg(workers, "workers", 10)
jobs = number_arg(jobs, "jobs", 5)

local function spin(s)
  local t = core.now() + s
  while core.now() < t do end
end

if role == "worker" then
  local zk = assert(zklock.connect(hosts))
  local pool = zk:semaphore("/examples/db-connections", CONNECTIONS)
  local lines = {}
  for _ = 1, jobs do
    local lease = assert(pool:acquire(60))
    local t0 = core.now()
    spin(0.02) -- the query
    local t1 = core.now()
    assert(lease:release())
    lines[#lines + 1] = ("%.6f %.6f\n"):format(t0, t1)
  end
  local fh = assert(io.open(log, "a"))
  fh:write(table.concat(lines))
  fh:close()
  zk:close()
  return
end

-- HOSTS omitted or "-": $ZK_HOSTS from the environment (with_server.lua
-- exports it), so extra arguments can follow: `X.lua - nolock`
if hosts == nil or hosts == "" or hosts == "-" then
  hosts = os.getenv("ZK_HOSTS")
end
if not hosts then usage("no HOSTS (nor $ZK_HOSTS)") end
local dir = os.getenv("TMPDIR") or "/tmp"
log = ("%s/zklock-pool-%d"):format(dir, core.pid())
os.remove(log)
local lua = os.getenv("ZKLOCK_LUA") or "lua5.4"
local cmds = {}
for i = 1, workers do
  cmds[i] = ("%s %s %s %d %d worker %s"):format(lua, arg[0], hosts, workers,
    jobs, log)
end
assert(os.execute(table.concat(cmds, " & ") .. " & wait"))

local ev, n = {}, 0
local fh = io.open(log)
for l in (fh and fh:lines() or function() end) do
  local a, b = l:match("^(%S+) (%S+)")
  if a then
    n = n + 1
    ev[#ev + 1] = { tonumber(a), 1 }
    ev[#ev + 1] = { tonumber(b), -1 }
  end
end
if fh then fh:close() end
os.remove(log)
table.sort(ev, function(x, y)
  if x[1] ~= y[1] then return x[1] < y[1] end
  return x[2] < y[2] -- a connection closed as another opens: not both open
end)
local cur, most = 0, 0
for _, e in ipairs(ev) do
  cur = cur + e[2]
  most = math.max(most, cur)
end
print(("%d workers ran %d jobs over a pool of %d connections: max " ..
  "concurrent = %d"):format(workers, n, CONNECTIONS, most))
if most > CONNECTIONS or n ~= workers * jobs then
  print("VIOLATION")
  os.exit(1)
end
