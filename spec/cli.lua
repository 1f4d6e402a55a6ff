-- What the specs of the command-line tool share (cli_spec.lua,
-- cli_commands_spec.lua, cli_secure_spec.lua): the tool as a process, the
-- job logs of spec/workers/cli_job.sh, the exit statuses, and a describe
-- block's server with the tool processes its specs start.
local H = require "spec.helpers"

local C = {}

C.JOB = "spec/workers/cli_job.sh"
C.ASK = "spec/workers/cli_ask.sh" -- (a job that asks for more time)
C.LOST, C.TEMPFAIL, C.USAGE, C.UNAVAILABLE = 79, 75, 64, 69

-- the tool as a process: same handle as H.spawn (status, wait, output)
function C.cli(...)
  return H.spawn("bin/zklock", ...)
end

-- the lines of a job log
function C.log_lines(file)
  local t = {}
  for l in (H.read(file) or ""):gmatch("[^\n]+") do t[#t + 1] = l end
  return t
end

function C.has_line(file, line)
  for _, l in ipairs(C.log_lines(file)) do
    if l == line then return true end
  end
  return false
end

-- the lines of a cli_ask.sh log without their times ("A ask 3"), and
-- the time of each ({ ["A ask 3"] = t })
function C.ask_log(file)
  local events, at = {}, {}
  for _, l in ipairs(C.log_lines(file)) do
    local e, t = l:match("^(.-) ([%d.]+)$")
    events[#events + 1] = e or l
    if e then at[e] = tonumber(t) end
  end
  return events, at
end

-- wait for a tool process to end: status, output (after_each cleans up)
function C.finished(p, timeout)
  local rc = p:wait(timeout or 60)
  return rc, p:output()
end

-- A describe block's standalone server, a session on it, and the tool
-- processes its specs start, as functions for lazy_setup, after_each and
-- lazy_teardown (busted's globals reach spec files only): `up(srv, zk,
-- hosts)` receives them; `start(...)` runs the tool and `track(p)` takes
-- any process, both cleaned up after each spec.
function C.fixture(up)
  local srv, zk
  local procs = {}
  local F = {}
  function F.track(p)
    procs[#procs + 1] = p
    return p
  end
  function F.start(...) return F.track(C.cli(...)) end
  function F.setup()
    srv = H.testing.server()
    zk = H.connect(srv)
    up(srv, zk, srv.connect_string)
  end
  function F.clean()
    for _, p in ipairs(procs) do p:cleanup() end
    procs = {}
  end
  function F.teardown()
    if zk then zk:close() end
    if srv then H.assert_no_orphans(srv); srv:close() end
  end
  return F
end

-- how many contend for the mutex at path (holder and waiters)
function C.contenders(zk, path)
  return #assert(zk:mutex(path):participants())
end

-- Two contenders at path, and the second waits: its session watches
-- the first one's node (it listed, found itself behind, and sleeps).
function C.second_waits(srv, zk, path)
  local nodes = assert(zk:mutex(path):participants(nil, true))
  if #nodes ~= 2 then return false end
  for sid, paths in pairs(H.watches_by_session(srv)) do
    if sid ~= nodes[1].session then
      for _, p in ipairs(paths) do
        if p == nodes[1].node then return true end
      end
    end
  end
  return false
end

return C
