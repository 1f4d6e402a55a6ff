-- Lets the examples run from a source tree as they are, with no LUA_PATH
-- or LUA_CPATH set (README, "Examples"): when zklock is not found on the
-- paths in force, the tree's lua/ goes first, and when its C module does
-- not load (none, or another runtime's: `make -s env LUA=luajit` and then
-- lua5.4), build/<runtime>/, the one `make` built for this interpreter.
-- Each example loads it with
--   dofile((arg[0]:match("^(.*)/") or ".") .. "/paths.lua")
-- and gets the tree's root (relative to the current directory).
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local root = here .. "/.."
local build = root .. "/build/"
  .. (jit and "luajit" or "lua" .. _VERSION:match("%d+%.%d+"))
-- (PUC Lua 5.1 has no package.searchpath: the tree goes first)
local found = package.searchpath or function() end
if not found("zklock", package.path) then
  package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;"
    .. package.path
end
if not pcall(require, "zklock.core") then
  package.cpath = build .. "/?.so;" .. package.cpath
end
return root
