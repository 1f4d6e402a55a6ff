-- The order-number generator: 30 workers, each its own process, take order
-- numbers from one shared counter, a ZooKeeper node, under a zklock mutex.
-- No number is handed out twice.
--
--   lua5.4 examples/order_numbers.lua HOSTS [workers] [orders_each]
local here = arg[0]:match("^(.*)/") or "."
dofile(here .. "/paths.lua") -- no LUA_PATH needed
local zklock = require "zklock"
local core = require "zklock.core"

local hosts, workers, each, role, node, out = ...

-- Bad or missing arguments: a usage line on stderr, exit 64 (args.lua).
local usage, number_arg = dofile(here .. "/args.lua")(
  "HOSTS [workers] [orders_each]")

workers = number_arg(workers, "workers", 30)
each = number_arg(each, "orders_each", 5)

if role == "worker" then
  local zk = assert(zklock.connect(hosts))
  local m = zk:mutex("/examples/order-numbers-lock")
  local mine = {}
  for _ = 1, each do
    -- the counter is read with the acquire and written with the release
    mine[#mine + 1] = assert(zklock.with_lock(m,
      { timeout = 60, update = node }, function(data)
        local n = (tonumber(data) or 0) + 1
        return tostring(n), ("ORD-%06d"):format(n)
      end))
  end
  local fh = assert(io.open(out, "a"))
  fh:write(table.concat(mine, "\n"), "\n")
  fh:close()
  zk:close()
  return
end

if not hosts then usage("no HOSTS") end
local dir = os.getenv("TMPDIR") or "/tmp"
node = ("/examples/order-numbers-%d"):format(core.pid())
out = ("%s/zklock-orders-%d.out"):format(dir, core.pid())
local zk = assert(zklock.connect(hosts))
assert(zk:set(node, "0"))
local fh = assert(io.open(out, "w")); fh:close()
local lua = os.getenv("ZKLOCK_LUA") or "lua5.4"
local cmds = {}
for i = 1, workers do
  cmds[i] = ("%s %s %s %d %d worker %s %s"):format(lua, arg[0], hosts,
    workers, each, node, out)
end
assert(os.execute(table.concat(cmds, " & ") .. " & wait"))
local seen, dups, n = {}, 0, 0
for id in io.lines(out) do
  n = n + 1
  if seen[id] then dups = dups + 1 end
  seen[id] = true
end
zk:close()
os.remove(out)
print(("%d workers made %d order numbers: %d duplicates"):format(workers, n,
  dups))
if dups > 0 or n ~= workers * each then os.exit(1) end
