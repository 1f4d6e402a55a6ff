-- One ZooKeeper server's process, for zklock.testing: its JVM (started,
-- waited for until it serves, signalled, stopped, closed with its
-- directory), four-letter words to it, and the shell and /proc helpers
-- these use; also the retry when another process took a port, and the
-- metatable of boxed servers and clusters.  Internal: zklock.testing's
-- server, cluster and TLS/SASL parts (zklock.testing.server, .cluster,
-- .secure) share it; nothing here is public.
local core = require "zklock.core"
local tcore = require "zklock.testing.core"

local P = {}

local HOST = "127.0.0.1"
local JAVA = os.getenv("ZKLOCK_JAVA") or "java"
local CLASSPATH = os.getenv("ZKLOCK_ZK_CLASSPATH")
  or "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
-- Small heap, quick JIT, no hsperfdata files left by a SIGKILL, a 1 MB
-- (not 64 MB) preallocated transaction log, short quorum connect timeout.
-- zookeeper.forceSnapshotSync: a member that rejoins is resynced with a
-- snapshot, never a DIFF.  Debian's ZooKeeper 3.8.0 has ZOOKEEPER-4785
-- (fixed in 3.8.4): a follower resynced by DIFF and restarted soon after
-- can lose transactions.  The torture run met it: a follower kept a lock
-- node the ensemble had deleted, and every client on that follower waited
-- on it for ever (docs/testing.md, "Servers").
local JVM_OPTS = "-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
  .. " -XX:-UsePerfData -Djava.net.preferIPv4Stack=true"
  .. " -Dzookeeper.forceSnapshotSync=true"
  .. " -Dzookeeper.preAllocSize=1024 -Dzookeeper.cnxTimeout=1000"
  .. " -Dorg.slf4j.simpleLogger.showDateTime=true"
  .. " -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS"
local START_TIMEOUT, STOP_TIMEOUT, LOG_TAIL = 30, 10, 40
-- A TLS server needs Netty (NettyServerCnxnFactory): Debian installs it
-- beside ZooKeeper, but its manifest leaves these three off the class path.
local NETTY = "/usr/share/java/netty-codec.jar"
  .. ":/usr/share/java/netty-resolver.jar"
  .. ":/usr/share/java/netty-transport-native-unix-common.jar"

local live = {} -- state -> true for every server not closed yet

local function quote(s) return "'" .. s:gsub("'", [['\'']]) .. "'" end

-- os.execute returns a number on Lua 5.1/LuaJIT, true|nil,... on 5.2+.
local function run(cmd)
  local ok = os.execute(cmd)
  if type(ok) == "number" then return ok == 0 end
  return ok == true
end

local function capture(cmd)
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("*a")
  p:close()
  return out
end

local function slurp(path)
  local f = io.open(path, "rb")
  local s = f and f:read("*a")
  if f then f:close() end
  return s
end

local function spit(path, text, mode)
  local f = assert(io.open(path, mode or "wb"))
  f:write(text)
  f:close()
end

local function tail(text, n)
  local lines = {}
  for line in text:gmatch("[^\n]+") do lines[#lines + 1] = line end
  return table.concat(lines, "\n", math.max(1, #lines - n + 1))
end

-- Calls `check` every 0.1 s until it returns a true value (returned) or
-- `timeout` seconds have passed (nil).
local function poll(timeout, check)
  local deadline = core.now() + timeout
  repeat
    local v = check()
    if v then return v end
    tcore.sleep(0.1)
  until core.now() > deadline
end

-- State letter (field 3) and start time (field 22) of process `pid`.
local function proc_stat(pid)
  local rest = (pid and slurp("/proc/" .. pid .. "/stat") or "")
    :match(".*%) (.*)")
  if not rest then return nil end
  local f = {}
  for w in rest:gmatch("%S+") do f[#f + 1] = w end
  return f[1], f[20]
end

-- A server's state (`st`): host, port, connect_string, dir, own_dir (made
-- here, removed by close), detach, id (cluster members), jvm (pid),
-- jvm_started, paused, starts; with partitions (partition.lua),
-- quorum_port, election_port, cgroup_dir, exec_prefix. Boxes hold it.

local function log_path(st) return st.dir .. "/server.log" end

-- The JVM of `st` runs: not a zombie, and the very process we spawned
-- (same start time, so a recycled pid does not count).
local function alive(st)
  local state, started = proc_stat(st.jvm)
  return state ~= nil and state ~= "Z" and state ~= "X"
    and started == st.jvm_started
end

local function signal(st, sig)
  if alive(st) then run(("kill -%s %d 2>/dev/null"):format(sig, st.jvm)) end
end

local function wait_exit(st, timeout)
  return poll(timeout, function() return not alive(st) end) == true
end

local function kill(st)
  signal(st, "KILL")
  wait_exit(st, STOP_TIMEOUT)
  st.jvm, st.paused = nil, false
end

-- A four-letter word; over TLS (st.tls: the client's certificate) through
-- `openssl s_client`, which exits when the server closes after answering.
local function four_letter(st, cmd, timeout)
  if not st.tls then
    return tcore.four_letter(st.host, st.port, cmd, timeout)
  end
  local out = capture(("printf %%s %s | timeout %g openssl s_client -quiet "
    .. "-connect %s:%d -cert %s -key %s -CAfile %s 2>/dev/null")
    :format(quote(cmd), timeout or 2, st.host, st.port, quote(st.tls.cert),
            quote(st.tls.key), quote(st.tls.ca)))
  if out == "" then return nil, "no answer over TLS", "connection_loss" end
  return out
end

local function mode(st, timeout)
  local r = four_letter(st, "srvr", timeout or 1)
  return r and r:match("Mode: (%a+)")
end

local function spawn(st)
  st.starts = st.starts + 1
  spit(log_path(st), ("--- zklock.testing: start %d ---\n"):format(st.starts),
       "ab")
  -- (detached: in a session of its own, so that no signal meant for the
  -- starting process's terminal or process group reaches it)
  local cmd = ("cd %s || exit 1; %s%s %s%s -Dzklock.testing.dir=%s -cp %s "
    .. "org.apache.zookeeper.server.quorum.QuorumPeerMain %s "
    .. ">>%s 2>&1 </dev/null & echo $!"):format(quote(st.dir),
    (st.detach and "setsid " or "") .. (st.exec_prefix or ""), JAVA,
    JVM_OPTS, st.jvm_opts or "", quote(st.dir),
    quote(CLASSPATH .. (st.tls and ":" .. NETTY or "")),
    quote(st.dir .. "/zoo.cfg"), quote(log_path(st)))
  st.jvm, st.paused = tonumber(capture(cmd):match("%d+")), false
  st.jvm_started = select(2, proc_stat(st.jvm))
end

-- Waits until `ruok` answers imok, `srvr` shows a serving mode and `conf`
-- names our data dir (not another server that holds the port). Returns
-- true, or nil and why not.
local function wait_ready(st, deadline)
  local ready = poll(deadline - core.now(), function()
    if not alive(st) then return "exited" end
    if four_letter(st, "ruok", 1) ~= "imok" or not mode(st) then
      return nil
    end
    local conf = four_letter(st, "conf", 1) or ""
    return conf:find("dataDir=" .. st.dir .. "/", 1, true) and "ready"
  end)
  if ready == "ready" then return true end
  return nil, ready and "exited during start-up" or "not serving in time"
end

local function boot(st, deadline)
  spawn(st)
  return wait_ready(st, deadline)
end

-- The error message for a failed start, with the tail of the log.
local function failure(st, why)
  return ("zklock.testing: ZooKeeper %s:%d (%s) %s\n--- last lines of %s"
    .. " ---\n%s"):format(st.host, st.port, st.id and ("member " .. st.id)
    or "standalone", why, log_path(st),
    tail(slurp(log_path(st)) or "", LOG_TAIL))
end

local function close(st)
  if not live[st] then return end
  kill(st)
  if st.cgroup_dir then -- (partition.lua; empty once its JVM is reaped)
    poll(3, function()
      return run("rmdir " .. quote(st.cgroup_dir) .. " 2>/dev/null")
    end)
  end
  if st.own_dir then run("rm -rf " .. quote(st.dir)) end
  live[st] = nil
end

-- A new directory named prefix-XXXXXX under $ZKLOCK_TEST_TMP (or /tmp).
local function mktemp(prefix)
  local base = os.getenv("ZKLOCK_TEST_TMP") or "/tmp"
  if base:sub(1, 1) ~= "/" then base = os.getenv("PWD") .. "/" .. base end
  local dir = capture("mktemp -d " .. quote(base .. "/" .. prefix .. "XXXXXX")
                      .. " 2>/dev/null"):match("[^\n]+")
  if not dir then error("zklock.testing: cannot mktemp in " .. base, 0) end
  return dir
end

-- Runs `make` up to three times while it fails because another process
-- took a port between tcore.free_port() and the JVM's bind.
local function with_port_retry(fixed_port, make)
  for attempt = 1, 3 do
    local ok, res = pcall(make)
    if ok then return res end
    if fixed_port or attempt == 3
      or not tostring(res):find("Address already in use", 1, true) then
      error(res, 0)
    end
  end
end

-- A metatable for core.box objects: `methods` first, then boxed fields.
local function class(methods, name, gc)
  return {
    __index = function(u, k)
      local m = methods[k]
      if m ~= nil then return m end
      return core.unbox(u)[k]
    end,
    __gc = gc,
    __tostring = function(u)
      return "zklock.testing." .. name(core.unbox(u))
    end,
  }
end

P.HOST = HOST
P.START_TIMEOUT, P.STOP_TIMEOUT = START_TIMEOUT, STOP_TIMEOUT
P.live = live
P.quote, P.run, P.capture, P.slurp, P.spit = quote, run, capture, slurp, spit
P.poll, P.proc_stat, P.mktemp = poll, proc_stat, mktemp
P.log_path, P.alive, P.signal, P.wait_exit, P.kill = log_path, alive,
  signal, wait_exit, kill
P.four_letter, P.mode, P.spawn, P.wait_ready, P.boot = four_letter, mode,
  spawn, wait_ready, boot
P.failure, P.close = failure, close
P.with_port_retry, P.class = with_port_retry, class

return P
