--- The read/write lock (Curator InterProcessReadWriteLock): two kinds of
-- `zklock.lock` on one path, and the downgrade that keeps a write node
-- while its holder reads (docs/design.md, section 5).  Loading this module
-- adds `rwlock` to the client methods.
-- @module zklock.rwlock
local core = require "zklock.core"
local R = require "zklock.runtime"
local L = require "zklock.lock"
local H = require "zklock.holders"
R.internal_file()

local unbox = core.unbox
local client_methods = core.client_methods
local getmetatable, setmetatable, type = getmetatable, setmetatable, type
local argerror, check_timeout = R.argerror, R.check_timeout

local RwLock = { __name = "zklock.rwlock" }
RwLock.__index = RwLock

--- Readers and writers of the read/write lock, in queue order (full node
-- paths); with `detail`, as records `{ node =, id =, token =, session = }`
-- (see `lock:holders`).  @return array, or nil, message, code
function RwLock:participants(timeout, detail)
  if getmetatable(self) ~= RwLock then
    argerror(1, "participants", "zklock rwlock expected, got " .. type(self))
  end
  timeout = check_timeout(timeout, 1, "participants")
  local f = unbox(self.read)
  if detail then return H.records(f, timeout, true, true) end
  return H.list_participants(f, timeout)
end

-- The write lock's last release while its holder reads (a downgrade;
-- zklock.lock calls it for a write hold still live): our read node sorts
-- after any writer that queued between it and our write node; such a
-- writer would get the lock at once and write while we read, so then the
-- write node stays until we stop reading (a writer that queues later waits
-- for our read node anyway).  True: it stays, and the read hold still
-- rests on it (reader.over); false: the read hold stands alone now.
local function keep_for_reader(f, own, reader, node)
  if reader.keep then return false end
  local names = H.list_names(f, f.client:session_timeout())
  local between = names and core.writer_between(names, node,
    reader.att:info())
  if between or not names then
    reader.keep = own.att
    return true
  end
  return false
end

--- A read/write lock (Curator InterProcessReadWriteLock): `rw.read` and
-- `rw.write` are reentrant locks on one path, nodes `_c_<uuid>-__READ__<seq>`
-- and `_c_<uuid>-__WRIT__<seq>`.  Readers share; a writer excludes everyone
-- and holds back readers that come after it; the write holder may also take
-- the read lock; a read holder asking for the write lock is refused.
function client_methods:rwlock(path, opts)
  local r = L.new_lock(self, path, "rwlock",
    { kind = "read", markers = "rw", name = "zklock.rwlock.read" }, opts)
  local w = L.new_lock(self, path, "rwlock",
    { kind = "write", markers = "rw", name = "zklock.rwlock.write" }, opts)
  local rf, wf = unbox(r), unbox(w)
  rf.partner, wf.partner = wf, rf
  wf.on_last_release = keep_for_reader
  return setmetatable({ read = r, write = w, path = path }, RwLock)
end

return { RwLock = RwLock }
