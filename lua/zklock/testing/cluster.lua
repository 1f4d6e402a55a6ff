-- A ZooKeeper ensemble on loopback for specs (what Curator's
-- TestingCluster gives Java tests): `zklock.testing.cluster()` starts its
-- members (servers of zklock.testing.server, each with an id) and waits
-- for a quorum; the Cluster class finds the leader and waits for the
-- ensemble to settle.  (The doc comments below are on zklock.testing's
-- page of the reference: config.ld.)

--- @module zklock.testing
local core = require "zklock.core"
local tcore = require "zklock.testing.core"
local argcheck = require "zklock.rt.check"
local P = require "zklock.testing.process"
local server = require "zklock.testing.server"
argcheck.internal_file() -- (bad arguments point past this file, at the caller)

local M = {}

local HOST, START_TIMEOUT = P.HOST, P.START_TIMEOUT
local poll, alive, mode, spawn = P.poll, P.alive, P.mode, P.spawn
local wait_ready, failure, close = P.wait_ready, P.failure, P.close
local with_port_retry, class = P.with_port_retry, P.class
local new_state, server_mt = server.new_state, server.server_mt
local check_opts, CLUSTER_OPTIONS = server.check_opts, server.CLUSTER_OPTIONS

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

return M
