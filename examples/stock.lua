-- The stock counter: 100 purchase attempts from separate processes against
-- a stock of 30.  Without a lock they oversell; under a zklock mutex never.
--
--   lua5.4 examples/stock.lua HOSTS [lock|nolock] [workers] [attempts]
--
-- The stock lives in a file every process reads and rewrites (standing in
-- for any store without transactions); each worker is its own OS process.
local zklock = require "zklock"
local core = require "zklock.core"

local hosts, mode, workers, attempts, role, file, sales = ...
mode = mode or "lock"
workers = tonumber(workers) or 10
attempts = tonumber(attempts) or 100
local STOCK = 30

local function slurp(f)
  local fh = io.open(f)
  if not fh then return nil end
  local s = fh:read("*a")
  fh:close()
  return s
end

local function spit(f, s, how)
  local fh = assert(io.open(f, how or "w"))
  fh:write(s)
  fh:close()
end

-- replace a file whole (write aside, rename): readers never see it torn
local function replace(f, s)
  local tmp = ("%s.%d"):format(f, core.pid())
  spit(tmp, s)
  assert(os.rename(tmp, f))
end

if role == "worker" then
  -- one process: its share of the attempts
  local zk = assert(zklock.connect(hosts))
  local m = zk:mutex("/examples/stock")
  local function buy()
    local left = tonumber(slurp(file))
    if left <= 0 then return false end
    -- think time between reading and writing: where races live
    local t = core.now() + 0.002
    while core.now() < t do end
    replace(file, tostring(left - 1))
    spit(sales, core.pid() .. "\n", "a")
    return true
  end
  for _ = 1, attempts do
    if mode == "lock" then
      local bought, err = zklock.with_lock(m, 30, buy)
      if bought == nil then error(err) end
    else
      buy()
    end
  end
  zk:close()
  return
end

assert(hosts, "usage: stock.lua HOSTS [lock|nolock] [workers] [attempts]")
local dir = os.getenv("TMPDIR") or "/tmp"
file = ("%s/zklock-stock-%d"):format(dir, core.pid())
sales = file .. ".sales"
spit(file, tostring(STOCK))
spit(sales, "")
local per = math.ceil(attempts / workers)
local lua = os.getenv("ZKLOCK_LUA") or "lua5.4"
local cmds = {}
for i = 1, workers do
  cmds[i] = ("%s %s %s %s %d %d worker %s %s"):format(lua, arg[0], hosts,
    mode, workers, per, file, sales)
end
-- run every worker at once and wait for all of them
assert(os.execute(table.concat(cmds, " & ") .. " & wait"))
local sold = select(2, slurp(sales):gsub("\n", ""))
local left = tonumber(slurp(file))
os.remove(file)
os.remove(sales)
print(("%-7s %d workers x %d attempts, stock %d: sold %d, stock left %d%s")
  :format(mode, workers, per, STOCK, sold, left,
    sold > STOCK and ("  <- OVERSOLD by %d"):format(sold - STOCK) or ""))
if mode == "lock" and (sold ~= STOCK or left ~= 0) then os.exit(1) end
