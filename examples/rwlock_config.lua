-- A shared configuration file: reader processes read it under the read
-- lock, writer processes rewrite it in place, line by line, under the write
-- lock.  Readers share the lock (several read at once), and no reader ever
-- sees a half-written file.
--
--   lua5.4 examples/rwlock_config.lua HOSTS [lock|nolock] [readers]
--                                     [writers] [rounds]
--
-- With `nolock` the same processes skip the lock: readers then catch the
-- file half-written.  With the lock (the default) it exits non-zero if a
-- reader saw a torn file or a writer overlapped anyone.
local here = arg[0]:match("^(.*)/") or "."
dofile(here .. "/paths.lua") -- no LUA_PATH needed
local zklock = require "zklock"
local core = require "zklock.core"

local hosts, mode, readers, writers, rounds, role, file, log = ...

-- Bad or missing arguments: a usage line on stderr, exit 64 (args.lua).
local usage, number_arg = dofile(here .. "/args.lua")(
  "HOSTS [lock|nolock] [readers] [writers] [rounds]")

mode = mode or "lock"
if mode ~= "lock" and mode ~= "nolock" then
  usage(("lock or nolock expected, got '%s'"):format(mode))
end
readers = number_arg(readers, "readers", 4)
writers = number_arg(writers, "writers", 2)
rounds = number_arg(rounds, "rounds", 20)
local KEYS = 20

local function spin(s)
  local t = core.now() + s
  while core.now() < t do end
end

local function append(f, s)
  local fh = assert(io.open(f, "a"))
  fh:write(s)
  fh:close()
end

-- rewrite in place, slowly: between two lines the file is half-written
local function write_config(version)
  local fh = assert(io.open(file, "w"))
  for i = 1, KEYS do
    fh:write(("key%02d=%d\n"):format(i, version))
    fh:flush()
    spin(0.0002)
  end
  fh:write(("end=%d\n"):format(version))
  fh:close()
end

-- a whole config: KEYS keys and the end line, all of one version
local function check_config(text)
  local version, n = nil, 0
  for key, v in text:gmatch("(%w+)=(%d+)\n") do
    if version and v ~= version then return false end
    version = v
    n = n + 1
    if key == "end" then return n == KEYS + 1 end
  end
  return false
end

if role == "reader" or role == "writer" then
  local zk = assert(zklock.connect(hosts))
  local rw = zk:rwlock("/examples/config")
  local lock = role == "reader" and rw.read or rw.write
  local n = role == "reader" and rounds or math.ceil(rounds / 2)
  for r = 1, n do
    if mode == "lock" then assert(lock:acquire(60)) end
    local t0 = core.now()
    if role == "reader" then
      local fh = assert(io.open(file))
      local text = fh:read("*a")
      fh:close()
      spin(0.005) -- use the configuration a little while
      local t1 = core.now()
      append(log, ("R %.6f %.6f %s\n"):format(t0, t1,
        check_config(text) and "ok" or "torn"))
    else
      write_config(core.pid() * 1000 + r)
      local t1 = core.now()
      append(log, ("W %.6f %.6f ok\n"):format(t0, t1))
    end
    if mode == "lock" then assert(lock:release()) end
    spin(0.002)
  end
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
file = ("%s/zklock-config-%d"):format(dir, core.pid())
log = file .. ".log"
os.remove(log)
write_config(0)
local lua = os.getenv("ZKLOCK_LUA") or "lua5.4"
local cmds = {}
for i = 1, readers + writers do
  cmds[i] = ("%s %s %s %s %d %d %d %s %s %s"):format(lua, arg[0], hosts, mode,
    readers, writers, rounds, i <= readers and "reader" or "writer", file, log)
end
assert(os.execute(table.concat(cmds, " & ") .. " & wait"))

local reads, writes, torn = {}, {}, 0
local fh = io.open(log)
for l in (fh and fh:lines() or function() end) do
  local kind, a, b, verdict = l:match("^(%u) (%S+) (%S+) (%a+)")
  if kind then
    local iv = { tonumber(a), tonumber(b) }
    if kind == "R" then reads[#reads + 1] = iv else writes[#writes + 1] = iv end
    if verdict == "torn" then torn = torn + 1 end
  end
end
if fh then fh:close() end
os.remove(log)
os.remove(file)

-- most readers inside at once; writers overlapping anyone
local ev = {}
for _, iv in ipairs(reads) do
  ev[#ev + 1] = { iv[1], 1 }
  ev[#ev + 1] = { iv[2], -1 }
end
table.sort(ev, function(x, y)
  if x[1] ~= y[1] then return x[1] < y[1] end
  return x[2] < y[2]
end)
local cur, most = 0, 0
for _, e in ipairs(ev) do
  cur = cur + e[2]
  most = math.max(most, cur)
end
local overlaps = 0
for i, w in ipairs(writes) do
  for j, o in ipairs(writes) do
    if i < j and w[1] < o[2] and o[1] < w[2] then overlaps = overlaps + 1 end
  end
  for _, o in ipairs(reads) do
    if w[1] < o[2] and o[1] < w[2] then overlaps = overlaps + 1 end
  end
end
local want_reads = readers * rounds
local want_writes = writers * math.ceil(rounds / 2)
print(("%-6s %d readers x %d reads, %d writers x %d writes: %d torn reads, " ..
  "up to %d readers at once, %d writer overlaps"):format(mode, readers,
  rounds, writers, math.ceil(rounds / 2), torn, most, overlaps))
if mode == "lock" and (torn > 0 or overlaps > 0 or #reads ~= want_reads or
    #writes ~= want_writes) then
  print("VIOLATION")
  os.exit(1)
end
