-- Taking and giving back a lock node through ZooKeeper (Curator's
-- LockInternals): an attempt queues a node in the lock's directory and
-- waits, watching only its predecessor (C: src/core), for its turn; the
-- lease of a semaphore queues behind the internal lock <path>/locks.
-- The last stage of an acquire (`take`) and of a release (`give`), and
-- the metrics of a hold's begin and end.  docs/design.md, sections 4 and
-- 4.10.
local core = require "zklock.core"
local check = require "zklock.rt.check"
local guard = require "zklock.rt.guard"
local op = require "zklock.rt.op"
local session = require "zklock.rt.session"
local rt_wait = require "zklock.rt.wait"
local metrics = require "zklock.metrics"
check.internal_file()
local WEAK_KEYS = { __mode = "k" }

local M = {}

local now = core.now
local setmetatable = setmetatable
local await, guarded_await = rt_wait.await, rt_wait.guarded_await
local closed, grace, call_op = op.closed, op.grace, op.call_op
local renews, session_leaving = session.renews, session.session_leaving

-- The participant id a client writes into its nodes: connect's `id`, or
-- "zklock HOST pid N" (made once per pid: a forked child has its own).
local HOST, DEFAULT_ID, ID_PID
function M.owner_data(client)
  local id = session.id_of(client)
  if id then return id end
  local pid = core.pid()
  if ID_PID ~= pid then
    if not HOST then
      local fh = io.open("/proc/sys/kernel/hostname")
      HOST = fh and fh:read("*l") or "localhost"
      if fh then fh:close() end
    end
    DEFAULT_ID, ID_PID = ("zklock %s pid %d"):format(HOST, pid), pid
  end
  return DEFAULT_ID
end

--- Start an attempt: a node to take in the queue of f's directory.
-- Returns it, or nil, msg, code.  (ignore: a node name the queue does
-- not wait for, a downgrade's own write node; read: a guarded read with
-- the acquire, riding behind the listing.)
function M.start(f, timeout, ignore, max_hold, read)
  local client = f.client
  local att = client:_lock(f.dir, f.kind, f.max_leases,
    M.owner_data(client), ignore, max_hold)
  if read then att:read_with(read) end
  -- (named after the connect's own id, found again by it; a default id,
  -- "zklock HOST pid N", names nothing another process could take back)
  if f.ttl then att:ttl(f.ttl, session.id_of(client) ~= nil) end
  local ok, msg, code = att:start()
  if not ok and code == "session_expired" and renews(client) then
    -- the timer thread is opening a new session: wait for it
    local st = await(client, session_leaving(client, "expired"),
      now() + (timeout or client:session_timeout()))
    if st ~= "timeout" then ok, msg, code = att:start() end
  end
  if not ok then return nil, msg, code end
  return att
end

--- Tell the acquire `a` its place in the queue (on_queued: docs/api.md,
-- "A place in the queue"), once: `position` holds ahead of it.
function M.tell(a, position)
  local fn = a.on_queued
  if fn and not a.told then
    a.told = true
    fn(position)
  end
end

--- What await calls once the attempt of acquire `a` is queued or holds:
-- on_queued with the nodes ahead of it at its first listing; nil when
-- the acquire has no on_queued.
function M.first_of(a)
  if not (a and a.on_queued) then return nil end
  return function(att) M.tell(a, att:ahead() or 0) end
end

-- Take a node in the queue of f's directory and wait to hold it.  Returns
-- the held attempt, or nil, msg, code once the node is gone again.
-- (first: await's, node.first_of)
local function take_node(f, timeout, ignore, max_hold, read, first)
  local client = f.client
  local att, msg, code = M.start(f, timeout, ignore, max_hold, read)
  if not att then return nil, msg, code end
  local st
  st, msg, code = guarded_await(client, att, timeout and now() + timeout,
    client:session_timeout(), first)
  if st == "held" then return att end
  -- timed out or failed: our node goes (now, or once its create returns)
  att:release()
  await(client, att, grace(client))
  if st == "timeout" then return nil, op.not_acquired(f.path, timeout) end
  -- held, and ended by C before we looked
  if st == "done" then return nil, op.ended_at_once(f.path) end
  return nil, msg, code
end

-- A lease (Curator InterProcessSemaphoreV2, docs/design.md section 4.10):
-- the internal lock <path>/locks lets one acquirer at a time create its
-- lease and wait, on a children watch of <path>/leases, until at most
-- max_leases leases exist; then the internal lock goes, without waiting
-- for the server's word.
-- (a: the acquire's table, for on_queued: told of the acquirers queued
-- ahead at the internal lock, or with none, of the leases over the count
-- once its lease is made)
local function take_lease(f, timeout, max_hold, a)
  local deadline = timeout and now() + timeout
  local gate_first = a and a.on_queued and function(att)
    local k = att:ahead() or 0
    if k > 0 then M.tell(a, k) end
  end
  local gate, msg, code = take_node({ client = f.client, path = f.path,
    dir = f.path .. "/locks", kind = "mutex", max_leases = 1 }, timeout,
    nil, nil, nil, gate_first)
  if not gate then return nil, msg, code end
  local left = deadline and deadline - now()
  -- (the gate goes too when this wait is abandoned: issue 22, item 3)
  local att
  att, msg, code = guard.guarded(function() gate:release() end, take_node, f,
    left and (left > 0 and left or 0), nil, max_hold, nil, M.first_of(a))
  gate:release()
  if not att and code == "timeout" then
    msg = op.not_acquired(f.path, timeout)
  end
  return att, msg, code
end

-- held attempt -> when its hold began, and its metrics kind (zklock.metrics;
-- weak: a hold never given back leaves nothing behind; two tables, so
-- that a hold makes none)
local since, kinds = setmetatable({}, WEAK_KEYS), setmetatable({}, WEAK_KEYS)

--- A hold of f's kind begins with att, after `wait` seconds (zklock.metrics;
-- passed: from a holder of the same client's cohort, without a request)
function M.hold_began(f, att, wait, passed)
  metrics.acquire_ended(f.client, f.metric, wait, nil, passed)
  since[att], kinds[att] = now(), f.metric
end

--- The hold of att ends (zklock.metrics): released, or found lost.
function M.hold_ended(client, att, held)
  local t0 = since[att]
  if t0 then
    local kind = kinds[att]
    since[att], kinds[att] = nil, nil
    if held then metrics.released(client, kind, now() - t0)
    else metrics.lost(client, kind) end
  end
end

--- A node of f's own, held: the held attempt, or nil, msg, code.
-- max_hold: seconds the hold may last (nil: f's default, if any); read:
-- a guarded node read with the acquire, riding behind the listing (not
-- for leases: their guarded read is a get once held, guarded.lua).
-- (a: the acquire's table, for its on_queued)
function M.take(f, timeout, ignore, max_hold, read, a)
  max_hold = max_hold or f.max_hold
  local t0 = now()
  local att, msg, code
  if f.kind == "lease" then
    att, msg, code = take_lease(f, timeout, max_hold, a)
  else
    att, msg, code = take_node(f, timeout, ignore, max_hold, read,
      M.first_of(a))
  end
  if att then M.hold_began(f, att, now() - t0)
  else metrics.acquire_ended(f.client, f.metric, now() - t0, code) end
  return att, msg, code
end

--- Give a held attempt's node back and wait for the server to confirm.
-- (held: whether it was held, when the caller knows it from before)
function M.give_back(client, att, held)
  if held == nil then held = att:held() end
  att:release()
  M.hold_ended(client, att, held)
  if closed(client) then return nil, "client is closed", "closed" end
  await(client, att, grace(client))
  if not held then return nil, "lock lost", "lock_lost" end
  -- someone else deleted our node before the self watch could tell
  -- (docs/design.md, section 4.5): the hold had ended
  if att:gone_first() then
    return nil, "lock lost: our node was deleted by someone else",
      "lock_lost"
  end
  return true
end

--- A plain get of `path` under a hold we have, answered as an attempt's
-- read_result: data, version; nil (no such node); or nil, msg, code.
function M.read_held(client, timeout, path)
  local data, version, code = call_op(client,
    timeout or client:session_timeout(), "_get", path)
  if data == nil and code == "no_node" then return nil end
  return data, version, code
end

-- ---------------------------------------------------------------------------
-- the stages (lock/init.lua's lists)

--- Acquire's last stage: a node of our own, always (a.read_sent: its
-- guarded read rode with it).
function M.take_stage(f, a)
  local att, msg, code = M.take(f, a.timeout, a.ignore, a.max_hold, a.read,
    a)
  if not att then return false, msg, code end
  a.att, a.read_sent = att, f.kind ~= "lease"
  return true
end

--- Release's last stage: the node goes (and a write node kept for this
-- reader with it), confirmed by the server.
function M.give_stage(f, r)
  local own = r.own
  local ok, msg, code = M.give_back(f.client, own.att, r.held)
  if own.keep then M.give_back(f.client, own.keep) end
  return true, ok, msg, code
end

return M
