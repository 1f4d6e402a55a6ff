-- The stock counter: 100 purchase attempts from separate processes against
-- a stock of 30.  Without a lock they oversell; under a zklock mutex never.
--
--   lua5.4 examples/stock.lua HOSTS [lock|nolock] [workers] [attempts]
--
-- The stock lives in a ZooKeeper node; each worker is its own OS process.
-- Under the lock, one call does the whole purchase: zklock.with_lock's
-- `update` reads the stock with the acquire and writes it back with the
-- release, fenced by our lock node, in one multi-op (docs/api.md).
local here = arg[0]:match("^(.*)/") or "."
dofile(here .. "/paths.lua") -- no LUA_PATH needed
local zklock = require "zklock"
local core = require "zklock.core"

local hosts, mode, workers, attempts, role, node, sales = ...

-- Bad or missing arguments: a usage line on stderr, exit 64 (args.lua).
local usage, number_arg = dofile(here .. "/args.lua")(
  "HOSTS [lock|nolock] [workers] [attempts]")

mode = mode or "lock"
if mode ~= "lock" and mode ~= "nolock" then
  usage(("lock or nolock expected, got '%s'"):format(mode))
end
workers = number_arg(workers, "workers", 10)
attempts = number_arg(attempts, "attempts", 100)
local STOCK = 30

local function think() -- between reading and writing: where races live
  local t = core.now() + 0.002
  while core.now() < t do end
end

if role == "worker" then
  -- one process: its share of the attempts
  local zk = assert(zklock.connect(hosts))
  local m = zk:mutex("/examples/stock-lock")
  local bought = 0
  for _ = 1, attempts do
    if mode == "lock" then
      local ok, err = zklock.with_lock(m, { timeout = 30, update = node },
        function(data)
          local left = tonumber(data) or 0
          if left <= 0 then return nil, false end -- sold out: nothing written
          think()
          return tostring(left - 1), true
        end)
      if ok == nil then error(err) end
      if ok then bought = bought + 1 end
    else
      local left = tonumber((zk:get(node))) or 0
      if left > 0 then
        think()
        assert(zk:set(node, tostring(left - 1)))
        bought = bought + 1
      end
    end
  end
  local fh = assert(io.open(sales, "a"))
  fh:write(bought, "\n")
  fh:close()
  zk:close()
  return
end

if not hosts then usage("no HOSTS") end
local dir = os.getenv("TMPDIR") or "/tmp"
node = ("/examples/stock-%d"):format(core.pid())
sales = ("%s/zklock-stock-%d.sales"):format(dir, core.pid())
local zk = assert(zklock.connect(hosts))
assert(zk:set(node, tostring(STOCK)))
assert(io.open(sales, "w")):close()
local per = math.ceil(attempts / workers)
local lua = os.getenv("ZKLOCK_LUA") or "lua5.4"
local cmds = {}
for i = 1, workers do
  cmds[i] = ("%s %s %s %s %d %d worker %s %s"):format(lua, arg[0], hosts,
    mode, workers, per, node, sales)
end
-- run every worker at once and wait for all of them
assert(os.execute(table.concat(cmds, " & ") .. " & wait"))
local sold = 0
for n in io.lines(sales) do sold = sold + tonumber(n) end
local left = tonumber((zk:get(node)))
os.remove(sales)
zk:close()
print(("%-7s %d workers x %d attempts, stock %d: sold %d, stock left %d%s")
  :format(mode, workers, per, STOCK, sold, left,
    sold > STOCK and ("  <- OVERSOLD by %d"):format(sold - STOCK) or ""))
if mode == "lock" and (sold ~= STOCK or left ~= 0) then os.exit(1) end
