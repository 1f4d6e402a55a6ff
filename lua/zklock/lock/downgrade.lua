-- The read/write lock's downgrade (docs/design.md, section 5): the write
-- holder may take the read lock too, reading past its own write node for
-- as long as that node keeps later writers out; at the write lock's last
-- release, the write node stays while a writer that queued between could
-- otherwise write during our read.  The stages of an acquire (the read
-- rests on the write node) and of a release (keep for the reader).
local core = require "zklock.core"
local check = require "zklock.rt.check"
local guard = require "zklock.rt.guard"
local hold = require "zklock.lock.hold"
local node = require "zklock.lock.node"
local H = require "zklock.lock.holders"
check.internal_file()

local M = {}

local live, argerror = hold.live, check.argerror

--- Acquire of f (a read/write lock's) by owner co: for a downgrade, the
-- write node's name (which the read waits past) and its attempt.  A read
-- holder asking for the write lock raises: it would wait for itself.
function M.over(f, co)
  if not f.partner then return nil end
  local other = f.partner.owners[co]
  if f.kind == "write" and other and not other.ended then
    argerror(1, "acquire", "zklock.rwlock " .. f.path .. ": the read " ..
      "holder asking for the write lock would wait for itself for ever; " ..
      "release the read lock first")
  end
  if f.kind == "read" and other and live(other) then
    return other.att:info(), other.att
  end
end

--- Is f a lock of a read/write lock (a downgrade can rest on its
-- write node)?  Its stages run only then (lock/init.lua's plans).
function M.on(f)
  return f.partner ~= nil
end

--- Acquire, a read hold just taken over our write node: C ends the read
-- hold with the write one.
function M.rest_stage(_, a)
  if a.over then a.att:rest_on(a.over) end
end

--- Release of owner co's write hold own: its reader's hold, and whether
-- that read rests on this write node (a live downgrade).
function M.reader(f, co, own)
  local reader = f.kind == "write" and f.partner.owners[co]
  return reader, reader and reader.over == own.att and live(reader)
end

-- Our read node sorts after any writer that queued between it and our
-- write node; such a writer would get the lock at once and write while
-- we read, so then the write node stays until we stop reading (a writer
-- that queues later waits for our read node anyway).  True: it stays,
-- and the read hold still rests on it (reader.over); false: the read
-- hold stands alone now.
local function keep_for_reader(f, own, reader, name)
  if reader.keep then return false end
  local names = H.list_names(f, f.client:session_timeout())
  local between = names and core.writer_between(names, name,
    reader.att:info())
  if between or not names then
    reader.keep = own.att
    return true
  end
  return false
end

--- Release: the write lock's last release while its holder reads keeps
-- the write node for the reader when a writer queued between; else the
-- read stands alone and the next stage gives the node back.
function M.keep_stage(f, r)
  if not (r.downgraded and r.held) then return nil end
  local own, reader = r.own, r.reader
  if guard.guarded(function() own.att:release() end, keep_for_reader, f,
      own, reader, (own.att:info())) then
    node.hold_ended(f.client, own.att, true)
    return true, true
  end
  reader.over = nil -- (no writer between: the read stands alone now)
  reader.att:rest_on(nil)
end

return M
