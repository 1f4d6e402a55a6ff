-- The whole-process check (issue 34, docs/performance.md): a fresh process
-- that starts, connects, runs CYCLES acquire+release cycles and closes,
-- zklock under Lua 5.4 and under LuaJIT (bench/w1.lua warm=0) against the
-- C floor run the same way (build/floor), rounds alternating.
--   luajit bench/whole.lua HOSTS CYCLES ROUNDS   (LUA_CPATH: build/luajit)
-- Each child is measured from here, around the whole process: the wall
-- time from posix_spawn to its reaping, and its CPU time (user and
-- system, every thread) as the growth of getrusage(RUSAGE_CHILDREN) once
-- reaped.  That is the kernel's count behind /proc/self/stat's
-- cutime/cstime, in microseconds where /proc gives clock ticks (10 ms:
-- about an eighth of the floor's whole run).  Hence LuaJIT, for its
-- FFI.  A second set of runs with 0 cycles (start, connect, close) shows
-- the start-up alone.  Lines:
--   whole.<prog> processes= cycles= ops_per_s= wall_ms= cpu_ms= user_ms=
--     sys_ms= cpu_us_per_cycle= startup_wall_ms= startup_cpu_ms=
-- (per process, means over the rounds; ops_per_s and cpu_us_per_cycle
-- over the whole processes, start-up included) and their ratios to the
-- floor's.
local ffi = require "ffi"
local core = require "zklock.core"

ffi.cdef [[
struct zkb_timeval { long tv_sec; long tv_usec; };
struct zkb_rusage { struct zkb_timeval ru_utime, ru_stime; long more[14]; };
int getrusage(int who, struct zkb_rusage *usage);
int setenv(const char *name, const char *value, int overwrite);
int open(const char *path, int flags, int mode);
int dup(int fd);
int dup2(int from, int to);
int close(int fd);
]]
local RUSAGE_CHILDREN, O_WRONLY, O_CREAT, O_TRUNC = -1, 1, 64, 512

local hosts, cycles, rounds = ...
cycles, rounds = tonumber(cycles), tonumber(rounds) or 3
assert(hosts and cycles, "usage: whole.lua HOSTS CYCLES [ROUNDS]")
local TMP = os.getenv("ZKLOCK_TEST_TMP") or "/tmp"
local out_file = ("%s/zklock-bench-whole-%d"):format(TMP, core.pid())

local function children_cpu()
  local ru = ffi.new("struct zkb_rusage")
  assert(ffi.C.getrusage(RUSAGE_CHILDREN, ru) == 0)
  return tonumber(ru.ru_utime.tv_sec) + tonumber(ru.ru_utime.tv_usec) / 1e6,
         tonumber(ru.ru_stime.tv_sec) + tonumber(ru.ru_stime.tv_usec) / 1e6
end

-- one process: argv with the child's LUA_CPATH (or none); its stdout goes
-- to out_file (ours is a pipe to bench/run.lua)
local function run(prog, n)
  if prog.cpath then assert(ffi.C.setenv("LUA_CPATH", prog.cpath, 1) == 0) end
  local argv = {}
  for i, a in ipairs(prog.argv) do argv[i] = a end
  argv[#argv + 1] = tostring(n)
  for _, a in ipairs(prog.opts or {}) do argv[#argv + 1] = a end
  io.stdout:flush()
  local saved = ffi.C.dup(1)
  local fd = ffi.C.open(out_file, O_WRONLY + O_CREAT + O_TRUNC, 420)
  assert(saved >= 0 and fd >= 0, "whole.lua: cannot redirect stdout")
  ffi.C.dup2(fd, 1)
  ffi.C.close(fd)
  local u0, s0 = children_cpu()
  local t0 = core.now()
  local pid, err = core.spawn(argv)
  ffi.C.dup2(saved, 1)
  ffi.C.close(saved)
  assert(pid, err)
  local how, status = core.wait(pid)
  local wall = core.now() - t0
  local u1, s1 = children_cpu()
  local fh = assert(io.open(out_file))
  local line = fh:read("*a")
  fh:close()
  assert(how == "exited" and status == 0,
    ("whole.lua: %s ended %s %s: %s"):format(prog.name, how, status, line))
  assert(n == 0 or line:match("ops=" .. n .. " "),
    "whole.lua: " .. prog.name .. " printed " .. line)
  return wall, u1 - u0, s1 - s0
end

local progs = {
  { name = "whole.floor", argv = { "./build/floor", hosts } },
  { name = "whole.zklock.lua5.4", cpath = "./build/lua5.4/?.so;;",
    argv = { "lua5.4", "bench/w1.lua", hosts },
    opts = { "warm=0", "path=/bench/whole-lua5.4" } },
  { name = "whole.zklock.luajit", cpath = "./build/luajit/?.so;;",
    argv = { "luajit", "bench/w1.lua", hosts },
    opts = { "warm=0", "path=/bench/whole-luajit" } },
}
for _, p in ipairs(progs) do
  p.wall, p.user, p.sys, p.swall, p.scpu = 0, 0, 0, 0, 0
end
for r = 1, rounds do
  for k = 0, #progs - 1 do -- rotated, so that no program always goes first
    local p = progs[(r - 1 + k) % #progs + 1]
    local wall, user, sys = run(p, cycles)
    p.wall, p.user, p.sys = p.wall + wall, p.user + user, p.sys + sys
    wall, user, sys = run(p, 0)
    p.swall, p.scpu = p.swall + wall, p.scpu + user + sys
  end
end
os.remove(out_file)

local floor = progs[1]
for _, p in ipairs(progs) do
  local cpu = p.user + p.sys
  p.rate, p.cpu = rounds * cycles / p.wall, cpu
  print(("%s processes=%d cycles=%d ops_per_s=%.1f wall_ms=%.1f " ..
    "cpu_ms=%.1f user_ms=%.1f sys_ms=%.1f cpu_us_per_cycle=%.1f " ..
    "startup_wall_ms=%.1f startup_cpu_ms=%.1f"):format(p.name, rounds,
    cycles, p.rate, p.wall / rounds * 1e3, cpu / rounds * 1e3,
    p.user / rounds * 1e3, p.sys / rounds * 1e3, cpu / (rounds * cycles) * 1e6,
    p.swall / rounds * 1e3, p.scpu / rounds * 1e3))
end
for i = 2, #progs do
  local p = progs[i]
  print(("ratio %s/whole.floor=%.2f"):format(p.name, p.rate / floor.rate))
  print(("ratio cpu %s/whole.floor=%.2f"):format(p.name, p.cpu / floor.cpu))
end
