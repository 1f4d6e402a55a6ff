-- A starting gate: 5 worker processes wait on one barrier and are all let
-- through when the coordinator removes it.  Nobody may pass before that.
--
--   lua5.4 examples/barrier.lua HOSTS [workers]
--
-- The coordinator raises the barrier (zk:barrier(path):set()), starts the
-- workers, waits until each has said it is about to wait, removes the
-- barrier, and prints how far apart the releases were.  It exits non-zero
-- if a worker passed before the removal or did not pass at all.
local here = arg[0]:match("^(.*)/") or "."
dofile(here .. "/paths.lua") -- no LUA_PATH needed
local zklock = require "zklock"
local core = require "zklock.core"

local hosts, workers, role, path, out = ...

-- Bad or missing arguments: a usage line on stderr, exit 64 (args.lua).
local usage, number_arg = dofile(here .. "/args.lua")(
  "HOSTS [workers]")

workers = number_arg(workers, "workers", 5)

local function append(f, s)
  local fh = assert(io.open(f, "a"))
  fh:write(s)
  fh:close()
end

local function lines(f)
  local t = {}
  local fh = io.open(f)
  if not fh then return t end
  for l in fh:lines() do t[#t + 1] = l end
  fh:close()
  return t
end

if role == "worker" then
  local zk = assert(zklock.connect(hosts))
  local b = zk:barrier(path)
  append(out, ("waiting %d\n"):format(core.pid()))
  local ok, err = b:wait(60)
  if not ok then
    append(out, ("failed %d %s\n"):format(core.pid(), tostring(err)))
    os.exit(1)
  end
  append(out, ("passed %.6f\n"):format(core.now()))
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
out = ("%s/zklock-barrier-%d"):format(dir, core.pid())
os.remove(out)
path = ("/examples/barrier-%d"):format(core.pid())

local zk = assert(zklock.connect(hosts))
local b = zk:barrier(path)
assert(b:set())

local lua = os.getenv("ZKLOCK_LUA") or "lua5.4"
local cmds = {}
for i = 1, workers do
  cmds[i] = ("%s %s %s %d worker %s %s"):format(lua, arg[0], hosts, workers,
    path, out)
end
-- all workers in the background; closing the pipe waits for them
local procs = assert(io.popen(table.concat(cmds, " & ") .. " & wait"))

-- wait (bounded) until every worker is about to wait, then give them a
-- moment to get there before lifting the barrier
local function count(prefix)
  local n = 0
  for _, l in ipairs(lines(out)) do
    if l:sub(1, #prefix) == prefix then n = n + 1 end
  end
  return n
end
local deadline = core.now() + 60
while count("waiting") < workers and core.now() < deadline do
  os.execute("sleep 0.05")
end
os.execute("sleep 0.5")
local early = count("passed")
local removed = core.now()
assert(b:remove())
procs:read("*a")
procs:close()
zk:close()

local times = {}
for _, l in ipairs(lines(out)) do
  local t = l:match("^passed (%S+)")
  if t then times[#times + 1] = tonumber(t) end
end
os.remove(out)
table.sort(times)
local bad = early > 0 or #times ~= workers
for _, t in ipairs(times) do
  if t < removed then bad = true end
end
if #times > 0 then
  print(("%d workers waited on %s; released %.1f ms after the removal, " ..
    "within %.1f ms of each other"):format(#times, path,
    (times[1] - removed) * 1000, (times[#times] - times[1]) * 1000))
end
if bad then
  print(("VIOLATION: %d passed before the removal, %d of %d passed"):format(
    early, #times, workers))
  os.exit(1)
end
