-- A resource outside ZooKeeper that takes writes only from the lock's
-- current holder (docs/recipes.md, "A resource that checks tokens"): a
-- small TCP service on loopback that keeps one value, written with the
-- writer's fencing token.
--
--   lua5.4 examples/token_resource.lua PORTFILE [HOSTS PATH] [SECONDS]
--
-- It listens on a free loopback port (written to PORTFILE) and answers one
-- line per connection:
--   WRITE TOKEN VALUE  ->  OK | REFUSED why
--   READ               ->  TOKEN VALUE | EMPTY
-- TOKEN is the string form (lock:token("string"): CZXID.PASS, which sorts
-- as tokens are ordered).  A write whose token is older than the greatest
-- it has taken is refused: a holder that was paused past its session, and
-- whose lock has passed on, is refused once the next holder has written.
-- Given HOSTS and PATH, it also asks the ensemble (zklock.check_token)
-- and refuses a token that no longer holds the lock at PATH: the stale
-- holder is refused even when nobody has written since.  It stops after
-- SECONDS (default 300), or at the line QUIT.  LuaSocket (Debian's
-- lua-socket) does the networking.
local here = arg[0]:match("^(.*)/") or "."
dofile(here .. "/paths.lua") -- no LUA_PATH needed
local socket = require "socket"
local zklock = require "zklock"

local portfile, hosts, path, seconds = ...
local usage, number_arg = dofile(here .. "/args.lua")(
  "PORTFILE [HOSTS PATH] [SECONDS]")
if not portfile then usage("no PORTFILE") end
if hosts and not path then
  seconds, hosts = hosts, nil -- (PORTFILE SECONDS)
end
seconds = number_arg(seconds, "SECONDS", 300)

local zk = hosts and assert(zklock.connect(hosts, { session_timeout = 10 }))
local server = assert(socket.bind("127.0.0.1", 0))
local fh = assert(io.open(portfile, "w"))
fh:write(select(2, server:getsockname()), "\n")
fh:close()

local greatest, value -- the token of the last write taken, and its value

-- The answer to one request line.
local function answer(line)
  local cmd, token, data = line:match("^(%u+) ?(%S*) ?(.*)$")
  if cmd == "READ" then
    return greatest and (greatest .. " " .. value) or "EMPTY"
  elseif cmd ~= "WRITE" then
    return "REFUSED unknown request"
  end
  if not zklock.parse_token(token) then
    return "REFUSED not a token"
  end
  -- older than a write already taken: its holder's lock has passed on
  if greatest and token < greatest then
    return "REFUSED older than " .. greatest
  end
  if zk then -- and is it still the holder? (fail closed when unsure)
    local ok, why = zklock.check_token(zk, path, token)
    if ok == nil then return "REFUSED cannot check: " .. tostring(why) end
    if not ok then return "REFUSED " .. why end
  end
  greatest, value = token, data
  return "OK"
end

server:settimeout(0.2)
local deadline = socket.gettime() + seconds
while socket.gettime() < deadline do
  local client = server:accept()
  if client then
    client:settimeout(5)
    local line = client:receive("*l")
    if line == "QUIT" then client:send("OK\n") client:close() break end
    if line then client:send(answer(line) .. "\n") end
    client:close()
  end
end
server:close()
if zk then zk:close() end
