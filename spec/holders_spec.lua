-- Who holds a lock, and how long a hold may last (issue "semaphores, lock
-- holders you can name, a maximum hold time"): connect's `id`,
-- `lock:holders()`, `participants(timeout, true)`, `sem:available()`, and
-- `max_hold` ending a hold whose holder hangs with its session alive.
local H = require "spec.helpers"
local zklock = H.zklock
local core = H.core

local function spin(s)
  local t = core.now() + s
  while core.now() < t do end
end

describe("holders", function()
  local srv, zk, zk2

  lazy_setup(function()
    srv = H.testing.server()
    zk = H.connect(srv)
    zk2 = H.connect(srv)
  end)
  lazy_teardown(function()
    if zk then zk:close() end
    if zk2 then zk2:close() end
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  -- -------------------------------------------------------------------------
  describe("who holds it", function()
    it("names the holder: node, connect's id, token, session", function()
      local named = H.connect(srv, { id = "billing-7" })
      local path = H.path("holders")
      local m = named:mutex(path)
      assert.same({}, m:holders()) -- free
      assert(m:acquire(5))
      local h = assert(zk2:mutex(path):holders())
      assert.equal(1, #h)
      assert.equal(m:node(), h[1].node)
      assert.equal("billing-7", h[1].id)
      assert.equal(m:token(), h[1].token)
      assert.equal(named:session_id(), h[1].session)
      m:release()
      named:close()
    end)

    it("writes 'zklock HOST pid N' without an id", function()
      local path = H.path("holders")
      local m = zk:mutex(path)
      assert(m:acquire(5))
      local h = assert(m:holders())
      assert.matches("^zklock %S+ pid " .. core.pid() .. "$", h[1].id)
      m:release()
    end)

    it("lists holders only; participants(t, true) lists everyone, " ..
        "in queue order", function()
      local path = H.path("holders")
      local m, w = zk:mutex(path), zk2:mutex(path)
      assert(m:acquire(5))
      local waited
      H.run(zk2, {
        function() waited = assert(w:acquire(10)); w:release() end,
      }, 20, function()
        if waited ~= nil or #m:participants() < 2 then return end
        local h = assert(m:holders())
        assert.equal(1, #h)
        assert.equal(m:node(), h[1].node)
        local all = assert(m:participants(nil, true))
        assert.equal(2, #all)
        assert.equal(m:node(), all[1].node)
        assert.equal(zk2:session_id(), all[2].session)
        assert.same(m:participants(), { all[1].node, all[2].node })
        m:release()
        waited = false
      end)
      assert.is_truthy(waited)
    end)

    it("read/write: the readers, or the writer, each list their own kind",
        function()
      local path = H.path("holders")
      local rw, rw2 = zk:rwlock(path), zk2:rwlock(path)
      assert(rw.read:acquire(5))
      assert(rw2.read:acquire(5))
      assert.equal(2, #rw.read:holders())
      assert.same({}, rw.write:holders())
      rw.read:release()
      rw2.read:release()
      assert(rw.write:acquire(5))
      local h = rw2.write:holders()
      assert.equal(1, #h)
      assert.equal(rw.write:node(), h[1].node)
      assert.same({}, rw2.read:holders())
      rw.write:release()
    end)

    it("a semaphore: its lease holders, and the leases free", function()
      local path = H.path("holders")
      local sem = zk:semaphore(path, 3)
      assert.equal(3, sem:available())
      local a, b = assert(sem:acquire(5)), assert(sem:acquire(5))
      assert.equal(1, sem:available())
      local h = assert(zk2:semaphore(path, 3):holders())
      assert.same({ a:node(), b:node() }, { h[1].node, h[2].node })
      assert.equal(a:token(), h[1].token)
      local all = assert(sem:participants(nil, true))
      assert.same(h, all) -- (nobody waits for a lease)
      a:release()
      assert.equal(2, sem:available())
      b:release()
      assert.equal(3, sem:available())
      assert.same({}, sem:holders())
    end)

    it("refuses a bad id", function()
      for _, bad in ipairs { 1, {}, ("x"):rep(2 ^ 20) } do
        assert.has_error(function()
          zklock.connect(srv.connect_string, { id = bad })
        end)
      end
    end)
  end)

  -- -------------------------------------------------------------------------
  describe("max_hold", function()
    it("a holder busy past max_hold loses the lock to a waiter on time",
        function()
      local path = H.path("maxhold")
      local ready, result = H.tmpname("ready"), H.tmpname("result")
      local MAX, SPIN = 1, 8
      local p = H.spawn("spec/workers/busy.lua", srv.connect_string, path,
        MAX, SPIN, ready, result)
      H.wait_until(function() return H.read(ready) ~= nil end, 30,
        "the holder to acquire")
      local token, held_at = H.read(ready):match("^(%d+) (%S+)")
      held_at = tonumber(held_at)
      local m = zk:mutex(path)
      assert(m:acquire(30))
      local got_at = core.now()
      assert.is_true(tonumber(token) < m:token())
      m:release()
      H.wait_until(function() return H.read(result) ~= nil end, 30,
        "the holder to finish")
      local spun_until, was_held, code = H.read(result):match(
        "^(%S+) (%S+) (%S+)")
      assert.equal(0, p:wait(10))
      p:cleanup()
      os.remove(ready); os.remove(result)
      -- not before max_hold; long before the holder stopped spinning
      assert.is_true(got_at >= held_at + MAX - 0.05,
        ("acquired %.3f s after the hold began"):format(got_at - held_at))
      assert.is_true(got_at < tonumber(spun_until),
        "the waiter got it only when the holder stopped")
      assert.equal("false", was_held)
      assert.equal("lock_lost", code)
    end)

    it("ends the hold at once: is_held false, on_lost, release lock_lost",
        function()
      local path = H.path("maxhold")
      local lost = 0
      local m = zk:mutex(path, { max_hold = 0.3 }):on_lost(function()
        lost = lost + 1
      end)
      assert(m:acquire(5))
      local t0 = core.now()
      spin(0.2)
      assert(m:acquire(5)) -- reentrant: counted from the first acquire
      -- (counted from the second, it would last past t0 + 0.5)
      spin(t0 + 0.35 - core.now())
      assert.is_false(m:is_held())
      -- nothing is written under it any more
      assert.equal("lock_lost", select(3, m:fenced_set(H.path("fx"), "x")))
      H.wait_until(function() zk:dispatch(); return lost == 1 end, 10,
        "on_lost")
      assert.same({}, m:participants()) -- our node went
      m:release() -- (the inner level)
      assert.equal("lock_lost", select(3, m:release()))
      -- an acquire's own option wins over the constructor's
      assert(m:acquire(5, { max_hold = 60 }))
      spin(0.5)
      assert.is_true(m:is_held())
      assert.is_true(m:release())
    end)

    it("with_lock reports a hold lost to max_hold", function()
      local path = H.path("maxhold")
      local m = zk:mutex(path)
      local ran = false
      local ok, msg, code = zklock.with_lock(m, { timeout = 5, max_hold = 0.3 },
        function()
          ran = true
          spin(1) -- busy: no Lua runs meanwhile, the C timer ends the hold
        end)
      assert.is_true(ran)
      assert.is_nil(ok)
      assert.equal("lock_lost", code, msg)
      -- a semaphore lease, too
      local sem = zk:semaphore(H.path("maxhold"), 1)
      local l = assert(sem:acquire(5, { max_hold = 0.2 }))
      H.wait_until(function() return not l:is_held() end, 10, "the lease")
      assert.equal("lock_lost", select(3, l:release()))
    end)

    it("refuses a bad max_hold", function()
      local m = zk:mutex(H.path("maxhold"))
      for _, bad in ipairs { 0, -1, "1", 0 / 0, 1e300 } do
        assert.has_error(function() m:acquire(1, { max_hold = bad }) end)
        assert.has_error(function() zk:mutex("/x", { max_hold = bad }) end)
      end
      assert.has_error(function() m:acquire(1, 5) end)
      assert.has_error(function()
        zklock.with_lock(m, { max_hold = -1 }, function() end)
      end)
    end)
  end)
end)
