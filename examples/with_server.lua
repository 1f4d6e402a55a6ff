-- Start a throwaway ZooKeeper on 127.0.0.1 (zklock.testing), run a shell
-- command with its connect string in $ZK_HOSTS, then remove the server.
--   lua5.4 examples/with_server.lua 'command using $ZK_HOSTS'
dofile((arg[0]:match("^(.*)/") or ".") .. "/paths.lua") -- no LUA_PATH needed
local testing = require "zklock.testing"
if not arg[1] or arg[1] == "" then
  io.stderr:write("with_server.lua: no command given\n",
    "usage: lua5.4 examples/with_server.lua 'command using $ZK_HOSTS'\n")
  os.exit(64)
end
local srv = testing.server()
-- exported first, so that `$ZK_HOSTS` in the command sees it
local ok, _, code = os.execute(("export ZK_HOSTS=%s; %s"):format(
  srv.connect_string, arg[1]))
srv:close()
if ok ~= true and ok ~= 0 then os.exit(type(code) == "number" and code or 1) end
