-- Fencing: a write that only a holder's live hold lets through
-- (docs/design.md, section 4.9).  Adds `fenced_set` to every lock.  (The
-- doc comments below are on zklock's page of the reference: config.ld.)

--- @module zklock
local R = require "zklock.runtime"
local L = require "zklock.lock"
R.internal_file()

local Lock = L.Lock
local argerror = R.argerror
local check_path, check_timeout = R.check_path, R.check_timeout
local check_data, call_op = R.check_data, R.call_op

local fields = L.fields

--- @type Lock

--- Fenced write: set node `path` to `data` (creating it, and its parents,
-- when missing) only while this hold's lock node still exists, in one
-- ZooKeeper multi-op (check our node, then write).  A holder whose session
-- expired, or who lost the lock while paused, is refused even if it still
-- believes it holds.  Accepted writes on one path follow the holds in
-- order; their tokens (`token()`) strictly increase.  Calling it without
-- holding the lock raises.
-- @string path the node to write
-- @string data its new data
-- @tparam[opt] number timeout seconds (default: the session timeout)
-- @return the node's new data version and the write's zxid; or nil,
--  message, code: `"lock_lost"` (nothing written), `"connection_loss"` or
--  `"timeout"` (it may have been applied)
function Lock:fenced_set(path, data, timeout)
  local f = fields(self, "fenced_set")
  check_path(path, 1, "fenced_set")
  check_data(f.client, data, 2, "fenced_set")
  timeout = check_timeout(timeout, 3, "fenced_set")
  local own = L.hold_of(f)
  if not own then
    argerror(1, "fenced_set", f.name .. " " .. f.path ..
      " is not held by the calling coroutine")
  end
  local node = own.att:info()
  if node then
    L.check_request(f, f.dir .. "/" .. node, path, data, 2, "fenced_set")
  end
  -- a hold known lost, ended, or past its max_hold, writes nothing (and so
  -- fails for certain)
  if not node or not L.live(own) or own.att:poll() ~= "held" or
      own.att:overdue() then
    return nil, "lock lost", "lock_lost"
  end
  local v, zxid, code = call_op(f.client, timeout or
    f.client:session_timeout(), "_fenced", f.dir .. "/" .. node, path, data)
  if v then return v, zxid end
  if code == "session_expired" then
    return nil, "lock lost: session expired", "lock_lost"
  end
  return nil, zxid, code
end

return {}
