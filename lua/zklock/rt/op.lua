-- Operations: one request (or a short exchange) carried out in C and
-- awaited here, and the answers the recipes share: a closed client, how
-- long a release may wait for the server, a failed acquire's messages.
-- Not a public interface.
local core = require "zklock.core"
local check = require "zklock.rt.check"
local wait = require "zklock.rt.wait"
check.internal_file()

local M = {}

local now = core.now
local await = wait.await

--- true, "client is closed", "closed" for a closed client; else nothing.
local function closed(client)
  if client:state() == "closed" then
    return true, "client is closed", "closed"
  end
end
M.closed = closed

--- How long a release may wait for the server to confirm the deletion
-- (a deadline).
local function grace(client)
  return now() + client:session_timeout()
end
M.grace = grace

local function run_op(client, op, msg, code, timeout)
  if not op then return nil, msg, code end
  local st = await(client, op, timeout and now() + timeout)
  if st == "timeout" and op:cancel() then
    await(client, op, grace(client)) -- a cancelled enter removes its node
    return nil, "timeout", "timeout"
  end
  -- (finished, possibly just as the deadline passed: its real result)
  return op:result()
end

--- Start `client:<method>(...)` (a C op) and wait for it, at most
-- `timeout`.
function M.call_op(client, timeout, method, ...)
  local c, msg, code = closed(client)
  if c then return nil, msg, code end
  local op
  op, msg, code = client[method](client, ...)
  return run_op(client, op, msg, code, timeout)
end

--- true, or nil, msg, code
function M.succeeded(ok, msg, code)
  if ok then return true end
  return nil, msg, code
end

-- What a failed acquire of `path` answers: its wait timed out
-- (`timeout` seconds), or the hold C ended before the acquire returned
-- (past max_hold, or the server not heard from for a session timeout:
-- docs/design.md, section 9).  msg, code.
function M.not_acquired(path, timeout)
  return ("timeout: %s not acquired within %gs"):format(path, timeout),
    "timeout"
end
function M.ended_at_once(path)
  return ("lock lost: the hold of %s ended as it began (past max_hold, " ..
    "or no answer from ZooKeeper for a session timeout)"):format(path),
    "lock_lost"
end

return M
