-- Who holds a lock, and who waits: `lock:participants()` and
-- `lock:holders()`, for every kind of `zklock.lock` (docs/api.md, "Who
-- holds it"; docs/design.md, section 4.11).  C reads the names (which
-- node holds, in what order: names.c); this file only asks and waits.
-- (The doc comments below are on zklock's page of the reference:
-- config.ld.)

--- @module zklock
local core = require "zklock.core"
local check = require "zklock.rt.check"
local rt_op = require "zklock.rt.op"
local wait = require "zklock.rt.wait"
local hold = require "zklock.lock.hold"
check.internal_file()

local H = {}

local now = core.now
local Lock = {} -- (this module's methods of the class: hold.define)
local closed, await, call_op = rt_op.closed, wait.await, rt_op.call_op
local check_timeout = check.check_timeout

local fields = hold.fields

-- Every contender of f's path in queue order (child names); `family`
-- ("read"/"write" for one kind of a read/write lock's nodes) narrows it.
function H.list_names(f, timeout, family)
  local c, msg, code = closed(f.client)
  if c then return nil, msg, code end
  local op
  op, msg, code = f.client:_children(f.dir, family or f.markers)
  if not op then return nil, msg, code end
  local st = await(f.client, op, timeout and now() + timeout)
  if st == "timeout" then return nil, "timeout", "timeout" end
  return op:result()
end

-- The same as full node paths.
function H.list_participants(f, timeout, family)
  local names, msg, code = H.list_names(f, timeout, family)
  if not names then return nil, msg, code end
  local out = {}
  for i = 1, #names do out[i] = f.dir .. "/" .. names[i] end
  return out
end

-- Records { node, id, token, session } of f's holders, or of every
-- contender (all), in queue order: one listing and the gets behind it.
-- A read/write lock's kind gives its own kind's nodes, or both (both).
function H.records(f, timeout, all, both)
  local c, msg, code = closed(f.client)
  if c then return nil, msg, code end
  local family, which = f.markers, nil
  if f.partner then family, which = "rw", not both and f.kind or nil end
  return call_op(f.client, timeout or f.client:session_timeout(), "_holders",
    f.dir, family, f.max_leases, which, all)
end

--- @type Lock

--- The contenders in queue order (the first holds), as full node paths;
-- with `detail`, as the records of `holders()`, for every contender.  As
-- in Curator, `rw.read` and `rw.write` list the nodes of their own kind;
-- `rw:participants()` lists both.
-- @tparam[opt] number timeout seconds (default: the session timeout)
-- @tparam[opt] boolean detail records instead of paths
-- @return a list, or nil, message, code
function Lock:participants(timeout, detail)
  local f = fields(self, "participants")
  timeout = check_timeout(timeout, 1, "participants")
  if detail then return H.records(f, timeout, true) end
  return H.list_participants(f, timeout, f.partner and f.kind)
end

--- The current holder(s), in order, as records: `node` (full path), `id`
-- (the participant id its creator wrote: connect's `id` option for
-- zklock, Curator's node data for Curator), `token` (the node's czxid) and
-- `session` (hex id of the owning session).  One listing and the gets
-- piped behind it.
-- @tparam[opt] number timeout seconds (default: the session timeout)
-- @return a list (empty when free), or nil, message, code
function Lock:holders(timeout)
  local f = fields(self, "holders")
  timeout = check_timeout(timeout, 1, "holders")
  return H.records(f, timeout, false)
end

hold.define(Lock)

return H
