-- A guarded node and fenced writes (docs/design.md, sections 4.9 and
-- 4.12): `fenced_set`, a write that only a holder's live hold lets
-- through; the read with the acquire (`acquire(t, { read = path })`) and
-- the write with the release (`release{ write =, data = }`), the stages
-- of with_lock's `update`.  (The doc comments below are on zklock's page
-- of the reference: config.ld.)

--- @module zklock
local check = require "zklock.rt.check"
local guard = require "zklock.rt.guard"
local op = require "zklock.rt.op"
local wait = require "zklock.rt.wait"
local hold = require "zklock.lock.hold"
local node = require "zklock.lock.node"
local cohort = require "zklock.lock.cohort"
check.internal_file()

local M = {}

local select, type = select, type
local argerror = check.argerror
local check_path, check_timeout = check.check_path, check.check_timeout
local check_data, call_op = check.check_data, op.call_op
local await, grace = wait.await, op.grace

local fields = hold.fields
local Lock = {} -- (this module's methods of the class: hold.define)

-- The server drops a request over jute.maxbuffer (1 MiB - 1 by default),
-- and the client sends it again on every reconnect, for ever: a write
-- with the release, or fenced by the lock node, must fit whole: its data,
-- both paths (with the chroot) and ~1 KiB of headers, versions and ACL
-- (docs/limits.md).
local MAX_REQUEST, REQUEST_OVERHEAD = 1024 * 1024 - 1, 1024
local function check_request(f, node_path, path, data, n, fname)
  local chroot = #(select(2, f.client:_limits()) or "")
  local size = #data + #node_path + #path + 2 * chroot + REQUEST_OVERHEAD
  if size > MAX_REQUEST then
    argerror(n, fname, ("the write would make a request of about %d " ..
      "bytes (%d of data, paths of %d and %d), over the server's limit " ..
      "of %d (jute.maxbuffer): write less, or use shorter paths")
      :format(size, #data, #node_path, #path, MAX_REQUEST))
  end
end

-- release's options: write, data (checked; the request's size too)
local RELEASE_OPTIONS = check.options({ "write", "data" })

--- release's options, checked for f and its hold h (nil: not held by
-- the caller, which raises later): the write's path and data, or nil.
function M.release_opts(f, h, opts)
  if opts == nil then return nil end
  if type(opts) ~= "table" then
    argerror(1, "release", "table of options expected, got " .. type(opts))
  end
  check.check_options(opts, RELEASE_OPTIONS, 1, "release")
  local write, data = opts.write, opts.data
  if write == nil then return nil end
  if f.kind == "read" then
    argerror(1, "release", "a read lock writes nothing with its release " ..
      "(write): its holders share it, so two readers' writes would race")
  end
  check_path(write, 1, "release")
  check_data(f.client, data, 1, "release")
  local name = h and h.att:info()
  if name then -- (none: lost, nothing will be sent)
    check_request(f, f.dir .. "/" .. name, write, data, 1, "release")
  end
  return write, data
end

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
  local own = hold.hold_of(f)
  if not own then
    argerror(1, "fenced_set", f.name .. " " .. f.path ..
      " is not held by the calling coroutine")
  end
  return M.fenced_set(f, own, path, data, timeout)
end

--- The fenced write of hold own of f (a lock's, or a lease: section
-- 4.12), its arguments checked.  expect (nil: set or create): the data
-- version `path` must still have, or -2: that it must not exist; else
-- the answer is nil, msg, "bad_version" and nothing is written (the
-- update of a semaphore's leases, which its holders share).
function M.fenced_set(f, own, path, data, timeout, expect)
  local name = own.att:info()
  if name then
    check_request(f, f.dir .. "/" .. name, path, data, 2, "fenced_set")
  end
  -- a hold known lost, ended, or past its max_hold, writes nothing (and so
  -- fails for certain)
  if not name or not hold.live(own) or own.att:poll() ~= "held" or
      own.att:overdue() then
    return nil, "lock lost", "lock_lost"
  end
  local v, zxid, code = call_op(f.client, timeout or
    f.client:session_timeout(), "_fenced", f.dir .. "/" .. name, path, data,
    expect)
  if v then return v, zxid end
  if code == "session_expired" then
    return nil, "lock lost: session expired", "lock_lost"
  end
  return nil, zxid, code
end


-- ---------------------------------------------------------------------------
-- the stages (lock/init.lua's lists)

--- Acquire, a hold just taken: the guarded node's data and version, read
-- behind the listing (a node of our own), handed on with a pass (the
-- last holder wrote it with its release), or a plain get under the hold
-- (a node reused or passed without it).  A read refused (no auth...)
-- lets go of the hold.
function M.read_stage(f, a)
  local read = a.read
  if not read then return nil end
  local info, att = a.info, a.att
  local known = info and info.known
  local data, version, code
  if (info and info.fresh and info.read == read) or
      (not info and a.read_sent) then
    data, version, code = att:read_result()
  elseif known and known.path == read then
    -- passed on with the hold: the value its last holder wrote with its
    -- release, no request (docs/design.md, section 16)
    data, version = known.data, known.version
  else
    data, version, code = guard.guarded(function()
      if not (info and cohort.release(f, att, true, f.pass_limit)) then
        att:release()
      end
    end, node.read_held, f.client, a.timeout, read)
  end
  if data == nil and code then
    if info then cohort.release(f, att, false) end
    node.give_back(f.client, att)
    return false, version, code
  end
  a.data, a.version = data, version
end

--- Release with a write that is not the node's last word: a level of a
-- reentrant hold, a write node a downgraded read rests on, or a hold
-- that will pass in its cohort.  The write goes first, fenced by our
-- node; then the plain release.  Once the fenced write landed the answer
-- is its own (true, version, zxid): it was made under the hold, whatever
-- ends the hold during the release (docs/api.md: `lock_lost` means
-- nothing written).
function M.not_last_word(f, r)
  local own = r.own
  return own.count > 1 or r.downgraded or (f.cohort and not own.ended and
    r.why ~= "revoke" and cohort.would_pass(f, own.att, f.pass_limit))
end

function M.write_first(lock, r)
  local own, write, data = r.own, r.write, r.data
  local v, zxid, code = lock:fenced_set(write, data)
  -- (a pass hands the value written on: cohort.lua)
  if v and own.count == 1 then
    own.known = { path = write, data = data, version = v }
  end
  lock:release()
  if not v then return nil, zxid, code end
  return true, v, zxid
end

-- Give att's node back in one multi-op with a write of `data` to `path`
-- (section 4.12).  A hold already known lost writes nothing.
-- @return true, version, zxid; or nil, msg, code
local function write_back(client, att, path, data)
  local held = att:held()
  local ok, msg, code
  if held then ok, msg, code = att:release_write(path, data) end
  if not ok then
    node.give_back(client, att, held)
    if held then return nil, msg, code end
    return nil, "lock lost: " .. path .. " not written", "lock_lost"
  end
  node.hold_ended(client, att, true)
  if await(client, att, grace(client)) == "timeout" then
    return nil, ("timeout: the write of %s with the release is not " ..
      "confirmed yet: it may still be applied"):format(path), "timeout"
  end
  local version, zxid, wcode = att:write_result()
  if version == nil then return nil, zxid, wcode end
  return true, version, zxid
end

--- Release, the node's last word: the write and our node's delete in
-- one request.
function M.write_back_stage(f, r)
  if not r.write then return nil end
  return true, write_back(f.client, r.own.att, r.write, r.data)
end

M.check_request = check_request
hold.define(Lock)

return M
