-- make zk / make zk-stop: a throwaway standalone ZooKeeper for trying
-- zklock out (README, "Quick start"), started by zklock.testing (Debian's
-- jars, as the specs run them) but detached: it runs in the background
-- until stopped, its data and log in DIR.
--
--   lua5.4 tools/zk.lua start DIR PORT   (waits until it serves, <= 30 s)
--   lua5.4 tools/zk.lua stop DIR
--
-- No pid file: the server's JVM is found by its command line, which
-- names DIR (-Dzklock.testing.dir=DIR), so a JVM left by an interrupted
-- start is found too, and a recycled pid never is.  Both are idempotent.
local testing = require "zklock.testing"
local core = require "zklock.core"
local tcore = require "zklock.testing.core"

local cmd, dir, port = ...
if not ((cmd == "start" and dir and tonumber(port)) or
        (cmd == "stop" and dir)) then
  io.stderr:write("usage: tools/zk.lua start DIR PORT | stop DIR\n")
  os.exit(64)
end
if dir:sub(1, 1) ~= "/" then dir = os.getenv("PWD") .. "/" .. dir end
dir = dir:gsub("/+$", "")

local function slurp(path)
  local f = io.open(path, "rb")
  local s = f and f:read("*a")
  if f then f:close() end
  return s
end

-- The pid of the JVM serving DIR, or nil.
local function find()
  local mark = "\0-Dzklock.testing.dir=" .. dir .. "\0"
  local p = assert(io.popen("ls /proc"))
  for pid in p:lines() do
    if pid:match("^%d+$") then
      local line = slurp("/proc/" .. pid .. "/cmdline")
      if line and ("\0" .. line):find(mark, 1, true) then
        local state = testing._proc_stat(pid)
        if state and state ~= "Z" and state ~= "X" then
          p:close()
          return tonumber(pid)
        end
      end
    end
  end
  p:close()
end

local function port_of()
  return (slurp(dir .. "/zoo.cfg") or ""):match("clientPort=(%d+)") or "?"
end

local function stop_hint()
  return dir:find("/build/zk$") and "make zk-stop"
    or "make zk-stop ZK_DIR=" .. dir
end

if cmd == "stop" then
  local pid = find()
  if not pid then
    print("No ZooKeeper of " .. dir .. " is running.")
    return
  end
  os.execute("kill -TERM " .. pid)
  local deadline = core.now() + 10
  while find() and core.now() < deadline do tcore.sleep(0.1) end
  if find() then
    os.execute("kill -KILL " .. pid)
    deadline = core.now() + 10
    while find() and core.now() < deadline do tcore.sleep(0.1) end
  end
  if find() then
    io.stderr:write(("ZooKeeper (pid %d) did not stop\n"):format(pid))
    os.exit(1)
  end
  print(("ZooKeeper on 127.0.0.1:%s stopped (pid %d); its data stays in %s.")
    :format(port_of(), pid, dir))
  return
end

local pid = find()
if pid then
  print(("ZooKeeper is already running on 127.0.0.1:%s (pid %d, data in %s)."
    .. "\nStop it with: %s"):format(port_of(), pid, dir, stop_hint()))
  return
end
local ok, srv = pcall(testing.server, { port = tonumber(port), dir = dir,
  detach = true })
if not ok then
  if tostring(srv):find("Address already in use", 1, true) then
    io.stderr:write(("Port %s is taken by another process (%s/server.log): "
      .. "stop it, or choose another port (make zk ZK_PORT=...).\n")
      :format(port, dir))
  else
    io.stderr:write(tostring(srv), "\n")
  end
  os.exit(1)
end
print(("ZooKeeper is running on %s (pid %d), data and log in %s.\n"
  .. "Stop it with: %s"):format(srv.connect_string, srv:pid(), dir,
  stop_hint()))
