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
local secure = require "zklock.testing.secure"
local net = require "zklock.testing.partition"
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
-- how many of them serve as leader or follower, how many voters run, and
-- how many observers serve.
local function survey(members)
  local leaders, serving, running, observing = {}, 0, 0, 0
  for _, m in ipairs(members) do
    local st = core.unbox(m)
    if alive(st) and not st.paused then
      running = running + 1
      local md = mode(st, 0.5)
      if md == "leader" then leaders[#leaders + 1] = m end
      if md == "leader" or md == "follower" then serving = serving + 1 end
      if md == "observer" then -- (serves; no vote)
        running, observing = running - 1, observing + 1
      end
    end
  end
  return #leaders == 1 and leaders[1] or nil, serving, running, observing
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
    local leader, serving, running, observing = survey(members)
    return leader and serving > (#members - observing) / 2 and
      serving == running
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

-- ---------------------------------------------------------------------------
-- dynamic reconfiguration (a cluster made with `reconfig = true`)

local SUPER = "zklock-super" -- (the ensemble's super user's password)
-- its digest, for zookeeper.DigestAuthenticationProvider.superDigest:
-- base64(sha1("super:" .. SUPER))
local SUPER_DIGEST = "jUwfHbG6eQqZBgXg1wiQnW0XVus="

-- A member's line of the dynamic configuration.
local function member_line(id, ports, role)
  return ("server.%d=%s:%d:%d:%s;%s:%d"):format(id, HOST, ports.quorum,
    ports.election, role, HOST, ports.client)
end

-- Three distinct free ports: client, quorum, election.
local function three_ports()
  local seen, out = {}, {}
  while #out < 3 do
    local p = tcore.free_port()
    if not seen[p] then seen[p], out[#out + 1] = true, p end
  end
  return { client = out[1], quorum = out[2], election = out[3] }
end

-- A member's plaintext client address (`plain_port`: a TLS member of an
-- ensemble that takes reconfiguration; the configuration names it).
local function plain(st)
  return st.plain_port and (HOST .. ":" .. st.plain_port) or
    st.connect_string
end

local function refresh(cl)
  local addrs, plains = {}, {}
  for i, m in ipairs(cl.members) do
    local st = core.unbox(m)
    addrs[i], plains[i] = st.connect_string, plain(st)
  end
  cl.connect_string = table.concat(addrs, ",")
  cl.plain_connect_string = table.concat(plains, ",")
end

local function reconfigurable(self, fname)
  local cl = core.unbox(self)
  if not cl.lines then
    error(("zklock.testing: cluster:%s needs a cluster made with " ..
      "reconfig = true"):format(fname), 3)
  end
  return cl
end

--- Adds a member by dynamic reconfiguration (a cluster made with
-- `reconfig = true`): a new server, the next id, started with the current
-- members and itself, then joined as a participant (or an observer, with
-- `opts.observer`) and waited for until it serves.
-- @tparam[opt] table opts `observer` (boolean), `timeout` (seconds,
-- default 30)
-- @return the new member, or nil and a message
function Cluster:add(opts)
  local cl = reconfigurable(self, "add")
  opts = opts or {}
  local timeout = opts.timeout or START_TIMEOUT
  local deadline = core.now() + timeout
  local id = cl.next_id
  cl.next_id = id + 1
  local ports = three_ports()
  if cl.tls then -- (TLS on its client port; the configuration's is plain)
    ports.tls, ports.client = ports.client, tcore.free_port()
  end
  local role = opts.observer and "observer" or "participant"
  -- (its first configuration lists it as an observer: a joiner cannot
  -- form a quorum of its own; the reconfiguration gives its role)
  local servers = {}
  for _, l in pairs(cl.lines) do servers[#servers + 1] = l end
  table.sort(servers)
  servers[#servers + 1] = member_line(id, ports, "observer")
  local st = new_state(ports.tls or ports.client, cl.opts, id, servers)
  st.jvm_opts = (st.jvm_opts or "") .. cl.jvm_opts
  st.quorum_port, st.election_port = ports.quorum, ports.election
  st.plain_port = ports.tls and ports.client
  if cl.net then net.join(cl.net, st) end
  spawn(st)
  local member = core.box(server_mt, st)
  local line = member_line(id, ports, role)
  local conf, err = tcore.reconfig(cl.plain_connect_string, line, nil, SUPER,
    math.max(1, deadline - core.now()))
  if not conf then
    close(st)
    return nil, err
  end
  local ready, why = wait_ready(st, deadline)
  if not ready then
    local msg = failure(st, why)
    close(st)
    return nil, msg
  end
  cl.lines[id] = line
  cl.members[#cl.members + 1] = member
  refresh(cl)
  return member
end

--- Removes `member` by dynamic reconfiguration (a cluster made with
-- `reconfig = true`; the leader too), then stops it and removes its
-- directory.
-- @param member one of the cluster's members
-- @tparam[opt] number timeout seconds (default 30)
-- @return true, or nil and a message
function Cluster:remove(member, timeout)
  local cl = reconfigurable(self, "remove")
  local st = core.unbox(member)
  local at
  for i, m in ipairs(cl.members) do if m == member then at = i end end
  if not at then error("zklock.testing: not a member of this cluster", 2) end
  local rest = {}
  for i, m in ipairs(cl.members) do
    if i ~= at then rest[#rest + 1] = plain(core.unbox(m)) end
  end
  local conf, err = tcore.reconfig(table.concat(rest, ","), nil,
    tostring(st.id), SUPER, timeout or START_TIMEOUT)
  if not conf then return nil, err end
  cl.lines[st.id] = nil
  table.remove(cl.members, at)
  refresh(cl)
  close(st)
  return true
end

--- The ensemble's configuration as its members hold it now
-- (/zookeeper/config: one `server.N=` line per member, then `version=`).
-- @return the configuration, or nil and a message
function Cluster:config()
  local cl = reconfigurable(self, "config")
  return tcore.reconfig(cl.plain_connect_string, nil, nil, SUPER, 10)
end

--- Cuts `members` (a list of members, or one) off from the others (a
-- cluster made with `partitions = true`): no packet passes between their
-- quorum and election ports and the other members' until `heal`; their
-- client ports stay open.  A cut replaces the one before.
-- (docs/testing.md, "Partitions")
-- @param members the members to cut off
function Cluster:cut(members)
  local cl = core.unbox(self)
  if not cl.net then
    error("zklock.testing: cluster:cut needs a cluster made with " ..
      "partitions = true", 2)
  end
  if getmetatable(members) == server_mt then members = { members } end
  if type(members) ~= "table" then
    error("zklock.testing: cluster:cut: a member or a list of them " ..
      "expected, got " .. type(members), 2)
  end
  local out, cut, rest = {}, {}, {}
  for _, m in ipairs(members) do out[m] = true end
  for _, m in ipairs(cl.members) do
    local list = out[m] and cut or rest
    list[#list + 1] = core.unbox(m)
    out[m] = nil
  end
  if next(out) then
    error("zklock.testing: cluster:cut: not a member of this cluster", 2)
  end
  net.cut(cl.net, cut, rest)
  return true
end

--- Lifts the cut (`cut`): every member reaches every other again.
function Cluster:heal()
  local cl = core.unbox(self)
  if cl.net then net.heal(cl.net) end
  return true
end

--- Kills every member and removes their directories (and a cut).
-- Idempotent; also done when the object is collected.
function Cluster:close()
  local cl = core.unbox(self)
  if cl.net then net.heal(cl.net) end
  for _, m in ipairs(cl.members) do close(core.unbox(m)) end
  return true
end

--- @section end

--- Starts an ensemble of `n` servers on loopback and waits until every
-- member serves as leader or follower. Raises, with the tail of the
-- failing member's log and leaving nothing behind, when they do not.
-- @tparam[opt] int n the number of members (default 3)
-- @tparam[opt] table opts those of `server`, but `port`, `dir` and
-- `detach` (members have directories of their own, never detached)
-- (and `reconfig`: true for an ensemble that takes dynamic
-- reconfiguration, each member's client address in its configuration:
-- `add`, `remove`, `config`)
-- (`tls`: every member's client port TLS-only, under one authority:
-- `true`, or a table from `certificates`; with `reconfig` too, each
-- member also has a plaintext client port, the one its configuration
-- names, and `plain_connect_string` lists them)
-- (`partitions`: true for an ensemble whose members can be cut off from
-- each other, `cut` and `heal`; needs nftables and cgroup v2, as root:
-- docs/testing.md, "Partitions")
-- @return cluster: fields `members` (servers, each with an `id`) and
-- `connect_string` (with `tls`, `tls` and `certificates` too); methods
-- `leader`, `wait_quorum`, `close`, and with `reconfig`, `add`, `remove`,
-- `config`, with `partitions`, `cut` and `heal`
function M.cluster(n, opts)
  n, opts = n or 3, check_opts(opts, CLUSTER_OPTIONS, 2, "cluster")
  return with_port_retry(false, function()
    local ports, seen, servers, states = {}, {}, {}, {}
    -- (client, quorum and election ports, distinct; TLS with reconfig: a
    -- plaintext client port too, which the configuration names)
    local per = opts.tls and opts.reconfig and 4 or 3
    while #ports < per * n do
      local p = tcore.free_port()
      if not seen[p] then seen[p], ports[#ports + 1] = true, p end
    end
    local lines, mopts, jvm_opts = nil, {}, ""
    for k, v in pairs(opts) do mopts[k] = v end
    mopts.partitions = nil
    local cnet = opts.partitions and net.new() or nil
    if mopts.tls == true then -- (one authority for every member)
      mopts.tls = secure.certificates()
    end
    if opts.reconfig then -- (client addresses in the dynamic configuration)
      lines = {}
      mopts.config = {}
      for k, v in pairs(opts.config or {}) do mopts.config[k] = v end
      mopts.config.reconfigEnabled = "true"
      mopts.config.standaloneEnabled = "false"
      jvm_opts = " -Dzookeeper.DigestAuthenticationProvider.superDigest="
        .. "super:" .. SUPER_DIGEST
    end
    for i = 1, n do
      if lines then
        lines[i] = member_line(i, { client = ports[per == 4 and 3 * n + i
          or i],
          quorum = ports[n + i], election = ports[2 * n + i] },
          "participant")
        servers[i] = lines[i]
      else
        servers[i] = ("server.%d=%s:%d:%d"):format(i, HOST, ports[n + i],
                                                   ports[2 * n + i])
      end
    end
    local ok, err = pcall(function()
      for i = 1, n do
        states[i] = new_state(ports[i], mopts, i, servers)
        states[i].jvm_opts = (states[i].jvm_opts or "") .. jvm_opts
        states[i].quorum_port = ports[n + i]
        states[i].election_port = ports[2 * n + i]
        states[i].plain_port = per == 4 and ports[3 * n + i] or nil
        if cnet then net.join(cnet, states[i]) end
      end
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
    local members, addrs, plains = {}, {}, {}
    for i = 1, n do
      members[i] = core.box(server_mt, states[i])
      addrs[i], plains[i] = states[i].connect_string, plain(states[i])
    end
    return core.box(cluster_mt, { members = members,
      connect_string = table.concat(addrs, ","),
      plain_connect_string = table.concat(plains, ","), lines = lines,
      tls = states[1].tls, certificates = states[1].certificates,
      next_id = n + 1, opts = mopts, jvm_opts = jvm_opts, net = cnet })
  end)
end

return M
