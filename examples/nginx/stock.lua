--- The stock counter as a web service (examples/nginx/nginx.conf).
-- The stock lives in a ZooKeeper node, so every worker of every nginx
-- instance sees the same one; a zklock mutex guards each buy's
-- read-modify-write.  `/buy_unlocked` does the same without the lock, to
-- show what the lock prevents.
local zklock = require "zklock"
local zngx = require "zklock.ngx"

local M = {}

local LOCK = "/zklock-example/stock-lock"
local STOCK = "/zklock-example/stock"
local HEARTBEAT = "/zklock-example/leader-heartbeat"
local ACQUIRE_TIMEOUT = 30

local zk, lock

--- init_worker_by_lua: this worker's session, and its lock object (shared
-- by all requests of the worker: each request is its own owner).
function M.init_worker()
  local tls -- a TLS ZooKeeper: the client certificate's files
  if os.getenv("ZK_TLS_CA") then
    tls = { ca = os.getenv("ZK_TLS_CA"), cert = os.getenv("ZK_TLS_CERT"),
            key = os.getenv("ZK_TLS_KEY") }
  end
  zk = assert(zngx.connect(assert(os.getenv("ZK_HOSTS"),
    "ZK_HOSTS is not set"), { session_timeout = 10, tls = tls }))
  -- the worker's requests queue in the lock's cohort, in front of one node
  -- (docs/api.md, "Cohorts"); ZK_LOCK_COHORT=off (and `env
  -- ZK_LOCK_COHORT;` in nginx.conf) gives each its own node, as make
  -- bench's per-request lines do
  lock = zk:mutex(LOCK, { cohort = os.getenv("ZK_LOCK_COHORT") ~= "off" })
  -- the fleet's periodic job, run by one worker at a time (leader.lua):
  -- a heartbeat naming the leading worker, and the stock in the log
  require("leader").init_worker(zk, function()
    assert(zk:set(HEARTBEAT, ("%d %.3f"):format(ngx.worker.pid(), ngx.now())))
    local left = zk:get(STOCK)
    ngx.log(ngx.INFO, "leader ", ngx.worker.pid(), ": stock ", left or "?")
  end, 0.2)
end

function M.client() return zk end
function M.lock() return lock end
M.LOCK, M.STOCK, M.HEARTBEAT = LOCK, STOCK, HEARTBEAT

local function fail(status, msg)
  ngx.status = status
  ngx.say(msg)
  return ngx.exit(status)
end

--- Take one from the stock (the caller holds the lock, or not): true,
-- what is left; or false when sold out.
local function take_one()
  local data, err, code = zk:get(STOCK)
  if not data then
    if code == "no_node" then return false, 0 end
    error("reading the stock: " .. tostring(err))
  end
  local n = tonumber(data) or 0
  if n <= 0 then return false, 0 end
  assert(zk:set(STOCK, tostring(n - 1)))
  return true, n - 1
end
M.take_one = take_one

--- GET /buy: one item, under the lock.
-- One purchase under the lock, in two requests: the stock is read with the
-- acquire and written with the release, fenced by our lock node
-- (zklock.with_lock's `update`, docs/api.md).
local function take_from(data)
  local n = tonumber(data) or 0
  if n <= 0 then return nil, false, 0 end -- (nil: nothing written)
  return tostring(n - 1), true, n - 1
end

local function answer(ok, left, code)
  if ok == nil then return fail(503, "no lock: " .. tostring(left) .. " " ..
    tostring(code)) end
  if not ok then return fail(409, "sold out") end
  ngx.say("bought, ", left, " left")
end

function M.buy(timeout)
  answer(zklock.with_lock(lock, { timeout = timeout or ACQUIRE_TIMEOUT,
    update = STOCK }, take_from))
end

-- The same purchase the plain way: acquire, get, set, release (four
-- requests, the bench's peer for /buy).
function M.buy_plain()
  answer(zklock.with_lock(lock, ACQUIRE_TIMEOUT, take_one))
end

--- GET /buy_unlocked: the same read-modify-write, without the lock.
function M.buy_unlocked()
  local ok, left = take_one()
  if not ok then return fail(409, "sold out") end
  ngx.say("bought, ", left, " left")
end

--- GET /stock
function M.stock()
  local data, err, code = zk:get(STOCK)
  if not data and code ~= "no_node" then
    return fail(503, tostring(err))
  end
  ngx.say(tonumber(data) or 0)
end

--- GET /reset?n=30
function M.reset()
  local n = tonumber(ngx.var.arg_n) or 30
  local ok, err = zk:set(STOCK, tostring(n))
  if not ok then return fail(503, tostring(err)) end
  ngx.say(n)
end

return M
