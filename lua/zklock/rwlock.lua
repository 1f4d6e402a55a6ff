-- The read/write lock (Curator InterProcessReadWriteLock): two kinds of
-- `zklock.lock` on one path (the downgrade that keeps a write node while
-- its holder reads is a stage of the lock: lock/downgrade.lua).  Loading
-- this module adds `rwlock` to the client methods.  (The doc comments
-- below are on zklock's page of the reference: config.ld.)

--- @module zklock
local core = require "zklock.core"
local check = require "zklock.rt.check"
local L = require "zklock.lock"
local H = require "zklock.lock.holders"
check.internal_file()

local unbox = core.unbox
local client_methods = core.client_methods
local getmetatable, setmetatable, type = getmetatable, setmetatable, type
local argerror, check_timeout = check.argerror, check.check_timeout

local RwLock = { __name = "zklock.rwlock" }
RwLock.__index = RwLock

--- A read/write lock, as `zk:rwlock(path)` returns it: two locks on one
-- path, each with every method of a lock.  Readers share; a writer
-- excludes everyone.  The write holder may take the read lock too (a
-- downgrade); a read holder asking for the write lock raises.
-- @type RwLock

--- The read lock (see Lock): readers share it.
-- @field read

--- The write lock (see Lock): its holder excludes everyone.
-- @field write

--- The lock's path.
-- @field path

--- The readers and writers, in queue order (full node paths); with
-- `detail`, as the records of `lock:holders()`.
-- @tparam[opt] number timeout seconds (default: the session timeout)
-- @tparam[opt] boolean detail records instead of paths
-- @return a list, or nil, message, code
function RwLock:participants(timeout, detail)
  if getmetatable(self) ~= RwLock then
    argerror(1, "participants", "zklock rwlock expected, got " .. type(self))
  end
  timeout = check_timeout(timeout, 1, "participants")
  local f = unbox(self.read)
  if detail then return H.records(f, timeout, true, true) end
  return H.list_participants(f, timeout)
end

--- @type Client

--- A read/write lock on the nodes of Curator's
-- `InterProcessReadWriteLock`: `rw.read` and `rw.write` are reentrant
-- locks on one path, nodes `_c_<uuid>-__READ__<seq>` and
-- `_c_<uuid>-__WRIT__<seq>`.  Readers share; a writer excludes everyone
-- and holds back readers that come after it.
-- @string path the lock's directory
-- @tparam[opt] table opts `max_hold` (seconds: the default of every
--  acquire), `linger` (seconds, the write lock's)
-- @return `{ read = lock, write = lock }` (see RwLock)
function client_methods:rwlock(path, opts)
  local r = L.new_lock(self, path, "rwlock",
    { kind = "read", markers = "rw", name = "zklock.rwlock.read" }, opts)
  local w = L.new_lock(self, path, "rwlock",
    { kind = "write", markers = "rw", name = "zklock.rwlock.write" }, opts,
    nil, r)
  return setmetatable({ read = r, write = w, path = path }, RwLock)
end

return { RwLock = RwLock }
