--- Real ZooKeeper servers for specs: a standalone server and a small
-- ensemble on loopback, each in a throwaway directory, with stop, start,
-- pause and close controls (what Curator's TestingServer and
-- TestingCluster give Java tests).
--
-- Servers are Debian's ZooKeeper 3.8 jars run by `java`. Each JVM's
-- command line names its directory, made under `$ZKLOCK_TEST_TMP` (or
-- `/tmp`), so `spec/run.sh` can kill whatever a crashed spec left behind.
-- @module zklock.testing
local core = require "zklock.core"
local tcore = require "zklock.testing.core"
local argcheck = require "zklock.rt.check"
argcheck.internal_file() -- (bad arguments point past this file, at the caller)

local M = {}

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
-- jvm_started, paused, starts. Boxes hold it.

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
    st.detach and "setsid " or "", JAVA,
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

--- Makes a throwaway certificate authority and certificates (PEM, EC
-- P-256) for TLS specs, with `openssl`.
-- @tparam[opt] string dir a directory (default: a new one under
-- `$ZKLOCK_TEST_TMP` or `/tmp`)
-- @return a table: `dir`, `ca` (the CA's certificate), and ready-made
-- `tls` options for `zklock.connect`: `client` (good), `encrypted` (its
-- key under `key_password`), `expired` (an expired certificate),
-- `stranger` (signed by another CA, which the server does not trust),
-- `wrong_ca` (a good certificate, but a CA that does not verify the
-- server); `server` ({ cert, key }), `expired_server` (expired)
function M.certificates(dir)
  dir = dir or mktemp("zklock-tls-")
  if not run("mkdir -p " .. quote(dir)) then
    error("zklock.testing: cannot make " .. dir, 0)
  end
  local function ossl(args)
    if not run("cd " .. quote(dir) .. " && openssl " .. args
               .. " >>openssl.log 2>&1") then
      error("zklock.testing: openssl " .. args .. " failed (" .. dir
            .. "/openssl.log)", 0)
    end
  end
  local newkey = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
  for _, ca in ipairs({ "ca", "other-ca" }) do
    ossl(("req -x509 %s -keyout %s.key -out %s.pem -days 3650 -subj "
          .. "'/CN=zklock test %s'"):format(newkey, ca, ca, ca))
  end
  spit(dir .. "/server.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
  local function leaf(name, cn, ca, days, csr)
    if not csr then
      ossl(("req %s -keyout %s.key -out %s.csr -subj '/CN=%s'")
           :format(newkey, name, name, cn))
    end
    ossl(("x509 -req -in %s.csr -CA %s.pem -CAkey %s.key -CAcreateserial "
          .. "-out %s.pem -days %d%s"):format(csr or name, ca, ca, name, days,
          cn == "localhost" and " -extfile server.ext" or ""))
  end
  leaf("server", "localhost", "ca", 3650)
  leaf("expired-server", "localhost", "ca", -1, "server")
  leaf("client", "zklock-client", "ca", 3650)
  leaf("expired", "zklock-client", "ca", -1, "client")
  leaf("stranger", "zklock-stranger", "other-ca", 3650)
  ossl("pkey -in client.key -out client-encrypted.key -aes256 "
       .. "-passout pass:zklock-key")
  local function p(name) return dir .. "/" .. name end
  local ca = p("ca.pem")
  return {
    dir = dir, ca = ca,
    client = { ca = ca, cert = p("client.pem"), key = p("client.key") },
    encrypted = { ca = ca, cert = p("client.pem"),
                  key = p("client-encrypted.key"),
                  key_password = "zklock-key" },
    expired = { ca = ca, cert = p("expired.pem"), key = p("client.key") },
    stranger = { ca = ca, cert = p("stranger.pem"),
                 key = p("stranger.key") },
    wrong_ca = { ca = p("other-ca.pem"), cert = p("client.pem"),
                 key = p("client.key") },
    server = { cert = p("server.pem"), key = p("server.key") },
    expired_server = { cert = p("expired-server.pem"),
                       key = p("server.key") },
  }
end

-- zoo.cfg lines and JVM options of a TLS-only server (client certificate
-- required) and of a SASL server (docs/security.md, "Servers").
local function secure_config(st, opts, cfg)
  if opts.tls then
    local certs = type(opts.tls) == "table" and opts.tls
      or M.certificates(st.dir .. "/tls")
    local srv = opts.tls_server or certs.server
    local bundle = st.dir .. "/server-bundle.pem"
    spit(bundle, (slurp(srv.key) or "") .. (slurp(srv.cert) or ""))
    st.tls, st.certificates = certs.client, certs
    cfg[#cfg + 1] = table.concat({
      "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
      "secureClientPort=" .. st.port, "secureClientPortAddress=" .. HOST,
      "ssl.keyStore.location=" .. bundle, "ssl.keyStore.type=PEM",
      "ssl.trustStore.location=" .. certs.ca, "ssl.trustStore.type=PEM",
      "ssl.clientAuth=need" }, "\n")
  else
    cfg[#cfg + 1] = "clientPort=" .. st.port .. "\nclientPortAddress=" .. HOST
  end
  if opts.sasl then
    local users = type(opts.sasl) == "table" and opts.sasl.users
      or { zklock = "zklock-secret" }
    local lines, first = {}, nil
    for user, pass in pairs(users) do
      lines[#lines + 1] = ('  user_%s="%s"'):format(user, pass)
      if not first or user < first then first = user end
    end
    table.sort(lines)
    spit(st.dir .. "/jaas.conf", "Server {\n  org.apache.zookeeper.server."
      .. "auth.DigestLoginModule required\n" .. table.concat(lines, "\n")
      .. ";\n};\n")
    st.jvm_opts = " -Djava.security.auth.login.config="
      .. quote(st.dir .. "/jaas.conf")
    st.sasl = { user = first, password = users[first] }
    cfg[#cfg + 1] = "authProvider.1=org.apache.zookeeper.server.auth."
      .. "SASLAuthenticationProvider"
    if not (type(opts.sasl) == "table" and opts.sasl.required == false) then
      cfg[#cfg + 1] = "enforce.auth.enabled=true\nenforce.auth.schemes=sasl"
    end
  end
end

-- Makes the directory, zoo.cfg and myid of a new server (not started):
-- opts.dir (a standalone server's, kept), else a new one.
local function new_state(port, opts, id, servers)
  local dir = not id and opts.dir
  if dir and dir:sub(1, 1) ~= "/" then dir = os.getenv("PWD") .. "/" .. dir end
  local st = { host = HOST, port = port, id = id, dir = dir or mktemp(
    "zklock-zk-"), own_dir = not dir, detach = not id and opts.detach,
    starts = 0, connect_string = HOST .. ":" .. port }
  dir = st.dir
  live[st] = true
  if not run("mkdir -p " .. quote(dir .. "/data")) then
    close(st)
    error("zklock.testing: cannot make " .. dir .. "/data", 0)
  end
  local cfg = { "tickTime=" .. (opts.tick_time or 500),
    "dataDir=" .. dir .. "/data", "admin.enableServer=false",
    "4lw.commands.whitelist=*",
    "minSessionTimeout=" .. (opts.min_session_timeout or 1000),
    "maxSessionTimeout=" .. (opts.max_session_timeout or 60000) }
  if servers then
    spit(dir .. "/data/myid", id .. "\n")
    cfg[#cfg + 1] = "initLimit=10\nsyncLimit=5"
    cfg[#cfg + 1] = table.concat(servers, "\n")
  end
  secure_config(st, opts, cfg)
  for k, v in pairs(opts.config or {}) do cfg[#cfg + 1] = k .. "=" .. v end
  spit(dir .. "/zoo.cfg", table.concat(cfg, "\n") .. "\n")
  return st
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

local Server = {}
local server_mt = class(Server, function(st)
  local what = not live[st] and "closed" or st.paused and "paused"
    or alive(st) and "running" or "stopped"
  return ("server{%s, %s}"):format(st.connect_string, what)
end, function(u)
  local st = core.unbox(u)
  if not st.detach then close(st) end
end)

--- A ZooKeeper server, as `zklock.testing.server()` returns it (and each
-- member of a cluster): fields `host`, `port`, `connect_string`, `dir`.
-- @type Server

--- The JVM's process id, or nil when it is not running.
function Server:pid()
  local st = core.unbox(self)
  return alive(st) and st.jvm or nil
end

--- True while the JVM runs (a paused one too).
function Server:is_running() return alive(core.unbox(self)) end

--- Sends a four-letter word ("ruok", "srvr", "mntr", ...).
-- @string cmd the word
-- @tparam[opt] number timeout seconds (default 2)
-- @return the answer text, or nil, message, code
function Server:four_letter(cmd, timeout)
  local st = core.unbox(self)
  return four_letter(st, cmd, timeout)
end

--- Stops the server: SIGTERM, and SIGKILL if it has not exited within
-- `timeout` seconds. Port and data stay for `start`.
-- @tparam[opt] number timeout seconds (default 10)
function Server:stop(timeout)
  local st = core.unbox(self)
  signal(st, "TERM")
  signal(st, "CONT") -- a paused JVM handles TERM once resumed
  if not wait_exit(st, timeout or STOP_TIMEOUT) then kill(st) end
  st.jvm, st.paused = nil, false
  return true
end

--- Starts a stopped server again, same port and data, and waits until it
-- serves (a cluster member: until it has joined a quorum). Raises with
-- the tail of the log when it does not.
-- @tparam[opt] number timeout seconds (default 30)
function Server:start(timeout)
  local st = core.unbox(self)
  if not live[st] then error("zklock.testing: server is closed", 2) end
  if alive(st) then return true end
  local ok, why = boot(st, core.now() + (timeout or START_TIMEOUT))
  if not ok then
    local msg = failure(st, why)
    kill(st)
    error(msg, 2)
  end
  return true
end

--- `stop`, then `start`.
-- @tparam[opt] number timeout `start`'s
function Server:restart(timeout)
  self:stop()
  return self:start(timeout)
end

-- Every thread of the JVM has stopped ('T'): kill -STOP returns before the
-- group stop has reached them all.
local function all_stopped(st)
  local tasks = capture(("ls /proc/%d/task 2>/dev/null"):format(st.jvm))
  local n = 0
  for tid in tasks:gmatch("%d+") do
    local state = (slurp(("/proc/%d/task/%s/stat"):format(st.jvm, tid)) or "")
      :match(".*%) (%S)")
    if state and state ~= "T" and state ~= "t" then return false end
    n = n + 1
  end
  return n > 0
end

--- Freezes the JVM (SIGSTOP): connections stay open, nothing answers.
function Server:pause()
  local st = core.unbox(self)
  signal(st, "STOP")
  st.paused = alive(st)
  if st.paused then
    assert(poll(10, function() return all_stopped(st) end),
      "server did not stop on SIGSTOP")
  end
  return true
end

--- Thaws a paused JVM (SIGCONT).
function Server:resume()
  local st = core.unbox(self)
  signal(st, "CONT")
  st.paused = false
  return true
end

--- The server's log (stdout and stderr of every start) as text.
function Server:log() return slurp(log_path(core.unbox(self))) or "" end

--- Kills the server and removes its directory (not a `dir` given to
-- `server`). Idempotent; also done when the object is collected, unless
-- the server was started with `detach`.
function Server:close()
  close(core.unbox(self))
  return true
end

--- @section end

-- The options of `cluster`, and of `server`: those and `port`, `dir`,
-- `detach`.
local CLUSTER_OPTIONS = argcheck.options({ "tick_time", "min_session_timeout",
  "max_session_timeout", "config", "timeout", "tls", "tls_server", "sasl" })
local SERVER_OPTIONS = argcheck.options({ "port", "dir", "detach" },
  CLUSTER_OPTIONS)

-- opts (argument n of fname): a table of the `allowed` keys, or nil.
local function check_opts(opts, allowed, n, fname)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    argcheck.argerror(n, fname, "table expected, got " .. type(opts))
  end
  return argcheck.check_options(opts, allowed, n, fname)
end

--- Starts a standalone ZooKeeper on a free loopback port and waits until
-- it serves. Raises, with the tail of its log and leaving nothing behind,
-- when it does not.
-- @tparam[opt] table opts `port` (default a free one), `tick_time`
-- (ms, 500), `min_session_timeout` (ms, 1000), `max_session_timeout`
-- (ms, 60000), `config` (more zoo.cfg keys), `timeout` (s, 30), `dir`
-- (the server's directory, made if missing and never removed; default a
-- new one under `$ZKLOCK_TEST_TMP` or `/tmp`), `detach` (true: the server
-- outlives this process, in a session of its own; only `close` stops it,
-- not collection nor `close_all`: `make zk`), `tls`
-- (true, or a table from `certificates`: a TLS-only server on
-- `secureClientPort` that requires a client certificate), `tls_server`
-- (its own { cert, key }, default the certificates' `server`), `sasl`
-- (true, or { users = { name = password, ... }, required = false }: SASL
-- DIGEST-MD5 with those users, default { zklock = "zklock-secret" },
-- required of every session unless `required = false`)
-- @return server: fields `host`, `port`, `connect_string`, `dir`, and
-- with `tls`, `tls` (the options a client connects with) and
-- `certificates`; with `sasl`, `sasl` ({ user, password } of the first
-- user by name);
-- methods `pid`, `is_running`, `four_letter`, `stop`, `start`,
-- `restart`, `pause`, `resume`, `log`, `close`
function M.server(opts)
  opts = check_opts(opts, SERVER_OPTIONS, 1, "server")
  return with_port_retry(opts.port, function()
    local st = new_state(opts.port or tcore.free_port(), opts)
    local ok, why = boot(st, core.now() + (opts.timeout or START_TIMEOUT))
    if not ok then
      local msg = failure(st, why)
      close(st)
      error(msg, 0)
    end
    return core.box(server_mt, st)
  end)
end

local Cluster = {}
local cluster_mt = class(Cluster, function(cl)
  return ("cluster{%s}"):format(cl.connect_string)
end, function(u) Cluster.close(u) end)

-- The single leader among running, unpaused members (nil if none or two),
-- how many of them serve, and how many there are.
local function survey(members)
  local leaders, serving, running = {}, 0, 0
  for _, m in ipairs(members) do
    local st = core.unbox(m)
    if alive(st) and not st.paused then
      running = running + 1
      local md = mode(st, 0.5)
      if md == "leader" then leaders[#leaders + 1] = m end
      if md == "leader" or md == "follower" then serving = serving + 1 end
    end
  end
  return #leaders == 1 and leaders[1] or nil, serving, running
end

--- An ensemble, as `zklock.testing.cluster()` returns it: fields
-- `members` (servers, each with an `id`) and `connect_string`.
-- @type Cluster

--- Waits until the ensemble has settled: one leader, a majority serving,
-- and every running, unpaused member serving.
-- @tparam[opt] number timeout seconds (default 30)
-- @return true, or nil and a message
function Cluster:wait_quorum(timeout)
  local members = core.unbox(self).members
  timeout = timeout or START_TIMEOUT
  if poll(timeout, function()
    local leader, serving, running = survey(members)
    return leader and serving > #members / 2 and serving == running
  end) then
    return true
  end
  return nil, "no quorum within " .. timeout .. " s"
end

--- The member whose `srvr` says `Mode: leader`, waiting while an
-- election runs.
-- @tparam[opt] number timeout seconds (default 30)
-- @return member, or nil and a message
function Cluster:leader(timeout)
  local members = core.unbox(self).members
  timeout = timeout or START_TIMEOUT
  local leader = poll(timeout, function() return (survey(members)) end)
  if leader then return leader end
  return nil, "no leader within " .. timeout .. " s"
end

--- Kills every member and removes their directories. Idempotent; also
-- done when the object is collected.
function Cluster:close()
  for _, m in ipairs(core.unbox(self).members) do close(core.unbox(m)) end
  return true
end

--- @section end

--- Starts an ensemble of `n` servers on loopback and waits until every
-- member serves as leader or follower. Raises, with the tail of the
-- failing member's log and leaving nothing behind, when they do not.
-- @tparam[opt] int n the number of members (default 3)
-- @tparam[opt] table opts those of `server`, but `port`, `dir` and
-- `detach` (members have directories of their own, never detached)
-- @return cluster: fields `members` (servers, each with an `id`) and
-- `connect_string`; methods `leader`, `wait_quorum`, `close`
function M.cluster(n, opts)
  n, opts = n or 3, check_opts(opts, CLUSTER_OPTIONS, 2, "cluster")
  return with_port_retry(false, function()
    local ports, seen, servers, states = {}, {}, {}, {}
    while #ports < 3 * n do -- client, quorum and election ports, distinct
      local p = tcore.free_port()
      if not seen[p] then seen[p], ports[#ports + 1] = true, p end
    end
    for i = 1, n do
      servers[i] = ("server.%d=%s:%d:%d"):format(i, HOST, ports[n + i],
                                                 ports[2 * n + i])
    end
    local ok, err = pcall(function()
      for i = 1, n do states[i] = new_state(ports[i], opts, i, servers) end
      local deadline = core.now() + (opts.timeout or START_TIMEOUT)
      for i = 1, n do spawn(states[i]) end
      for i = 1, n do
        local ready, why = wait_ready(states[i], deadline)
        if not ready then error(failure(states[i], why), 0) end
      end
    end)
    if not ok then
      for _, st in ipairs(states) do close(st) end
      error(err, 0)
    end
    local members, addrs = {}, {}
    for i = 1, n do
      members[i] = core.box(server_mt, states[i])
      addrs[i] = states[i].connect_string
    end
    return core.box(cluster_mt, { members = members,
                                  connect_string = table.concat(addrs, ",") })
  end)
end

--- Closes every server and cluster member this process started and has
-- not closed yet, but detached ones (for teardown, and as a safety net).
function M.close_all()
  local all = {}
  for st in pairs(live) do
    if not st.detach then all[#all + 1] = st end
  end
  for _, st in ipairs(all) do close(st) end
end

--- A loopback TCP proxy in front of `target` (a server or cluster member,
-- or a port), run by a thread of this process, to make connection faults
-- happen on command: `stall(up, down)` stops (true) or resumes (false)
-- forwarding client->server and server->client (stall down, send, cut: the
-- server applies a request whose reply never arrives); `cut()` closes every
-- connection; `refuse(on)` closes new ones at once; `stats()`; `close()`.
-- @return proxy, with `port()` and `connect_string()`
function M.proxy(target)
  local port = type(target) == "number" and target or target.port
  local p = tcore.proxy(port)
  local mt = getmetatable(p).__index
  if not mt.connect_string then
    function mt.connect_string(self) return HOST .. ":" .. self:port() end
  end
  return p
end

-- For the specs' own process handling: state letter and start time of a
-- process, or nil when there is none.
M._proc_stat = proc_stat

--- A deliberately broken mutex, for proving a checker (the torture run
-- does): its contenders ignore up to `n - 1` nodes ahead of them, so up to
-- `n` hold it at once.  Never use it to guard anything.
-- @param client a zklock client
-- @string path lock directory
-- @int n how many may hold it at once
-- @return a lock (as `zk:mutex(path)`, but broken)
function M.broken_mutex(client, path, n)
  return require("zklock.lock").new_lock(client, path, "mutex",
    { kind = "mutex", markers = "mutex", name = "zklock.mutex",
      max_leases = n })
end

return M
