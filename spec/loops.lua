-- The three event loops zklock has adapters for, behind one small face,
-- for spec/loops_spec.lua, its worker (spec/workers/loop_counter.lua) and
-- bench/loops.lua:
--   L = loops.new(name)   name: "cqueues", "luv" or "copas"
--   L.connect(hosts, opts) through the loop's adapter
--   L.spawn(fn)           run fn in a coroutine of the loop
--   L.sleep(s)            in such a coroutine: give the loop s seconds
--                         (copas 1.x has no timers: a busy wait)
--   L.every(s, fn)        a timer of the loop: fn() every s seconds
--   L.run_until(cond, t)  run the loop until cond() (false after t s)
--   L.finish()            after zk:close(): stop the timers, and let the
--                         loop finish what it closed (luv crashes at exit
--                         with a handle half-closed: run the loop)
-- Which loops this runtime has: loops.available().
local core = require "zklock.core"

local M = {}

local NAMES = { "cqueues", "luv", "copas" }

function M.available()
  local out = {}
  for _, name in ipairs(NAMES) do
    if pcall(require, name) then out[#out + 1] = name end
  end
  return out
end

local function spin(s)
  local t = core.now() + s
  while core.now() < t do end
end

-- Turn the loop (turn()) until cond() holds: true; false after t seconds.
local function turn_until(cond, t, turn)
  local deadline = core.now() + (t or 30)
  while not cond() do
    if core.now() > deadline then return false end
    turn()
  end
  return true
end

local make = {}

function make.cqueues()
  local cqueues = require "cqueues"
  local cq = cqueues.new()
  local L = {}
  function L.connect(hosts, opts)
    return require("zklock.cqueues").connect(cq, hosts, opts)
  end
  function L.spawn(fn) cq:wrap(fn) end
  function L.sleep(s) cqueues.sleep(s) end
  function L.every(s, fn)
    cq:wrap(function()
      while true do
        cqueues.sleep(s)
        fn()
      end
    end)
  end
  function L.run_until(cond, t)
    return turn_until(cond, t, function() assert(cq:step(0.05)) end)
  end
  function L.finish() end
  return L
end

function make.luv()
  local uv = require "luv"
  local L, timers = {}, {}
  function L.connect(hosts, opts)
    return require("zklock.luv").connect(hosts, opts)
  end
  function L.spawn(fn)
    local co = coroutine.create(fn)
    local ok, err = coroutine.resume(co)
    if not ok then error(debug.traceback(co, err), 0) end
  end
  function L.sleep(s)
    local co = coroutine.running()
    local t = uv.new_timer()
    t:start(math.floor(s * 1000), 0, function()
      t:close()
      local ok, err = coroutine.resume(co)
      if not ok then error(debug.traceback(co, err), 0) end
    end)
    coroutine.yield()
  end
  function L.every(s, fn)
    local t = uv.new_timer()
    local ms = math.max(1, math.floor(s * 1000))
    -- (an error in a luv callback ends the process with luv's "Uncaught
    -- Error" and no message for an assertion's table: said here first)
    t:start(ms, ms, function()
      local ok, err = pcall(fn)
      if not ok then
        local msg = type(err) == "table" and (err.message or err[1]) or err
        io.stderr:write("error in a timer: ", tostring(msg), "\n")
        error(err, 0)
      end
    end)
    timers[#timers + 1] = t
  end
  function L.run_until(cond, t)
    -- (a timer of our own bounds each turn: uv.run("once") would block
    -- for ever with nothing else due)
    local guard = uv.new_timer()
    guard:start(50, 50, function() end)
    local ok = turn_until(cond, t, function() uv.run("once") end)
    guard:close()
    return ok
  end
  function L.finish()
    for _, tm in ipairs(timers) do
      if not tm:is_closing() then tm:close() end
    end
    timers = {}
    uv.run("nowait")
  end
  return L
end

function make.copas()
  local copas = require "copas"
  local L, ticking = {}, {}
  function L.connect(hosts, opts)
    return require("zklock.copas").connect(hosts, opts)
  end
  function L.spawn(fn) copas.addthread(fn) end
  L.sleep = spin -- (copas 1.x: no timers)
  -- copas 1.x has no timers either: the program's own loop around
  -- copas.step is its clock
  function L.every(s, fn) ticking[#ticking + 1] = { s = s, fn = fn, at = core.now() + s } end
  function L.run_until(cond, t)
    return turn_until(cond, t, function()
      copas.step(0.01)
      local now = core.now()
      for _, tk in ipairs(ticking) do
        if now >= tk.at then
          tk.at = now + tk.s
          tk.fn()
        end
      end
    end)
  end
  function L.finish() ticking = {} end
  return L
end

function M.new(name)
  return assert(make[name], "no such loop: " .. tostring(name))()
end

return M
