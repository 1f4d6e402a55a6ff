--- zklock waits in a cqueues controller: an acquire (or any zklock wait)
-- in a coroutine of the controller suspends that coroutine only, and the
-- controller goes on running the others.
--
--     local cqueues = require "cqueues"
--     local zkcq = require "zklock.cqueues"
--     local cq = cqueues.new()
--     local zk = assert(zkcq.connect(cq, "127.0.0.1:2181"))
--     cq:wrap(function()
--       zklock.with_lock(zk:mutex("/app/job"), 5, function() ... end)
--     end)
--     assert(cq:loop())
--
-- A wait outside the controller's coroutines blocks the thread, as
-- without this module.  How it works: zklock.loop; docs/api.md, "Waiting
-- in an event loop".
-- @module zklock.cqueues
local check = require "zklock.rt.check"
local log = require "zklock.rt.log"
local loop = require "zklock.loop"
local cqueues = require "cqueues"
local condition = require "cqueues.condition"
check.internal_file()

local M = {}

-- The driver (zklock.loop) of controller cq.
local function driver(cq)
  local d = {}
  function d.current()
    if cqueues.running() then return condition.new() end
  end
  function d.suspend(cond) cond:wait() end
  function d.resume(cond) cond:signal() end
  function d.watch(fd, fn)
    local pollable = { pollfd = fd, events = "r" }
    local stop = condition.new()
    local stopped = false
    cq:wrap(function()
      while true do
        cqueues.poll(pollable, stop)
        if stopped then return end
        -- (an error must not end the watch: every later wait would hang)
        local ok, err = pcall(fn)
        if not ok then log.log("error", "zklock.cqueues: " .. tostring(err)) end
      end
    end)
    return function()
      stopped = true
      stop:signal()
    end
  end
  function d.spawn(fn) cq:wrap(fn) end
  return d
end

local function check_cq(cq, fname)
  if type(cq) ~= "userdata" or not cqueues.type(cq) then
    check.argerror(1, fname, "cqueues controller expected, got " .. type(cq))
  end
end

--- Open a session whose waits suspend coroutines of controller `cq`.
-- Called in a coroutine of `cq`, it waits for the connection suspended;
-- elsewhere it blocks.
-- @param cq a cqueues controller (`cqueues.new()`)
-- @param hosts as `zklock.connect`
-- @param opts as `zklock.connect`
-- @return client, or nil, message, code
function M.connect(cq, hosts, opts)
  check_cq(cq, "connect")
  return loop.connect(driver(cq), hosts, opts, "connect")
end

--- Attach a client opened with `zklock.connect` to controller `cq`.
-- @return the client, or nil, message, code
function M.attach(cq, client)
  check_cq(cq, "attach")
  return loop.attach(client, driver(cq))
end

return M
