-- Errors and cleanups around a function zklock calls: a user's critical
-- section whose error is raised again after the release (with_lock, and
-- bin/zklock), and a wait whose cleanup must run if it does not return
-- (an error, or a coroutine closed while it waits).  Not a public
-- interface.
local M = {}

local type, error, pcall, select, setmetatable =
  type, error, pcall, select, setmetatable
local xpcall, getinfo = xpcall, debug.getinfo
local unpack = table.unpack or unpack

-- An xpcall message handler that keeps where an error was raised: a
-- string comes back with the traceback of the frames between the error
-- and the xpcall appended, the frames that are gone once it is raised
-- again after the cleanup, so that an outer xpcall(debug.traceback) or
-- nginx's error log still shows them; any other value (a table) comes
-- back unchanged, the very same value.  docs/api.md, with_lock.
local MAX_FRAMES = 40
local function keep_traceback(e)
  if type(e) ~= "string" then return e end
  -- the frames from the error down to the xpcall (below it: the caller's,
  -- which the outer traceback shows), as debug.traceback writes them
  local out, level = { e, "\nstack traceback (where it was raised):" }, 2
  while true do
    local info = getinfo(level, "Slnf")
    if not info or info.func == xpcall then break end
    if level > MAX_FRAMES then out[#out + 1] = "\n\t..."; break end
    local where = info.what == "C" and "[C]"
      or ("%s:%d"):format(info.short_src, info.currentline)
    local what = info.what == "main" and "main chunk"
      or info.name and ("function '%s'"):format(info.name)
      or info.what == "C" and "?"
      or ("function <%s:%d>"):format(info.short_src, info.linedefined)
    out[#out + 1] = ("\n\t%s: in %s"):format(where, what)
    level = level + 1
  end
  return table.concat(out)
end
M.keep_traceback = keep_traceback

--- xpcall(fn, keep_traceback, ...): ok, and fn's results or its error.
if _VERSION == "Lua 5.1" and not jit then
  -- (PUC Lua 5.1's xpcall passes no arguments: a closure does)
  M.protect = function(fn, ...)
    local args, n = { ... }, select("#", ...)
    return xpcall(function() return fn(unpack(args, 1, n)) end,
      keep_traceback)
  end
else
  M.protect = function(fn, ...)
    return xpcall(fn, keep_traceback, ...)
  end
end

-- fn(...), with cleanup() run if fn does not return: an error raised out
-- of it (a waiter's, say), or, on Lua 5.4, coroutine.close() of the
-- coroutine waiting in it (a to-be-closed guard; `<close>` is loaded from
-- a string so that LuaJIT can parse this file).  cleanup must not wait: a
-- closing coroutine cannot yield.  docs/recipes.md, "abandoned waits".
if _VERSION == "Lua 5.4" then
  M.guarded = assert(load([[
    local pcall, setmetatable = ...
    local guard_mt = { __close = function(g)
      if g.armed then pcall(g.cleanup) end
    end }
    local function disarm(g, ...)
      g.armed = false
      return ...
    end
    return function(cleanup, fn, ...)
      local g <close> = setmetatable({ cleanup = cleanup, armed = true },
        guard_mt)
      return disarm(g, fn(...))
    end]], "=zklock.guard"))(pcall, setmetatable)
else
  local function pass(cleanup, ok, ...)
    if not ok then
      pcall(cleanup)
      error((...), 0)
    end
    return ...
  end
  M.guarded = function(cleanup, fn, ...)
    return pass(cleanup, pcall(fn, ...))
  end
end

return M
