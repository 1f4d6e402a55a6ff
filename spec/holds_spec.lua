-- One model of a hold (issue 22; docs/design.md, section 5.1): every way
-- a hold ends goes through its one record, so options meet without a
-- second holder.  Each spec here failed before its fix, against a real
-- standalone ZooKeeper; orderings inside one process are driven with
-- coroutines under H.run, waiting for the event (bounded), never a sleep.

local H = require "spec.helpers"
local zklock = H.zklock
local op = require "zklock.rt.op"
local events = require "zklock.rt.events"

local it_yields = H.it_yields(it) -- (not under PUC Lua 5.1)

local dispatch_until = H.dispatch_until

-- A waiter that yields inside coroutines (H.run's), and raises "abandon"
-- in the coroutine named by `abandon.co` once it is set.
local abandon = {}
local function yielding_waiter(c, gen, t)
  local co, ismain = coroutine.running()
  if co and not ismain then
    if abandon.co == co then error("abandon", 0) end
    coroutine.yield()
  else
    c:_wait(gen, t)
  end
end

-- Resume `co` (its waits yield) until cond() holds; bounded.
local function step_until(zk, co, cond, what)
  zklock.set_waiter(yielding_waiter)
  local ok, err = pcall(H.wait_until, function()
    if coroutine.status(co) == "suspended" then
      local fine, e = coroutine.resume(co)
      if not fine and e ~= "abandon" then error(e, 0) end
    end
    local _, gen = zk:_poll()
    if not cond() then zk:_wait(gen, 0.05); return false end
    return true
  end, 10, what)
  zklock.set_waiter(nil)
  if not ok then error(err, 0) end
end

describe("one model of a hold (issue 22)", function()
  local srv, zk, zk2
  local setup, teardown = H.fixture(function(s, a, b)
    srv, zk, zk2 = s, a, b
  end)
  lazy_setup(setup)
  lazy_teardown(teardown)
  after_each(function() abandon.co = nil end)

  -- item 1 ------------------------------------------------------------------
  it_yields("a downgraded read ends with a write hold that ends by " ..
     "max_hold: never a reader and a writer at once", function()
    local path = H.path("dg")
    local rw, other = zk:rwlock(path), zk2:rwlock(path)
    assert(rw.write:acquire(5, { max_hold = 1 }))
    local w2_in, read_then
    local downgraded = false
    H.run(zk2, {
      function()
        assert(other.write:acquire(20))
        w2_in = true
        while read_then == nil do coroutine.yield() end
        other.write:release()
      end,
    }, 30, function()
      if w2_in and read_then == nil then -- (as the reader: main)
        read_then = rw.read:is_held()
      end
      if downgraded or #rw.write:participants() ~= 2 then return end
      -- W2 queued behind our write node: the read lock is ours at once
      assert.equal(rw.read, rw.read:acquire(2))
      downgraded = true
    end)
    assert.is_true(w2_in)
    assert.is_false(read_then) -- W2 held: the downgraded read had ended
    assert.is_false(rw.read:is_held())
    assert.is_nil(rw.read:token())
    local ok, _, code = rw.read:release()
    assert.is_nil(ok)
    assert.equal("lock_lost", code)
    local wok, _, wcode = rw.write:release()
    assert.is_nil(wok)
    assert.equal("lock_lost", wcode)
    assert.same({}, H.lock_nodes(zk, path))
  end)

  it("a downgraded read ends when someone deletes the write node " ..
     "while a writer is queued", function()
    local path = H.path("dg-del")
    local rw, other = zk:rwlock(path), zk2:rwlock(path)
    assert(rw.write:acquire(5))
    local wnode = rw.write:node()
    local w2_in = false
    local co = coroutine.create(function()
      assert(other.write:acquire(20))
      w2_in = true
    end)
    step_until(zk2, co, function() return #rw.write:participants() == 2 end,
      "the second writer to queue")
    assert.equal(rw.read, rw.read:acquire(2))
    assert(op.call_op(zk2, 5, "_delete", wnode))
    step_until(zk2, co, function() return w2_in end,
      "the second writer to hold")
    dispatch_until(zk, function() return not rw.read:is_held() end,
      "the downgraded read to end")
    assert.equal("lock_lost", select(3, rw.read:release()))
    assert.equal("lock_lost", select(3, rw.write:release()))
    H.run(zk2, { function()
      -- (co's hold, released on co's behalf as zklock.ngx would)
      assert(events.release_owner(other.write, co))
    end })
    assert.same({}, H.lock_nodes(zk, path))
  end)

  it_yields("a downgraded read that ended with its write hold lets go of " ..
     "its node and tells on_lost; the writers behind it get in", function()
    local path = H.path("dg-lost")
    local rw, other = zk:rwlock(path), zk2:rwlock(path)
    local read_lost = false
    rw.read:on_lost(function() read_lost = true end)
    assert(rw.write:acquire(5, { max_hold = 1 }))
    local w2_in = false
    local co = coroutine.create(function()
      assert(other.write:acquire(20))
      w2_in = true
    end)
    step_until(zk2, co, function() return #rw.write:participants() == 2 end,
      "the second writer to queue")
    assert.equal(rw.read, rw.read:acquire(2))
    step_until(zk2, co, function() return w2_in end,
      "the second writer to hold")
    -- our read node goes without our release, and on_lost says so
    dispatch_until(zk, function()
      return read_lost and #H.lock_nodes(zk, path) == 1
    end, "the read node to go, and on_lost")
    assert.equal("lock_lost", select(3, rw.read:release()))
    assert.equal("lock_lost", select(3, rw.write:release()))
    H.run(zk2, { function()
      assert(events.release_owner(other.write, co))
    end })
    assert.same({}, H.lock_nodes(zk, path))
  end)

  it_yields("a downgraded read released in its own on_lost: the write " ..
     "lock's release keeps no node for it", function()
    local path = H.path("dg-cb")
    local rw, other = zk:rwlock(path), zk2:rwlock(path)
    rw.read:on_lost(function(l) l:release() end)
    assert(rw.write:acquire(5))
    local w2_in = false
    local co = coroutine.create(function()
      assert(other.write:acquire(20))
      w2_in = true
    end)
    step_until(zk2, co, function() return #rw.write:participants() == 2 end,
      "the second writer to queue")
    assert.equal(rw.read, rw.read:acquire(2))
    assert(op.call_op(zk2, 5, "_delete", rw.read:node()))
    dispatch_until(zk, function() return not rw.read:is_held() end,
      "the read hold to end")
    assert.is_true(rw.write:release()) -- (no reader left to keep it for)
    step_until(zk2, co, function() return w2_in end,
      "the second writer to hold")
    assert.equal("lock_lost", select(3, rw.read:release()))
    H.run(zk2, { function()
      assert(events.release_owner(other.write, co))
    end })
    assert.same({}, H.lock_nodes(zk, path))
  end)

  -- item 2 ------------------------------------------------------------------
  it("a semaphore mutex shared by coroutines: a late release of a hold " ..
     "past max_hold ends nobody else's", function()
    local path = H.path("sm-shared")
    local sm = zk:semaphore_mutex(path)
    local A = coroutine.create(function() -- (waits block: no yield)
      assert(sm:acquire(5, { max_hold = 0.3 }))
      coroutine.yield("held")
      return sm:release() -- late: past its max_hold
    end)
    assert.same({ true, "held" }, { coroutine.resume(A) })
    H.wait_until(function() return #H.lock_nodes(zk, path) == 0 end, 10,
      "A's hold to end by max_hold")
    assert.equal(sm, sm:acquire(5)) -- B, the main coroutine
    local _, ok, msg, code = coroutine.resume(A)
    assert.is_nil(ok)
    assert.equal("lock_lost", code)
    assert.is_string(msg)
    assert.is_true(sm:is_held()) -- B's hold goes on
    assert.is_nil(zk2:semaphore_mutex(path):acquire(0))
    assert.is_true(sm:release())
    assert.same({}, H.lock_nodes(zk, path))
  end)

  it("a semaphore mutex released by another coroutine: its owner's " ..
     "release answers lock_lost", function()
    local path = H.path("sm-other")
    local sm = zk:semaphore_mutex(path)
    assert(sm:acquire(5))
    local co = coroutine.create(function() return sm:release() end)
    local _, ok = coroutine.resume(co)
    assert.is_true(ok) -- any coroutine may release it (Curator)
    assert.is_false(sm:is_held())
    local ok2, msg, code = sm:release()
    assert.is_nil(ok2)
    assert.equal("lock_lost", code)
    assert.matches("another coroutine", msg)
    assert.has_error(function() sm:release() end) -- then: never held
  end)

  it("a semaphore mutex: is_held, token and fenced_set are the calling " ..
     "coroutine's own", function()
    local path = H.path("sm-own")
    local sm = zk:semaphore_mutex(path)
    assert(sm:acquire(5))
    local other = coroutine.create(function()
      return sm:is_held(), sm:token(), pcall(sm.fenced_set, sm,
        H.path("sm-own-n"), "x")
    end)
    local _, held, token, fine = coroutine.resume(other)
    assert.is_false(held)
    assert.is_nil(token)
    assert.is_false(fine) -- not held by that coroutine: an argument error
    assert.is_true(sm:is_held())
    assert(sm:release())
  end)

  -- item 3 ------------------------------------------------------------------
  local function abandoned(what, make, hold_other, check)
    it_yields(what .. ": an abandoned wait leaves nothing behind, and the " ..
       "next acquirer gets in", function()
      local obj, path = make(zk)
      local release_other = hold_other(zk2, path)
      collectgarbage("stop") -- (no collection may do the work)
      finally(function() collectgarbage("restart") end)
      local co = coroutine.create(function() obj:acquire(30) end)
      -- (3 nodes: the other's, and our two: gate and lease, or the first
      -- member and our place in the second's queue)
      step_until(zk, co, function()
        return #H.lock_nodes(zk, path) >= 3
      end, "the wait to queue")
      if H.is54 and coroutine.close then
        assert(coroutine.close(co))
      else
        abandon.co = co
        zklock.set_waiter(yielding_waiter)
        local _, err = coroutine.resume(co) -- the waiter raises
        zklock.set_waiter(nil)
        assert.equal("abandon", err)
        assert.equal("dead", coroutine.status(co))
      end
      release_other()
      -- co stays referenced: no garbage collection helps
      H.wait_until(function() return #H.lock_nodes(zk, path) == 0 end, 10,
        "the abandoned wait's nodes to go")
      check(zk2, path)
      assert.equal("dead", coroutine.status(co))
    end)
  end

  abandoned("a semaphore", function(c)
    local path = H.path("ab-sem")
    return c:semaphore(path, 1), path
  end, function(c, path)
    local l = assert(c:semaphore(path, 1):acquire(5))
    return function() assert(l:release()) end
  end, function(c, path)
    local l = assert(c:semaphore(path, 1):acquire(3))
    assert(l:release())
  end)

  abandoned("a semaphore mutex", function(c)
    local path = H.path("ab-sm")
    return c:semaphore_mutex(path), path
  end, function(c, path)
    local o = c:semaphore_mutex(path)
    assert(o:acquire(5))
    return function() assert(o:release()) end
  end, function(c, path)
    local o = c:semaphore_mutex(path)
    assert(o:acquire(3))
    assert(o:release())
  end)

  abandoned("a multilock", function(c)
    local path = H.path("ab-ml")
    return c:multilock({ c:mutex(path .. "/a"), c:mutex(path .. "/b") }), path
  end, function(c, path)
    local o = c:mutex(path .. "/b")
    assert(o:acquire(5))
    return function() assert(o:release()) end
  end, function(c, path)
    local o = c:mutex(path .. "/a") -- the member taken before the wait
    assert(o:acquire(0))
    assert(o:release())
  end)

  -- item 4 ------------------------------------------------------------------
  it_yields("linger: a contender queued during the first hold goes first",
      function()
    local path = H.path("lg-first")
    local own = H.connect(srv) -- (closed at the end: its lingering node
    finally(function() own:close() end) -- goes with its session)
    local m = own:mutex(path, { linger = 30 })
    assert(m:acquire(5))
    local order = {}
    local other = zk2:mutex(path)
    local co = coroutine.create(function()
      assert(other:acquire(20))
      order[#order + 1] = "contender"
      other:release()
    end)
    step_until(zk2, co, function() return #H.lock_nodes(own, path) == 2 end,
      "the contender to queue")
    -- own's listing saw it, so the watch it set with the hold has fired
    -- before (or the hold's listing saw it); one round trip more and the
    -- listing that watch sent has been answered too
    own:get(path)
    assert(m:release())
    local mine = coroutine.create(function()
      assert(m:acquire(20))
      order[#order + 1] = "again"
      m:release()
    end)
    H.run(own, {
      function() while coroutine.status(co) ~= "dead" do
        assert(coroutine.resume(co)); coroutine.yield() end end,
      function() while coroutine.status(mine) ~= "dead" do
        assert(coroutine.resume(mine)); coroutine.yield() end end,
    }, 30)
    assert.same({ "contender", "again" }, order)
    own:close()
    H.wait_until(function() return #H.lock_nodes(zk, path) == 0 end, 10,
      "nodes to go")
  end)

  it("linger: a hold released in its on_revoke does not linger", function()
    local path = H.path("lg-revoke")
    local own = H.connect(srv)
    finally(function() own:close() end)
    local m = own:mutex(path, { linger = 30 })
    m:on_revoke(function(l) l:release() end)
    assert(m:acquire(5))
    assert.equal(1, zklock.revoke(zk2, path))
    dispatch_until(own, function() return not m:is_held() end, "revoke")
    H.wait_until(function() return #H.lock_nodes(zk, path) == 0 end, 10,
      "the revoked node to go")
  end)

  it("linger: a release right after the hold began is reused once the " ..
     "first listing answers (no new node)", function()
    local path = H.path("lg-quick")
    local own = H.connect(srv)
    finally(function() own:close() end)
    local m = own:mutex(path, { linger = 30 })
    assert(m:acquire(5))
    local node = m:node()
    assert(m:release())
    assert(m:acquire(5))
    assert.equal(node, m:node())
    assert(m:release())
    own:close()
    H.wait_until(function() return #H.lock_nodes(zk, path) == 0 end, 10,
      "the lingering node to go with its session")
  end)

  -- item 5 ------------------------------------------------------------------
  it("a guarded release or fenced_set too big for the server is refused " ..
     "before it is sent; the hold goes on", function()
    local long = H.path("big") .. "/" .. string.rep("d", 4032 -
      #H.path("big") - 1)
    assert.equal(4032, #long)
    local target = H.path("big-t") .. "/" .. string.rep("t", 4096 -
      #H.path("big-t") - 1)
    local data = string.rep("x", 1024 * 1024 - 8192) -- the default max_data
    local m = zk:mutex(long)
    assert(m:acquire(5))
    local ok, err = pcall(m.release, m, { write = target, data = data })
    assert.is_false(ok)
    assert.matches("jute.maxbuffer", err, 1, true)
    ok, err = pcall(m.fenced_set, m, target, data)
    assert.is_false(ok)
    assert.matches("jute.maxbuffer", err, 1, true)
    assert.is_true(m:is_held())
    assert.equal("connected", zk:state())
    -- what fits still goes in one request
    local v = select(2, m:release({ write = target,
      data = data:sub(1, #data - 2048) }))
    assert.is_number(v)
    assert.same({}, H.lock_nodes(zk, long))
    assert.equal(#data - 2048, #assert(zk:get(target)))
  end)

  -- items 7, 16 -------------------------------------------------------------
  it("refuses, up front, a write with a release that cannot make it",
      function()
    local p = H.path("refuse")
    -- (a semaphore updates, since issue 33: its leases are holds)
    local sem = zk:semaphore(p .. "/s", 2)
    assert.has_error(function()
      zklock.with_lock(sem, { update = "relative" }, function() end)
    end, nil)
    assert.has_error(function() sem:acquire(1, { read = "relative" }) end)
    local rw = zk:rwlock(p .. "/rw")
    assert.has_error(function()
      zklock.with_lock(rw.read, { update = p .. "/n" }, function() end)
    end)
    assert(rw.read:acquire(5))
    local ok, err = pcall(rw.read.release, rw.read,
      { write = p .. "/n", data = "1" })
    assert.is_false(ok)
    assert.matches("read lock writes nothing", err)
    assert.is_true(rw.read:is_held()) -- nothing lost
    assert(rw.read:release())
    local ml = zk:multilock({ zk:mutex(p .. "/a"), zk:mutex(p .. "/b") })
    ok, err = pcall(zklock.with_lock, ml, { update = p .. "/n" },
      function() return "x" end)
    assert.is_false(ok)
    assert.matches("writes nothing with its release", err)
    -- a lease is refused before anything is taken
    assert.equal(2, sem:available())
    assert.same({}, H.lock_nodes(zk, p))
  end)

  -- item 8 ------------------------------------------------------------------
  it("with_lock under revocation: lock_lost after fn, and fn's own error",
      function()
    local path = H.path("wl-rev")
    local m = zk:mutex(path)
    m:on_revoke(function(l) l:release() end)
    local r1, msg, code = zklock.with_lock(m, 5, function()
      assert.equal(1, zklock.revoke(zk2, path))
      dispatch_until(zk, function() return not m:is_held() end, "revoke")
      return "done"
    end)
    assert.is_nil(r1)
    assert.equal("lock_lost", code)
    assert.matches("revoked", msg)
    local ok, err = pcall(zklock.with_lock, m, 5, function()
      assert.equal(1, zklock.revoke(zk2, path))
      dispatch_until(zk, function() return not m:is_held() end, "revoke")
      error("fn's own", 0)
    end)
    assert.is_false(ok)
    assert.matches("^fn's own\nstack traceback", err)
    -- and the lock works again
    assert.equal("x", zklock.with_lock(m, 5, function() return "x" end))
    assert.same({}, H.lock_nodes(zk, path))
  end)

  it("with_lock over a multilock released in a member's on_revoke: " ..
     "lock_lost after fn", function()
    local path = H.path("wl-ml")
    local a, b = zk:mutex(path .. "/a"), zk:mutex(path .. "/b")
    local ml = zk:multilock({ a, b })
    b:on_revoke(function() ml:release() end)
    local r1, msg, code = zklock.with_lock(ml, 5, function()
      assert.equal(1, zklock.revoke(zk2, path .. "/b"))
      dispatch_until(zk, function() return not b:is_held() end, "revoke")
      return "done"
    end)
    assert.is_nil(r1)
    assert.equal("lock_lost", code)
    assert.matches("revoked", msg)
    assert.has_error(function() ml:release() end) -- then: not held
    assert.same({}, H.lock_nodes(zk, path))
  end)

  -- item 17 -----------------------------------------------------------------
  it("dispatch re-entered by a callback that waits keeps the order of " ..
     "events", function()
    local path = H.path("order")
    local order = {}
    local locks = {}
    for i = 1, 3 do
      locks[i] = zk:mutex(path .. "/" .. i)
      assert(locks[i]:acquire(5))
    end
    -- three revocations, queued in order; the first callback waits, and
    -- that wait dispatches the third, newer, one
    local evs = {}
    for i = 1, 3 do
      locks[i]:on_revoke(function(l)
        order[#order + 1] = i
        if i == 1 then events.dispatch(zk, { evs[3] }) end -- (a wait's)
        l:release()
      end)
    end
    for i = 1, 3 do
      assert.equal(1, zklock.revoke(zk2, path .. "/" .. i))
      H.wait_until(function()
        for _, e in ipairs(zk:_events() or {}) do evs[#evs + 1] = e end
        return #evs == i
      end, 10, "revocation " .. i)
    end
    events.dispatch(zk, { evs[1], evs[2] })
    assert.same({ 1, 2, 3 }, order)
    assert.same({}, H.lock_nodes(zk, path))
  end)

  it("a hold that ends before its acquire returns (past max_hold, or " ..
     "not heard from) is reported lock_lost, with a message", function()
    -- (make bench's w4.queue: one request in 10,000 got nil, nil, nil)
    local path = H.path("lost-at-once")
    -- (in a cohort, max_hold counts from the hold's grant: no cohort)
    local m = zk:mutex(path, { cohort = false })
    -- a waiter that does not look again until the attempt has ended: its
    -- hold comes and goes in C meanwhile (max_hold runs out)
    local seen
    zklock.set_waiter(function(client, gen, timeout, obj)
      if type(obj) ~= "userdata" then return client:_wait(gen, timeout) end
      local deadline = H.now() + 10
      repeat
        seen = obj:poll()
        if seen == "done" then return end
        H.tcore.sleep(0.01)
      until H.now() > deadline
    end)
    local ok, held, msg, code = pcall(m.acquire, m, 5, { max_hold = 0.05 })
    zklock.set_waiter(nil)
    assert(ok, held)
    assert.equal("done", seen)
    assert.is_nil(held)
    assert.equal("lock_lost", code)
    assert.matches("lost", msg)
    assert.is_false(m:is_held())
    assert.same({}, H.lock_nodes(zk, path))
  end)
end)
