-- Network partitions between a cluster's members, for zklock.testing
-- (`cluster(n, { partitions = true })`: `cl:cut`, `cl:heal`; what a cut is
-- and what it needs: docs/testing.md, "Partitions").  Internal.
--
-- A member's quorum and election traffic cannot go through a proxy of
-- ours once the ensemble takes dynamic reconfiguration: its configuration
-- is one list replicated to every member, so no member can be given its
-- own address for another.  A cut is therefore a packet filter: every
-- member's JVM runs in a cgroup (v2) of its own, and nftables drops, in
-- both directions, what the cut members send to the others' quorum and
-- election ports and the others to theirs, told apart by the cgroup of
-- the local socket.  Client ports are left alone: clients still reach a
-- cut member, which closes their connections once it loses its quorum,
-- as a member on the minority side of a real partition does.
local core = require "zklock.core"
local P = require "zklock.testing.process"

local N = {}

local quote, run = P.quote, P.run

-- Where the cgroup v2 hierarchy is mounted, and that place relative to
-- /sys/fs/cgroup (nftables names cgroups from there); nil when it is
-- mounted elsewhere or not at all.
local function v2_mount()
  local f = io.open("/proc/self/mounts", "r")
  if not f then return nil end
  local dir, rel
  for line in f:lines() do
    local d, typ = line:match("^%S+ (%S+) (%S+)")
    if typ == "cgroup2" then
      if d == "/sys/fs/cgroup" then dir, rel = d, "" break end
      local r = d:match("^/sys/fs/cgroup/(.+)$")
      if r then dir, rel = d, r .. "/" break end
    end
  end
  f:close()
  return dir, rel
end

local support -- true, or false and why (asked once a process)
local support_why
local made = 0

--- Whether partitions can be made here: true, or nil and why not.
function N.supported()
  if support == nil then
    local dir = v2_mount()
    local probe = ("zklock_probe_%d"):format(core.pid())
    if not run("command -v nft >/dev/null 2>&1") then
      support, support_why = false, "nft is not installed (Debian: " ..
        "nftables)"
    elseif not dir then
      support, support_why = false, "no cgroup v2 hierarchy under " ..
        "/sys/fs/cgroup"
    elseif not run(("mkdir %s 2>/dev/null && rmdir %s"):format(
        quote(dir .. "/" .. probe), quote(dir .. "/" .. probe))) then
      support, support_why = false, "cannot make a cgroup in " .. dir ..
        " (not root?)"
    elseif not run(("nft add table inet %s 2>/dev/null && " ..
        "nft delete table inet %s"):format(probe, probe)) then
      support, support_why = false, "nft cannot make a table (no " ..
        "CAP_NET_ADMIN?)"
    else
      support = true
    end
  end
  if support then return true end
  return nil, support_why
end

--- A cluster's network: its nftables table, and a cgroup per member.
function N.new()
  local ok, why = N.supported()
  if not ok then
    error("zklock.testing: cluster{ partitions = true } cannot cut here: "
      .. why, 0)
  end
  made = made + 1
  local dir, rel = v2_mount()
  local name = ("zklock_%d_%d"):format(core.pid(), made)
  return { table = name, dir = dir, rel = rel, groups = {} }
end

--- Gives member state `st` (its `id`) a cgroup of its own: made here,
-- joined by its JVM before it starts (`st.exec_prefix`: the shell joins,
-- then becomes the JVM, same pid), removed when it is closed
-- (`st.cgroup_dir`: process.lua).
function N.join(net, st)
  local name = ("%s_m%d"):format(net.table, st.id)
  local path = net.dir .. "/" .. name
  if not run("mkdir -p " .. quote(path)) then
    error("zklock.testing: cannot make the cgroup " .. path, 0)
  end
  net.groups[st.id] = name
  st.cgroup_dir = path
  st.exec_prefix = ("sh -c 'echo $$ >\"%s/cgroup.procs\" && exec \"$@\"'"
    .. " sh "):format(path)
end

-- "{ p1, p2, ... }" of the quorum and election ports of `states`.
local function port_set(states)
  local ports = {}
  for _, st in ipairs(states) do
    ports[#ports + 1] = st.quorum_port
    ports[#ports + 1] = st.election_port
  end
  return "{ " .. table.concat(ports, ", ") .. " }"
end

local function nft(script)
  local file = os.tmpname()
  P.spit(file, script)
  local ok = run(("nft -f %s >/dev/null 2>&1"):format(quote(file)))
  os.remove(file)
  return ok
end

--- Cuts `cut` (states) off from `rest` (states): replaces the table's
-- rules by those of this cut.
function N.cut(net, cut, rest)
  local lines = {
    ("table inet %s {"):format(net.table),
    "  chain out { type filter hook output priority 0; policy accept; }",
    "  chain in { type filter hook input priority 0; policy accept; }",
    "}",
    ("flush table inet %s"):format(net.table),
  }
  local function rules(from, to)
    local ports = port_set(to)
    for _, st in ipairs(from) do
      local g = ('socket cgroupv2 level 1 "%s%s"'):format(net.rel,
        net.groups[st.id])
      lines[#lines + 1] = ("add rule inet %s out %s tcp dport %s drop")
        :format(net.table, g, ports)
      lines[#lines + 1] = ("add rule inet %s in %s tcp sport %s drop")
        :format(net.table, g, ports)
    end
  end
  if #cut > 0 and #rest > 0 then
    rules(cut, rest)
    rules(rest, cut)
  end
  if not nft(table.concat(lines, "\n") .. "\n") then
    error("zklock.testing: nft refused the cut's rules", 0)
  end
end

--- Lifts every cut.
function N.heal(net)
  run(("nft delete table inet %s 2>/dev/null"):format(net.table))
end

return N
