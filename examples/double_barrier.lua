-- A double barrier: 3 member processes start a computation together and
-- finish it together.  They arrive at different times and work for
-- different times; nobody starts before the last has arrived, and nobody
-- goes on before the last has finished.
--
--   lua5.4 examples/double_barrier.lua HOSTS [members]
--
-- It exits non-zero if a member got through `enter` before the last one
-- arrived, or through `leave` before the last one called it.
local here = arg[0]:match("^(.*)/") or "."
dofile(here .. "/paths.lua") -- no LUA_PATH needed
local zklock = require "zklock"
local core = require "zklock.core"

local hosts, members, role, path, out, index = ...

-- Bad or missing arguments: a usage line on stderr, exit 64 (args.lua).
local usage, number_arg = dofile(here .. "/args.lua")(
  "HOSTS [members]")

members = number_arg(members, "members", 3)

local function append(f, s)
  local fh = assert(io.open(f, "a"))
  fh:write(s)
  fh:close()
end

if role == "worker" then
  index = tonumber(index)
  local zk = assert(zklock.connect(hosts))
  local db = zk:double_barrier(path, members)
  local function note(what)
    append(out, ("%d %s %.6f\n"):format(index, what, core.now()))
  end
  os.execute(("sleep %.2f"):format(0.3 * (index - 1))) -- arrive staggered
  note("arrive")
  assert(db:enter(60))
  note("enter")
  -- the work: the first arrived works longest
  os.execute(("sleep %.2f"):format(0.3 * (members - index)))
  note("leave")
  assert(db:leave(60))
  note("left")
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
out = ("%s/zklock-dbarrier-%d"):format(dir, core.pid())
os.remove(out)
path = ("/examples/double-barrier-%d"):format(core.pid())
local lua = os.getenv("ZKLOCK_LUA") or "lua5.4"
local cmds = {}
for i = 1, members do
  cmds[i] = ("%s %s %s %d worker %s %s %d"):format(lua, arg[0], hosts,
    members, path, out, i)
end
assert(os.execute(table.concat(cmds, " & ") .. " & wait"))

local t = { arrive = {}, enter = {}, leave = {}, left = {} }
local fh = io.open(out)
for l in (fh and fh:lines() or function() end) do
  local i, what, at = l:match("^(%d+) (%a+) (%S+)")
  if i then t[what][tonumber(i)] = tonumber(at) end
end
if fh then fh:close() end
os.remove(out)

local function span(list)
  local lo, hi, n = math.huge, -math.huge, 0
  for i = 1, members do
    local v = list[i]
    if v then
      n = n + 1
      lo, hi = math.min(lo, v), math.max(hi, v)
    end
  end
  return lo, hi, n
end
local base = span(t.arrive)
local bad = false
for i = 1, members do
  if not (t.arrive[i] and t.enter[i] and t.leave[i] and t.left[i]) then
    print(("member %d did not finish"):format(i))
    bad = true
  else
    print(("member %d: arrived %5.0f ms, entered %5.0f ms, called leave " ..
      "%5.0f ms, left %5.0f ms"):format(i, (t.arrive[i] - base) * 1000,
      (t.enter[i] - base) * 1000, (t.leave[i] - base) * 1000,
      (t.left[i] - base) * 1000))
  end
end
local _, last_arrive = span(t.arrive)
local first_enter = span(t.enter)
local _, last_leave = span(t.leave)
local first_left = span(t.left)
if first_enter < last_arrive then
  print("VIOLATION: a member entered before the last one arrived")
  bad = true
end
if first_left < last_leave then
  print("VIOLATION: a member left before the last one called leave")
  bad = true
end
if bad then os.exit(1) end
print(("%d members: all entered after the last arrival, all left after " ..
  "the last leave"):format(members))
