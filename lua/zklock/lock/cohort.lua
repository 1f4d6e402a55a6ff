-- Lock cohorts (docs/design.md, section 16): the waiters of one client on
-- one lock path and kind queue here, first come first served, in front of
-- one ZooKeeper node.  Only the head of the queue has a node; a release
-- passes the hold to the next waiter without a request while the pass
-- budget allows (a remote contender seen: at most pass_limit passes), and
-- otherwise lets the node go, the next waiter queueing a new one behind
-- the remote contenders.  The node belongs to the cohort, not to a
-- waiter: a waiter that gives up leaves the node to the next one.
--
-- A cohort: { cref (its client, weakly: LuaJIT's weak keys are no
-- ephemerons, and cohorts[client] must not keep the client), key, att
-- (the node's attempt, queued or held, or nil), holder (the waiter record
-- it was passed or granted to, until its hold ends; nil), q (waiters,
-- q.first..q.last; gone ones skipped), pass (passes of this node: the
-- composite token's second half), counted (those that count against
-- pass_limit), fresh (the att came from ZooKeeper and
-- its read with the acquire is unread), read (its path), known ({ path,
-- data, version }: the last write with a release passed on) }.
-- A waiter: { max_hold, limit (its lock object's pass_limit), sig (its
-- signal, client:_signal()), on (what it waits on: zklock.rt.wait's
-- on_abandon), late
-- (came while a remote contender was known: no pass to it), granted,
-- gone, dropped (its hold's lock object was collected unreleased), solo
-- (it came to an idle cohort: see solo() below) }.
local core = require "zklock.core"
local check = require "zklock.rt.check"
local guard = require "zklock.rt.guard"
local op = require "zklock.rt.op"
local plug = require "zklock.rt.plug"
local wait = require "zklock.rt.wait"
local metrics = require "zklock.metrics"
local node = require "zklock.lock.node"
check.internal_file()
local WEAK_KEYS = { __mode = "k" }
local WEAK_VALUES = { __mode = "v" }

local M = {}

local now = core.now
local setmetatable, getmetatable, pairs = setmetatable, getmetatable,
  pairs
local await, guarded = wait.await, guard.guarded

-- client -> { key -> cohort } (weak values: an idle cohort stays for the
-- next acquire on its lock, no table made again, until the collector
-- takes it; a busy one is kept by its waiters and its holder's sentinel)
local cohorts = setmetatable({}, WEAK_KEYS)
-- attempt -> the last pass number its node gave, for a node that lingers
-- (lock caching: held again, it goes on counting); set by linger.lua
local last_pass = setmetatable({}, WEAK_KEYS)

local solo, join, watch_over -- (below)

-- (what zklock.ngx calls for a wait nginx abandoned: zklock.rt.wait)
local on_abandon = wait.on_abandon

-- a solo waiter -> its hold's anchor (the info table its hold record
-- keeps: solo() below); weak both ways
local anchors = setmetatable({}, { __mode = "kv" })

-- f's cohort, if it has one now: its key, and the cohort or nil.  (A
-- lock object does not keep its cohort: a cohort is kept by its waiters
-- and holder, so that one dropped with them lets its node go.)
local function existing(f)
  local key = f.ckey
  if not key then
    key = f.kind .. " " .. f.dir
    f.ckey = key
  end
  local all = cohorts[f.client]
  return key, all and all[key]
end

local function cohort_of(f)
  local key, c = existing(f)
  if not c then
    c = { cref = setmetatable({ f.client }, WEAK_VALUES), key = key,
      q = { first = 1, last = 0 }, pass = 0, counted = 0 }
    local all = cohorts[f.client]
    if not all then
      all = setmetatable({}, WEAK_VALUES)
      cohorts[f.client] = all
    end
    all[key] = c
  end
  return c
end

-- The first waiter still waiting (gone and granted ones dropped).
local function head(c)
  local q = c.q
  while q.first <= q.last do
    local w = q[q.first]
    if not w.gone and not w.granted then return w end
    q[q.first] = nil
    q.first = q.first + 1
  end
  q.first, q.last = 1, 0
  return nil
end

-- (an idle cohort stays, for the collector: `cohorts` is weak-valued;
-- its queue is reset by head())
local function forget_if_idle(c)
  head(c)
end

local function wake(w)
  if w and w.sig then w.sig:_fire() end
end

-- The cohort's node is no longer its own (given back, lingering, lost):
-- the next waiter queues a new one.
local function detach(c)
  c.att, c.holder, c.pass, c.counted, c.fresh, c.read, c.known =
    nil, nil, 0, 0, nil, nil, nil
  wake(head(c))
end

-- Still the cohort's node to wait for or to hold?
local function alive(att)
  local st = att:poll()
  return st ~= "done" and st ~= "failed"
end

-- May the hold go from its holder to w without a request?  Not when its
-- node was asked to revoke (C read "__REVOKE__" for it: the revoker wants
-- it gone, whether or not the holder's on_revoke ran yet).  Passes count
-- against the limit once a remote contender was seen: its node listed by
-- the contenders watch, or the directory's change that will show it
-- (docs/design.md, section 16).
local function may_pass(c, w, limit)
  local att = c.att -- (contenders() may run a finalizer that lets it go)
  if not w or (w.late and w.late == att) then return false end
  if att:revoke_asked() then return false end
  local contended, listed = att:contenders()
  if listed == nil then att:watch_contenders() end
  if contended or listed == "changed" then return c.counted < limit, true end
  return true, false
end

-- Hand the hold of c's node to the next waiter, or let the node go (not
-- waiting: a release that must wait calls give_back itself).  Returns
-- true when passed.  A collector's step in the calls between the choice
-- of w and its grant (contenders() pushes a string) may run w's
-- sentinel's finalizer (watch_over): it marks w gone and fires the next
-- waiter, or, with nobody left, lets the node go.  So w is looked at
-- again after them, and the grant goes to the next live waiter, or to
-- none: never to a waiter marked gone, which nobody would ever run.
local function hand_on(c, limit, passable)
  local att = c.att
  while passable do
    local w = head(c)
    if not w then return false end
    local ok, counts = may_pass(c, w, limit)
    if not (ok and att:pass(w.max_hold)) or c.att ~= att then
      return false
    end
    if not w.gone then
      if counts then c.counted = c.counted + 1 end
      c.pass = c.pass + 1
      c.holder, w.granted = w, true
      wake(w)
      return true
    end
  end
  return false
end

-- w waits on nothing zklock.rt.wait need know of any more
local function unlist(w)
  if w.on then on_abandon(w.on, nil); w.on = nil end
end

-- A waiter leaves the queue (timed out, abandoned): a node it was waiting
-- for goes to the next waiter, or goes; a hold passed to it and not taken
-- goes on.
local function leave(c, w)
  if w.gone then return end
  w.gone = true
  unlist(w)
  if w.granted and c.holder == w then -- passed to it, never taken
    c.holder = nil
    local att = c.att
    if not hand_on(c, w.limit, true) then
      detach(c)
      if att then att:release() end
    end
  elseif c.att and not c.holder and head(c) == nil then
    -- nobody left to wait for the node: it goes (now, or once created)
    local att = c.att
    detach(c)
    att:release()
    forget_if_idle(c)
    return att
  else
    wake(head(c)) -- (the next one leads, if it was the leader)
  end
  forget_if_idle(c)
end

-- The cohort's attempt `serial` ended without a release (lost, past
-- max_hold): the holder is detached (it learns it at its release) and
-- the next waiter queues a new node.
function M.attempt_lost(client, serial)
  for _, c in pairs(cohorts[client] or {}) do -- (a client has few)
    if c.att and c.att:serial() == serial then
      detach(c)
      forget_if_idle(c)
      return 0
    end
  end
  return 0
end

-- What leaves the queue for w when its wait is abandoned (on_abandon).
-- Made here, not in wait_turn: a closure there would refer to the
-- waiting frame's own variables, which zklock.ngx's sweep reads after
-- nginx dropped that coroutine (and perhaps reused its stack for another
-- request); these are this function's, closed when it returns.
local function leaver(c, w)
  return function() leave(c, w) end
end

-- w now waits on obj, which zklock.rt.wait knows of
local function wait_on(_, w, obj)
  unlist(w)
  on_abandon(obj, w.bye); w.on = obj
end

-- leave, and wait (a grace period) for a node let go of to be gone: an
-- acquire that fails leaves no node behind
local function leave_wait(c, w)
  local att = leave(c, w)
  local client = c.cref[1]
  if att and client then await(client, att, op.grace(client)) end
end

-- A hold whose lock object was collected without a release (its
-- sentinel's finalizer marked it dropped): it goes on, or the node goes.
local function take_over_dropped(c)
  local att, limit = c.att, c.holder.limit
  c.holder, c.known = nil, nil
  if not att then detach(c); return end -- (a solo waiter's, before its node)
  if not hand_on(c, limit, att:held()) then
    detach(c)
    att:release()
  end
end

-- Wait for w's turn; returns the held attempt and { pass, fresh, read,
-- known }, or nil, msg, code.
-- Waiter w's place in cohort c (on_queued: docs/api.md, "A place in the
-- queue"): the hold there is, or the holds ahead of the cohort's node
-- and the waiter that waits on it, then the waiters queued ahead of w.
-- (Remote contenders seen, that w will queue behind, are not counted:
-- not known yet.)
-- The waiters of cohort c still waiting in its queue ahead of w (nil:
-- all of them).
local function waiting_ahead(c, w)
  local q, n = c.q, 0
  for i = q.first, q.last do
    local x = q[i]
    if x == w then break end
    if x and not x.gone and not x.granted then n = n + 1 end
  end
  return n
end

local function place(c, w)
  local h, n = c.holder, 0
  if h then
    n = h.granted and 1 or 1 + (c.att and c.att:ahead() or 0)
  elseif c.att then
    n = c.att:ahead() or 0
  end
  return n + waiting_ahead(c, w)
end

local function wait_turn(f, c, w, timeout, deadline, read, a)
  local client = f.client
  -- (queued in the cohort: told of its place, once; an error there ends
  -- the wait, w leaving the queue: the guard.  A waiter first in an idle
  -- cohort is told from its own node's listing, below.)
  if a and a.on_queued and not (head(c) == w and not c.holder and
      not c.att) then
    node.tell(a, place(c, w))
  end
  while true do
    if w.granted then
      w.gone = true
      unlist(w)
      if c.holder == w and not c.att:held() then
        -- ended in C, not told yet (past the max_hold it was passed with,
        -- no answer for a session timeout): no hold, though att:poll()
        -- may say "pending" while its node is deleted, or "held" until
        -- the timer thread looks.  It fails as a per-request acquire whose
        -- hold ended at once does (take_node), its node gone first.
        local att = c.att
        detach(c)
        att:release()
        await(client, att, op.grace(client))
      end
      if c.holder ~= w then -- (lost before it ran: attempt_lost)
        -- the client closed meanwhile (which ended the hold): an acquire
        -- of a closed client answers closed (docs/api.md)
        local c_closed, cmsg, ccode = op.closed(client)
        if c_closed then return nil, cmsg, ccode end
        return nil, ("lock lost: the hold of %s passed to this waiter " ..
          "ended before it ran"):format(f.path), "lock_lost"
      end
      return c.att, { pass = c.pass, passed = true, known = c.known, w = w }
    end
    if w.gone then -- (abandoned by zklock.ngx's sweep: it left the queue)
      return nil, "abandoned", "closed"
    end
    local c_closed, cmsg, ccode = op.closed(client)
    if c_closed then leave_wait(c, w); return nil, cmsg, ccode end
    if c.holder and c.holder.dropped then take_over_dropped(c) end
    if c.holder and c.att and not alive(c.att) then detach(c) end
    if head(c) == w and not c.holder then
      -- the leader: the cohort's node is ours to wait for
      if c.att and not alive(c.att) then detach(c) end
      if not c.att then
        local left = deadline and deadline - now()
        local att, msg, code = node.start(f, left and (left > 0 and left or 0),
          nil, nil, read)
        if not att then leave_wait(c, w); return nil, msg, code end
        if w.gone then att:release(); return nil, "abandoned", "closed" end
        c.att, c.fresh, c.read, c.pass, c.counted = att, true, read, 0, 0
      end
      local att = c.att
      wait_on(c, w, att)
      local st, msg, code = await(client, att, deadline,
        client:session_timeout(), a and not a.told and node.first_of(a) or
        nil)
      unlist(w)
      if w.gone then -- (left meanwhile: abandoned by zklock.ngx)
        return nil, "abandoned", "closed"
      elseif st == "held" and c.att == att and att:pass(w.max_hold) then
        c.holder, w.granted, w.gone = w, true, true
        -- others wait behind: learn of remote contenders from now on
        if head(c) then att:watch_contenders() end
        local fresh = c.fresh
        c.fresh = nil
        return att, { pass = c.pass, fresh = fresh, read = c.read, w = w }
      elseif st == "timeout" then
        leave_wait(c, w)
        return nil, op.not_acquired(f.path, timeout)
      elseif c.att == att then
        -- the node is lost or failed (or held and no longer believed, as
        -- good as lost): this waiter fails with it, as a per-request
        -- acquire would, and the next one queues anew
        detach(c)
        att:release()
        leave(c, w)
        await(client, att, op.grace(client))
        if st == "done" or st == "held" then
          return nil, op.ended_at_once(f.path)
        end
        return nil, msg, code
      end
    else
      local sig = w.sig
      if not sig or sig:poll() == "done" then
        local msg, code
        sig, msg, code = client:_signal()
        if not sig then leave_wait(c, w); return nil, msg, code end
        w.sig = sig
        wait_on(c, w, sig)
      end
      -- (a finalizer may have run since the look above: a dropped hold's
      -- sentinel fires the signal it found, perhaps the one replaced)
      local again = w.granted or (c.holder and c.holder.dropped) or
        (head(c) == w and not c.holder)
      if not again and await(client, sig, deadline) == "timeout" and
          not w.granted then
        leave_wait(c, w)
        return nil, op.not_acquired(f.path, timeout)
      end
    end
  end
end

-- An object whose finalizer runs fn, protected: an error raised in a
-- finalizer would surface wherever the collector happened to run
-- (LuaJIT), and an object fn touches may be collected in the same cycle.
-- One metatable for all (one object and fn made per hold, nothing more).
local newproxy, pcall = newproxy, pcall -- (LuaJIT: tables have no __gc)
local finalized
if newproxy then
  local fns = setmetatable({}, WEAK_KEYS) -- proxy -> fn
  local proto = newproxy(true)
  getmetatable(proto).__gc = function(p)
    local fn = fns[p]
    if fn then pcall(fn) end
  end
  finalized = function(fn)
    local p = newproxy(proto) -- (its metatable is proto's)
    fns[p] = fn
    return p
  end
else
  local mt = { __gc = function(t) pcall(t[1]) end }
  finalized = function(fn)
    return setmetatable({ fn }, mt)
  end
end

-- The sentinel of waiter w: kept by the waiting coroutine, then by the
-- hold it took (hold.lua's hold record).  Should the coroutine, or the
-- hold's lock object, be collected before the hold was given back (a
-- request nginx finalized before it ran again, a lock dropped while
-- held), its finalizer hands the node on: it marks the hold dropped (the
-- next waiter takes it over) or the waiter gone, and fires the first
-- waiter still waiting; with nobody waiting, the node goes, as the
-- attempt's own finalizer does outside a cohort.  A finalizer may run
-- anywhere: it only marks, fires and releases (C).
function watch_over(c, w)
  return finalized(function()
    if c.holder == w then w.dropped = true
    elseif not w.gone then w.gone = true
    else return end
    local q = c.q
    for i = q.first, q.last do
      local h = q[i]
      if h and not h.gone and not h.granted then
        if h.sig then h.sig:_fire() end
        return
      end
    end
    local att = c.att
    if att and (c.holder == w or c.holder == nil) then
      c.att, c.holder = nil, nil -- (nobody waits: the node goes)
      att:release()
    end
  end)
end

-- A solo waiter w gives up (timed out, failed, abandoned) or never got
-- its node: with a waiter queued behind it and the node still queued or
-- held, the node stays the cohort's, keeping its place for that waiter
-- (as a queued leader's does: leave); else it goes.  True when kept.
local function solo_end(c, w, att)
  if c.holder == w then
    c.holder = nil
    if att and c.att == att and head(c) and alive(att) then
      wake(head(c))
      return true
    end
    if c.att == att then c.att = nil end
    if not c.att then detach(c) end
  end
  if att then att:release() end
  return false
end

-- The first waiter of an idle cohort (no node, no holder, nobody queued)
-- pays for no queue: it takes a node as an acquire outside a cohort does,
-- standing as the cohort's holder from the start, so that a waiter who
-- comes meanwhile queues behind it (one node per client) and is passed
-- the hold at its release.  What the queue needs of a waiter (the
-- sentinel, the wait's abandon) is made for it only when a second waiter
-- comes (join): until then, a solo waiter collected unreleased lets its
-- node go as a plain attempt does (its own finalizer), and an abandoned
-- wait releases it.  info, kept by the waiting frame and then by the hold
-- record (hold.lua: `anchor`), is where join puts the sentinel.
-- (issue 34: cohorts cost nothing until a second local waiter exists)
-- (a: the acquire's table, when the stage called; M.take)
function solo(f, c, timeout, max_hold, read, a)
  local client = f.client
  -- (every field in the constructors: none added later, no table grows)
  local w = { limit = f.pass_limit, solo = true, granted = false,
    bye = false }
  -- info (the acquire's own table, a: no table more) and its s keep the
  -- cohort while the solo waiter waits or holds (the waiting frame keeps
  -- info, then the hold record: init.lua); join puts the sentinel there,
  -- which keeps the cohort too
  local info = a or { read = read }
  info.pass, info.fresh, info.s = 0, true, c
  anchors[w] = info
  c.holder = w
  local deadline = timeout and now() + timeout
  local att, msg, code = node.start(f, timeout, nil, max_hold, read)
  if not att then solo_end(c, w); return nil, msg, code end
  if c.holder ~= w then -- (not seen: nothing else lets go of a holder
    -- with no node; should it happen, queue as any waiter does)
    att:release()
    await(client, att, op.grace(client))
    return M.take(f, deadline and math.max(deadline - now(), 0), max_hold,
      read, a)
  end
  c.att, c.pass, c.counted, c.fresh, c.read = att, 0, 0, nil, nil
  local bye = function() solo_end(c, w, att) end
  w.bye = bye
  if info.s ~= c then on_abandon(att, bye) end -- (joined meanwhile)
  local st
  st, msg, code = guarded(bye, await, client, att, deadline,
    client:session_timeout(), node.first_of(a))
  w.bye = false
  if info.s ~= c then on_abandon(att, nil) end
  if st == "held" and c.holder == w and c.att == att then
    w.granted = true
    -- others came meanwhile: learn of remote contenders from now on
    if c.q.first <= c.q.last then att:watch_contenders() end
    return att, info
  end
  if not solo_end(c, w, att) then await(client, att, op.grace(client)) end
  if st == "timeout" then return nil, op.not_acquired(f.path, timeout) end
  if st == "held" or st == "done" then return nil, op.ended_at_once(f.path) end
  return nil, msg, code
end

-- A second waiter came while solo waiter w waits or holds: w gets what a
-- queued waiter has (its sentinel, in its anchor).
function join(c, w)
  local info = anchors[w]
  if not info or info.s ~= c then return end -- (joined already)
  info.s = watch_over(c, w)
  -- still waiting for its node: an abandoned wait lets the next one lead
  if w.bye and c.att then on_abandon(c.att, w.bye) end
end

--- Queue in f's cohort and wait (at most `timeout` seconds) to hold its
-- node.  Returns the held attempt and what the hold needs to know (pass:
-- the pass number; fresh: taken from ZooKeeper, its guarded read unread,
-- read its path; passed: by a local pass, known: the last write with a
-- release), or nil, msg, code.
function M.take(f, timeout, max_hold, read, a)
  local c = cohort_of(f)
  local q = c.q
  if not c.holder and not c.att and q.first > q.last then
    return solo(f, c, timeout, max_hold, read, a)
  end
  local holder = c.holder
  if holder and holder.solo then join(c, holder) end
  local w = { max_hold = max_hold, limit = f.pass_limit }
  q.last = q.last + 1
  q[q.last] = w
  if holder and holder.granted and c.att then
    -- someone holds: learn whether remote contenders queue, for the pass
    -- limit; one seen already: this waiter queues behind them
    c.att:watch_contenders()
    if c.att:contenders() then w.late = c.att end
  end
  local sentinel = watch_over(c, w)
  -- (one closure for both: the guard, and what zklock.rt.wait runs for
  -- a wait abandoned: wait_on)
  w.bye = leaver(c, w)
  local att, info, code = guard.guarded(w.bye, wait_turn,
    f, c, w, timeout, timeout and now() + timeout, read, a)
  if att then info.sentinel = sentinel end
  return att, info, code
end

-- The cohort a held attempt belongs to, if it is still its node.
local function cohort_held(f, att)
  local _, c = existing(f)
  if c and c.att == att then return c end
end

--- Would the release of att's hold pass it (nothing else changed)?
function M.would_pass(f, att, limit)
  local c = cohort_held(f, att)
  return c ~= nil and c.holder ~= nil and (may_pass(c, head(c), limit))
end

--- The hold of att ends (its holder's release).  passable: the hold may
-- go on (held, not revoked, no downgrade resting on it); known: { path,
-- data, version } written with the release, for the next hold only (a
-- hold that wrote it otherwise, or not at all, leaves nothing: the value
-- would be stale).  Returns true when passed;
-- else the cohort let go of the node (the caller gives it back or keeps
-- it lingering) and the next waiter queues anew.
function M.release(f, att, passable, limit, known)
  local c = cohort_held(f, att)
  if not c then return false end
  c.holder = nil
  if c.q.first > c.q.last then -- nobody queued: the node is let go of
    detach(c)
    return false
  end
  c.known = known
  if hand_on(c, limit, passable) then return true end
  detach(c)
  forget_if_idle(c)
  return false
end

--- A lingering node held again by its object (linger.lua's relock): the
-- cohort's node when it has none (else it stands apart).  Returns what
-- the hold needs to know: its pass number goes on from the node's last.
function M.adopt(f, att)
  local pass = (last_pass[att] or 0) + 1
  last_pass[att] = pass
  local c = cohort_of(f)
  if c.att then return { pass = pass, passed = true } end
  local w = { granted = true, gone = true, limit = f.pass_limit }
  c.att, c.holder, c.pass, c.counted = att, w, pass, 0
  return { pass = pass, passed = true, w = w, sentinel = watch_over(c, w) }
end

--- The node of att lingers (linger.lua): its passes so far, for a hold
-- that takes it again.
function M.lingers(att, pass)
  last_pass[att] = pass
end

--- The numbers of f's cohort (docs/api.md): waiters queued, passes of
-- the current node, those counted against the limit.
function M.stats(f)
  local _, c = existing(f)
  if not c then return { waiting = 0, pass = 0, counted = 0 } end
  local n = (c.holder and c.holder.solo and not c.holder.granted) and 1 or 0
  n = n + waiting_ahead(c, nil)
  return { waiting = n, pass = c.pass, counted = c.counted,
    token = c.att and select(2, c.att:info()) }
end

--- Does lock f queue in a cohort (its constructor's `cohort`, or its
-- client's)?  Its stages run only then (lock/init.lua's plans).
function M.on(f)
  return f.cohort and true or false
end

-- ---------------------------------------------------------------------------
-- the stages (lock/init.lua's lists)

--- Acquire: a mutex or write lock in a cohort queues here (not a
-- downgraded read, which waits past its own write node).
function M.take_stage(f, a)
  if not f.cohort or a.ignore then return nil end
  local t0 = now()
  local att, info, code = M.take(f, a.timeout, a.max_hold or f.max_hold,
    a.read, a)
  if not att then
    metrics.acquire_ended(f.client, f.metric, now() - t0, code)
    return false, info, code
  end
  node.hold_began(f, att, now() - t0, info.passed)
  a.att, a.info = att, info
  return true
end

--- Release: the hold goes to the next waiter of this client with no
-- request, or the cohort lets go of the node (the next stages give it
-- back or keep it).  Not passed: a hold lost, revoked, writing with its
-- release, or with a downgraded read resting on it.
function M.pass_stage(f, r)
  if not f.cohort then return nil end
  local own = r.own
  local passable = r.held and not r.write and not r.downgraded and
    r.why ~= "revoke"
  if M.release(f, own.att, passable, f.pass_limit, own.known) then
    node.hold_ended(f.client, own.att, true)
    return true, true
  end
end

plug.register("attempt_lost", M.attempt_lost)

return M
