--- Real ZooKeeper servers for specs: a standalone server and a small
-- ensemble on loopback, each in a throwaway directory, with stop, start,
-- pause and close controls (what Curator's TestingServer and
-- TestingCluster give Java tests).
--
-- Servers are Debian's ZooKeeper 3.8 jars run by `java`. Each JVM's
-- command line names its directory, made under `$ZKLOCK_TEST_TMP` (or
-- `/tmp`), so `spec/run.sh` can kill whatever a crashed spec left behind.
-- @module zklock.testing
local tcore = require "zklock.testing.core"
local argcheck = require "zklock.rt.check"
local L = require "zklock.lock"
local P = require "zklock.testing.process"
local secure = require "zklock.testing.secure"
local server = require "zklock.testing.server"
local cluster = require "zklock.testing.cluster"
local partition = require "zklock.testing.partition"
argcheck.internal_file() -- (bad arguments point past this file, at the caller)

-- The parts (their doc comments are on this module's page: config.ld):
-- zklock.testing.process, one server's JVM and files (internal);
-- .secure, certificates and TLS/SASL servers; .server, a standalone
-- server and the Server class; .cluster, an ensemble; .partition, cuts
-- between an ensemble's members (internal).
local M = {}

local HOST, live, close = P.HOST, P.live, P.close

M.certificates = secure.certificates
M.server = server.server
M.cluster = cluster.cluster

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

--- Whether this machine can cut cluster members off from each other
-- (`cluster(n, { partitions = true })`): nftables, a cgroup v2 hierarchy
-- under /sys/fs/cgroup, and root (docs/testing.md, "Partitions").
-- @function partitions
-- @return true, or nil and why not
M.partitions = partition.supported

-- For the specs' own process handling: state letter and start time of a
-- process, or nil when there is none.
M._proc_stat = P.proc_stat

--- A deliberately broken mutex, for proving a checker (the torture run
-- does): its contenders ignore up to `n - 1` nodes ahead of them, so up to
-- `n` hold it at once.  Never use it to guard anything.
-- @param client a zklock client
-- @string path lock directory
-- @int n how many may hold it at once
-- @return a lock (as `zk:mutex(path)`, but broken)
function M.broken_mutex(client, path, n)
  return L.new_lock(client, path, "mutex",
    { kind = "mutex", markers = "mutex", name = "zklock.mutex",
      max_leases = n })
end

return M
