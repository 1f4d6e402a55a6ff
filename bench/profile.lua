-- make profile: where an uncontended cycle's time goes (docs/performance.md,
-- "Where a cycle's time goes"), for the tree in PROFILE_TREE (default: this
-- one; its lua/ and build/), against one fresh server started here.
--   lua5.4 bench/profile.lua          (LUA_PATH, LUA_CPATH: this tree's)
-- Programs: the C floor (build/floor, this tree's) and zklock's W1 loop
-- (bench/profile_loop.lua) under Lua 5.4 and LuaJIT, cohorts on and off
-- (PROFILE_ONLY=lua5.4 or luajit: that runtime alone).
--  1. CPU: PROFILE_ROUNDS rounds (rotated) of PROFILE_CYCLES cycles
--     under `perf record -e cpu-clock -F PROFILE_FREQ`, zklock's loop
--     alone (perf's control FIFOs: it starts disabled, -D -1); the
--     floor's whole process (its start is a few ms of ~1 s).  From
--     `perf report --sort pid,dso` (and pid,dso,sym), each thread's CPU
--     per shared object and its top symbols, in µs per cycle (the summed
--     sample periods, ns, / cycles).  Beside it the loop's own count of
--     each thread's CPU (schedstat) and context switches.  Threads, by
--     creation order: main (the Lua thread, or the floor's), io and
--     completion (the ZooKeeper C client's), timer (zklock's); the
--     syscalls of step 2 show which is which (io polls, sends, receives).
--  2. Syscalls: one run under `perf record -e raw_syscalls:sys_enter`,
--     the loop alone again: each thread's system calls per cycle, by name.
--  3. Lua: one run of profile_loop's alloc, count and sample modes:
--     bytes allocated and VM instructions per cycle (in all, and per
--     function), and each Lua file's share of the instructions and the
--     bytes.
-- The perf data stay in PROFILE_OUT (default: a new directory
-- /tmp/zklock-profile.XXXXXX), one file per program and step, to read
-- further (perf report -i FILE), with the program's output beside it
-- (FILE.out).
local testing = require "zklock.testing"

local TREE = os.getenv("PROFILE_TREE") or "."
local ROUNDS = tonumber(os.getenv("PROFILE_ROUNDS")) or 3
local CYCLES = tonumber(os.getenv("PROFILE_CYCLES")) or 3000
local FREQ = tonumber(os.getenv("PROFILE_FREQ")) or 4000
local LUA_CYCLES = tonumber(os.getenv("PROFILE_LUA_CYCLES")) or 1000
local ONLY = os.getenv("PROFILE_ONLY")
local function sh(cmd)
  local fh = assert(io.popen(cmd))
  local s = fh:read("*a")
  fh:close()
  return s
end
local OUT = os.getenv("PROFILE_OUT") or
  sh("mktemp -d /tmp/zklock-profile.XXXXXX"):gsub("%s+$", "")
os.execute("mkdir -p " .. OUT)
local HERE = sh("pwd"):gsub("%s+$", "")
local ROLES = { "main", "io", "completion", "timer" }
-- x86_64 system call numbers of the calls seen here (others: NR<n>)
local SYSCALLS = { [0] = "read", [1] = "write", [3] = "close", [7] = "poll",
  [9] = "mmap", [11] = "munmap", [12] = "brk", [14] = "rt_sigprocmask",
  [20] = "writev", [39] = "getpid", [44] = "sendto", [45] = "recvfrom",
  [46] = "sendmsg", [47] = "recvmsg", [186] = "gettid", [202] = "futex",
  [228] = "clock_gettime", [230] = "clock_nanosleep", [232] = "epoll_wait",
  [257] = "openat", [271] = "ppoll", [318] = "getrandom" }
if sh("uname -m"):gsub("%s+$", "") ~= "x86_64" then SYSCALLS = {} end

local function progs()
  local list = { { name = "floor", floor = true } }
  for _, rt in ipairs { "lua5.4", "luajit" } do
    if not ONLY or ONLY == rt then
      for _, c in ipairs { "on", "off" } do
        list[#list + 1] = { name = rt .. ".cohort_" .. c, rt = rt, cohort = c }
      end
    end
  end
  return list
end

-- the command line of a program's process
local function command(p, hosts, cycles, extra)
  if p.floor then return ("%s/build/floor %s %d"):format(HERE, hosts, cycles) end
  return ("env LUA_PATH='%s/lua/?.lua;%s/lua/?/init.lua;;' " ..
    "LUA_CPATH='%s/build/%s/?.so;;' %s %s/bench/profile_loop.lua %s %d " ..
    "cohort=%s path=/bench/profile-%s %s"):format(TREE, TREE, TREE, p.rt,
    p.rt, HERE, hosts, cycles, p.cohort, p.name, extra or "")
end

-- the rows of a perf report (comments dropped)
local function report(args)
  local rows = {}
  local s = sh("perf report --percentage absolute " .. args ..
    " --stdio -g none 2>/dev/null")
  for l in s:gmatch("[^\n]+") do
    if not l:find("^#") then rows[#rows + 1] = l end
  end
  return rows
end

-- perf record EVENT over the program (zklock: its loop alone); its output
local function record(p, hosts, file, cycles, event)
  local ctl, ack = file .. ".ctl", file .. ".ack"
  os.remove(ctl); os.remove(ack)
  local loop = not p.floor
  if loop then assert(os.execute(("mkfifo %s %s"):format(ctl, ack))) end
  local out = sh(("perf record -q %s %s -o %s -- %s 2>%s.err"):format(event,
    loop and ("-D -1 --control fifo:%s,%s"):format(ctl, ack) or "", file,
    command(p, hosts, cycles, loop and
      ("modes=plain ctl=%s ack=%s"):format(ctl, ack)), file))
  os.remove(ctl); os.remove(ack)
  local fh = io.open(file .. ".out", "w") -- (the program's own lines)
  if fh then fh:write(out); fh:close() end
  assert(out:find(p.floor and "floor%.create_delete" or "^plain"),
    p.name .. ": " .. out .. sh("cat " .. file .. ".err"))
  return out
end

local function kv(line)
  local t = {}
  for k, v in line:gmatch("([%w_]+)=(%S+)") do t[k] = tonumber(v) or v end
  return t
end

-- the threads of a run, by creation order: those the loop printed, else
-- those perf saw; role -> tid
local function roles_of(out, seen)
  local tids = {}
  local known = out:match("tids=([%d,]+)")
  if known then
    for tid in known:gmatch("%d+") do tids[#tids + 1] = tonumber(tid) end
  else
    for tid in pairs(seen) do tids[#tids + 1] = tid end
  end
  table.sort(tids)
  local r = {}
  for i, tid in ipairs(tids) do r[tid] = ROLES[i] or ("t" .. i) end
  return r
end

-- role -> dso -> µs, and role -> "dso sym" -> µs, over all cycles
local function cpu_profile(file, out)
  local rows = report(("-i %s --no-children --sort pid,dso,sym " ..
    "-F period,pid,dso,sym"):format(file))
  local parsed, seen = {}, {}
  for _, l in ipairs(rows) do
    local n, tid, dso, sym = l:match(
      "^%s*(%d+)%s+(%d+):%S+%s+(.-)%s+%[.%]%s+(.-)%s*$")
    if n then
      tid = tonumber(tid)
      -- LuaJIT's compiled traces: "[JIT] tid N", one name per thread
      if dso:find("^%[JIT%]") then dso = "[JIT]" end
      seen[tid] = true
      -- the interpreters are stripped: their functions count as one
      if sym:find("^0x") then sym = "(unnamed)" end
      parsed[#parsed + 1] = { tid, dso, sym, tonumber(n) / 1e3 }
    end
  end
  local role = roles_of(out, seen)
  local dsos, syms = {}, {}
  for _, x in ipairs(parsed) do
    local r = role[x[1]] or "other"
    dsos[r] = dsos[r] or {}
    syms[r] = syms[r] or {}
    dsos[r][x[2]] = (dsos[r][x[2]] or 0) + x[4]
    local k = x[2] .. ":" .. x[3]
    syms[r][k] = (syms[r][k] or 0) + x[4]
  end
  return dsos, syms
end

-- role -> syscall name -> calls
local function syscall_profile(file, out)
  local per, seen = {}, {}
  local s = sh(("perf script -i %s -F tid,trace 2>/dev/null"):format(file))
  for tid, nr in s:gmatch("(%d+) NR (%d+)") do
    tid, nr = tonumber(tid), tonumber(nr)
    seen[tid] = true
    per[tid] = per[tid] or {}
    local name = SYSCALLS[nr] or ("NR" .. nr)
    per[tid][name] = (per[tid][name] or 0) + 1
  end
  local role, r = roles_of(out, seen), {}
  for tid, calls in pairs(per) do r[role[tid] or "other"] = calls end
  return r
end

-- "lock/cohort.lua:243" -> "lock/cohort.lua:243(wait_turn)": the name
-- from the line where the function is defined, in the profiled tree
local function fn_name(f)
  local file, line = f:match("^(.*):(%d+)$")
  local short = (file or f):gsub("^.*/zklock/", "")
  local fh = file and io.open(TREE .. "/lua/zklock/" .. short)
  if not fh then return short .. (line and ":" .. line or "") end
  local n, name = 0, nil
  for l in fh:lines() do
    n = n + 1
    if n == tonumber(line) then
      name = l:match("function%s+([%w_.:]+)") or "anonymous"
      break
    end
  end
  fh:close()
  return ("%s:%s(%s)"):format(short, line, name or "?")
end

local function add(into, from, scale)
  for k, v in pairs(from) do
    if type(v) == "number" then into[k] = (into[k] or 0) + v * scale end
  end
end

-- "k=v" parts of a table of numbers, largest first, at most max, >= min
local function top(t, min, max, fmt)
  local l = {}
  for k, v in pairs(t) do if v >= min then l[#l + 1] = { k, v } end end
  table.sort(l, function(a, b) return a[2] > b[2] end)
  local parts = {}
  for i = 1, math.min(#l, max) do
    parts[i] = (fmt or "%s=%.1f"):format(l[i][1], l[i][2])
  end
  return table.concat(parts, " ")
end

local srv = testing.server({ tick_time = 2000 })
local ok, err = pcall(function()
  local hosts = srv.connect_string
  local commit = sh(("git -C %s rev-parse --short HEAD 2>/dev/null"):format(
    TREE)):gsub("%s+$", "")
  print(("profile tree=%s commit=%s cycles=%d rounds=%d freq=%d out=%s")
    :format(TREE, commit, CYCLES, ROUNDS, FREQ, OUT))
  local list = progs()
  for _, p in ipairs(list) do p.plain, p.dso, p.sym = {}, {}, {} end
  -- 1. CPU, rounds rotated
  for r = 1, ROUNDS do
    for k = 0, #list - 1 do
      local p = list[(r - 1 + k) % #list + 1]
      local file = ("%s/%s.cpu%d.data"):format(OUT, p.name, r)
      local out = record(p, hosts, file, CYCLES,
        ("-e cpu-clock -F %d"):format(FREQ))
      local dsos, syms = cpu_profile(file, out)
      for role, t in pairs(dsos) do
        p.dso[role] = p.dso[role] or {}
        add(p.dso[role], t, 1 / CYCLES / ROUNDS)
        p.sym[role] = p.sym[role] or {}
        add(p.sym[role], syms[role], 1 / CYCLES / ROUNDS)
      end
      add(p.plain, kv(p.floor and out or out:match("^plain[^\n]*")),
        1 / ROUNDS)
    end
  end
  print("\n== 1. CPU per cycle (us) by thread: perf's samples by shared " ..
    "object and top symbols; schedstat and context switches " ..
    "(voluntary, involuntary) per cycle")
  for _, p in ipairs(list) do
    local pl = p.plain
    print(("\n%s: %s"):format(p.name, p.floor and ("cpu_us=%.1f")
      :format(pl.cpu_us_per_cycle) or
      ("wall_us=%.1f cpu_us=%.1f requests=%.2f notifications=%.2f")
      :format(pl.wall_us, pl.cpu_us, pl.requests, pl.notifications)))
    for _, role in ipairs(ROLES) do
      local d = p.dso[role]
      if d then
        local sum = 0
        for _, us in pairs(d) do sum = sum + us end
        print(("  %-10s perf=%5.1f%s  %s"):format(role, sum,
          pl[role .. "_cpu_us"] and (" schedstat=%5.1f cs=%.2f ics=%.2f")
            :format(pl[role .. "_cpu_us"], pl[role .. "_cs"],
              pl[role .. "_ics"]) or "", top(d, 0.3, 8)))
        print("    symbols: " .. top(p.sym[role], 0.3, 10))
      end
    end
  end

  -- 2. syscalls per cycle, per thread
  print("\n== 2. system calls per cycle by thread")
  for _, p in ipairs(list) do
    local file = ("%s/%s.syscalls.data"):format(OUT, p.name)
    local out = record(p, hosts, file, CYCLES, "-e raw_syscalls:sys_enter")
    local calls = syscall_profile(file, out)
    local parts = {}
    for _, role in ipairs(ROLES) do
      if calls[role] then
        local t, sum = {}, 0
        for k, v in pairs(calls[role]) do
          t[k] = v / CYCLES
          sum = sum + v / CYCLES
        end
        parts[#parts + 1] = ("  %-10s %5.1f: %s"):format(role, sum,
          top(t, 0.05, 10, "%s=%.2f"))
      end
    end
    print(p.name)
    print(table.concat(parts, "\n"))
  end

  -- 3. the Lua side: allocation, instructions, files
  print(("\n== 3. Lua: bytes allocated and VM instructions per cycle; per " ..
    "file, share of instructions self/inclusive and bytes (%d cycles)")
    :format(LUA_CYCLES))
  for _, p in ipairs(list) do
    if not p.floor then
      local out = sh(command(p, hosts, LUA_CYCLES, "modes=alloc,count,sample"))
      local a, c = kv(out:match("alloc[^\n]*")), kv(out:match("count[^\n]*"))
      print(("%s bytes=%.0f instructions=%.0f%s"):format(p.name, a.bytes,
        c.instructions, p.rt == "luajit" and " (interpreted)" or ""))
      local parts = {}
      for l in out:gmatch("sample [^\n]*") do
        local s = kv(l)
        local f = l:match("file=(%S+)"):gsub("^.*/zklock/", "")
        if s.self >= 0.01 then
          parts[#parts + 1] = ("%s=%.0f%%/%.0f%%/%dB"):format(f, s.self * 100,
            s.incl * 100, s.bytes)
        end
      end
      print("  " .. table.concat(parts, " "))
      parts = {}
      for l in out:gmatch("count_fn [^\n]*") do
        local f, k = l:match("fn=(%S+) instructions=(%S+)")
        if tonumber(k) >= 20 then
          parts[#parts + 1] = ("%s=%.0f"):format(fn_name(f), tonumber(k))
        end
      end
      print("  instructions by function (file:line defined, >= 20): " ..
        table.concat(parts, " "))

    end
  end
end)
srv:close()
assert(ok, err)
