--- zklock waits in copas: an acquire (or any zklock wait) in a copas
-- thread or handler suspends that coroutine only, and copas goes on
-- serving the others.
--
--     local copas = require "copas"
--     local zkcopas = require "zklock.copas"
--     local zk = assert(zkcopas.connect("127.0.0.1:2181"))
--     copas.addthread(function()
--       zklock.with_lock(zk:mutex("/app/job"), 5, function() ... end)
--     end)
--     copas.loop()
--
-- Copas 1.x (Debian's) has no way to park a coroutine but a socket's
-- queue: a waiting coroutine yields itself to a queue of this module's,
-- which copas accepts as its own, and is resumed from zklock's wake-up
-- thread by the same protocol.  With copas 2 or later, `copas.sleep(-1)`
-- and `copas.wakeup` are used instead (not run by zklock's specs: Debian
-- has 1.1.7).  A wait outside copas's coroutines blocks the thread.  How
-- it works: zklock.loop; docs/api.md, "Waiting in an event loop".
-- @module zklock.copas
local check = require "zklock.rt.check"
local log = require "zklock.rt.log"
local loop = require "zklock.loop"
local copas = require "copas"
check.internal_file()

local M = {}
local yield, resume = coroutine.yield,
  coroutine.resume
local costatus = coroutine.status

-- a coroutine's failure after zklock resumed it: said the way copas 1.x
-- says an unhandled one (it cannot be raised: the wake-up thread would
-- end with it)
local function failed(co, err)
  log.log("error", "a copas thread failed: " ..
    debug.traceback(co, tostring(err)))
end

-- copas 1.x's scheduling: a coroutine yields (key, queue) and copas calls
-- queue:insert(key) and queue:push(key, co); ours keeps nothing: the
-- coroutine is known to zklock.loop
local PARKED = { insert = function() end, push = function() end }
local KEY = {}

-- Resume co as copas 1.x would, queueing it where it yields next.
local function resume1(co)
  local ok, key, queue = resume(co)
  if not ok then return failed(co, key) end
  if key and queue then
    queue:insert(key)
    queue:push(key, co)
  end
end

local driver = {}
driver.current = loop.running
if copas.wakeup then -- copas 2 or later
  function driver.suspend() copas.sleep(-1) end
  function driver.resume(co) copas.wakeup(co) end
else
  function driver.suspend() yield(KEY, PARKED) end
  function driver.resume(co)
    if costatus(co) == "suspended" then resume1(co) end
  end
end

function driver.spawn(fn) copas.addthread(fn) end

-- The wake-up thread waits on zk:fd() through copas.receive, as on a
-- socket: LuaSocket's select takes anything with getfd(); its receive
-- runs one step and says "timeout" (nothing more to read: wait again).
function driver.watch(fd, fn)
  local stopped = false
  local pseudo = {
    getfd = function() return fd end,
    dirty = function() return false end,
    settimeout = function() return 1 end,
    receive = function()
      if stopped then return nil, "closed" end
      local ok, err = pcall(fn)
      if not ok then log.log("error", "zklock.copas: " .. tostring(err)) end
      if stopped then return nil, "closed" end
      return nil, "timeout"
    end,
    close = function() return 1 end,
  }
  copas.addthread(function()
    copas.receive(pseudo, 1)
  end)
  return function() stopped = true end
end

--- Open a session whose waits suspend copas's coroutines.  Called in a
-- copas coroutine, it waits for the connection suspended; elsewhere it
-- blocks.
-- @param hosts as `zklock.connect`
-- @param opts as `zklock.connect`
-- @return client, or nil, message, code
function M.connect(hosts, opts)
  return loop.connect(driver, hosts, opts, "connect")
end

--- Attach a client opened with `zklock.connect` to copas.
-- @return the client, or nil, message, code
function M.attach(client)
  return loop.attach(client, driver)
end

return M
