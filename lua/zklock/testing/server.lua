-- A standalone ZooKeeper server for specs, and the Server class that it
-- and every cluster member are: `zklock.testing.server()`, and the making
-- of a new server's directory, zoo.cfg and myid (zklock.testing.cluster
-- makes its members with it).  The JVM itself: zklock.testing.process.
-- (The doc comments below are on zklock.testing's page of the reference:
-- config.ld.)

--- @module zklock.testing
local core = require "zklock.core"
local tcore = require "zklock.testing.core"
local argcheck = require "zklock.rt.check"
local P = require "zklock.testing.process"
local secure = require "zklock.testing.secure"
argcheck.internal_file() -- (bad arguments point past this file, at the caller)

local M = {}

local HOST, START_TIMEOUT, STOP_TIMEOUT = P.HOST, P.START_TIMEOUT,
  P.STOP_TIMEOUT
local live = P.live
local quote, run, capture, slurp, spit = P.quote, P.run, P.capture, P.slurp,
  P.spit
local poll, mktemp, log_path = P.poll, P.mktemp, P.log_path
local alive, signal, wait_exit, kill = P.alive, P.signal, P.wait_exit, P.kill
local four_letter, boot, failure, close = P.four_letter, P.boot, P.failure,
  P.close
local with_port_retry, class = P.with_port_retry, P.class

-- Makes the directory, zoo.cfg and myid of a new server (not started):
-- opts.dir (a standalone server's, kept), else a new one.
function M.new_state(port, opts, id, servers)
  local tc = opts.ttl_check
  if tc ~= nil and (type(tc) ~= "number" or not (tc > 0 and tc < 1e6)) then
    error("zklock.testing: ttl_check must be a number of seconds > 0", 0)
  end
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
  secure.config(st, opts, cfg)
  -- TTL nodes (zklock's ttl holds) are allowed on every server; how often
  -- the leader looks for expired ones is the server's (60 s) unless
  -- ttl_check says
  st.jvm_opts = (st.jvm_opts or "") .. (opts.ttl_nodes == false and ""
    or " -Dzookeeper.extendedTypesEnabled=true")
  if opts.ttl_check then
    st.jvm_opts = st.jvm_opts .. (" -Dznode.container.checkIntervalMs=%d")
      :format(math.max(1, math.floor(opts.ttl_check * 1000 + 0.5)))
  end
  for k, v in pairs(opts.config or {}) do cfg[#cfg + 1] = k .. "=" .. v end
  spit(dir .. "/zoo.cfg", table.concat(cfg, "\n") .. "\n")
  return st
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
  "max_session_timeout", "config", "timeout", "tls", "tls_server", "sasl",
  "reconfig", "client_auth", "partitions", "ttl_check", "ttl_nodes" })
local SERVER_OPTIONS = argcheck.options({ "port", "dir", "detach", "tick_time",
  "min_session_timeout", "max_session_timeout", "config", "timeout", "tls",
  "tls_server", "sasl", "client_auth", "ttl_check", "ttl_nodes" })

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
-- (its own { cert, key }, default the certificates' `server`),
-- `client_auth` (with `tls`: the server's `ssl.clientAuth`, "need" by
-- default, or "want" or "none"), `sasl`
-- (true, or { users = { name = password, ... }, required = false }: SASL
-- DIGEST-MD5 with those users, default { zklock = "zklock-secret" },
-- required of every session unless `required = false`), `ttl_check`
-- (seconds: how often the server looks for expired TTL nodes, its
-- `znode.container.checkIntervalMs`; default the server's, 60 s),
-- `ttl_nodes` (false: TTL nodes refused; by default they are allowed,
-- `zookeeper.extendedTypesEnabled`)
-- @return server: fields `host`, `port`, `connect_string`, `dir`, and
-- with `tls`, `tls` (the options a client connects with) and
-- `certificates`; with `sasl`, `sasl` ({ user, password } of the first
-- user by name);
-- methods `pid`, `is_running`, `four_letter`, `stop`, `start`,
-- `restart`, `pause`, `resume`, `log`, `close`
function M.server(opts)
  opts = check_opts(opts, SERVER_OPTIONS, 1, "server")
  return with_port_retry(opts.port, function()
    local st = M.new_state(opts.port or tcore.free_port(), opts)
    local ok, why = boot(st, core.now() + (opts.timeout or START_TIMEOUT))
    if not ok then
      local msg = failure(st, why)
      close(st)
      error(msg, 0)
    end
    return core.box(server_mt, st)
  end)
end

-- for zklock.testing.cluster: its members are servers
M.server_mt, M.check_opts = server_mt, check_opts
M.CLUSTER_OPTIONS = CLUSTER_OPTIONS

return M
