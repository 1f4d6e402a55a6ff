--- zklock waits in a luv (libuv) loop: an acquire (or any zklock wait) in
-- a coroutine suspends that coroutine, and the loop goes on running
-- callbacks; the coroutine is resumed from the loop when its lock or
-- operation moved, or its time ran out.
--
--     local uv = require "luv"
--     local zkuv = require "zklock.luv"
--     local zk = assert(zkuv.connect("127.0.0.1:2181"))
--     coroutine.wrap(function()
--       zklock.with_lock(zk:mutex("/app/job"), 5, function() ... end)
--     end)()
--     uv.run()
--
-- A wait outside a coroutine (in a luv callback, say) blocks the thread,
-- as without this module.  A coroutine that fails after a resume by
-- zklock has its error and traceback raised out of `uv.run` (luv's own
-- rule for callbacks).  How it works: zklock.loop; docs/api.md, "Waiting
-- in an event loop".
-- @module zklock.luv
local check = require "zklock.rt.check"
local loop = require "zklock.loop"
local uv = require "luv"
check.internal_file()

local M = {}
local yield, resume = coroutine.yield,
  coroutine.resume
local costatus = coroutine.status

local driver = {}
driver.current = loop.running
function driver.suspend() yield() end
function driver.resume(co)
  if costatus(co) ~= "suspended" then return end
  local ok, err = resume(co)
  if not ok then error(debug.traceback(co, tostring(err)), 0) end
end
function driver.spawn(fn)
  local co = coroutine.create(fn)
  driver.resume(co)
end
function driver.watch(fd, fn)
  local poll = assert(uv.new_poll(fd))
  poll:start("r", function() fn() end)
  return function()
    poll:stop()
    if not poll:is_closing() then poll:close() end
  end
end

--- Open a session whose waits in coroutines are resumed by the luv loop.
-- Called in a coroutine, it waits for the connection suspended (the loop
-- must be running); elsewhere it blocks.
-- @param hosts as `zklock.connect`
-- @param opts as `zklock.connect`
-- @return client, or nil, message, code
function M.connect(hosts, opts)
  return loop.connect(driver, hosts, opts, "connect")
end

--- Attach a client opened with `zklock.connect` to the luv loop.
-- @return the client, or nil, message, code
function M.attach(client)
  return loop.attach(client, driver)
end

return M
