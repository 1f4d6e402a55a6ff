-- Revocation (Curator's Revoker and makeRevocable: docs/design.md,
-- section 8) of mutex, read/write and semaphore holders, against a real
-- standalone ZooKeeper.

local H = require "spec.helpers"
local zklock = H.zklock

local it_yields = H.it_yields(it) -- (not under PUC Lua 5.1)

describe("zklock recipes", function()
  local zk, zk2
  local setup, teardown = H.fixture(function(_, a, b) zk, zk2 = a, b end)
  lazy_setup(setup)
  lazy_teardown(teardown)

  describe("revocation", function()
    it("runs the callback once per request, in Lua, inside " ..
        "dispatch",
        function()
      local path = H.path("revoke")
      local m = zk:mutex(path)
      local calls, in_dispatch, got_lock = 0, {}, {}
      local release_next = false
      m:on_revoke(function(l)
        calls = calls + 1
        got_lock[calls] = l
        in_dispatch[calls] = debug.traceback():find("dispatch") ~= nil
        if release_next then assert.is_true(l:release()) end
      end)
      assert(m:acquire(5))
      assert.equal(1, zklock.revoke(zk2, path))
      assert.equal(0, calls) -- queued, not run on a ZooKeeper thread
      assert.equal(1, zk:dispatch(5))
      assert.equal(1, calls)
      assert.equal(m, got_lock[1])
      assert.is_true(in_dispatch[1])
      assert.equal(0, zk:dispatch(0.3)) -- once per request
      assert.is_true(m:is_held()) -- the callback did not release
      -- a second request: a second call
      assert.equal(1, zklock.revoke(zk2, path))
      assert.equal(1, zk:dispatch(5))
      assert.equal(2, calls)
      assert.equal(0, zk:dispatch(0.3))
      -- a third, whose callback releases the lock for the holder
      release_next = true
      assert.equal(1, zklock.revoke(zk2, path))
      assert.equal(1, zk:dispatch(5))
      assert.equal(3, calls)
      assert.is_false(m:is_held())
      assert.same({}, m:participants())
      local other = zk2:mutex(path)
      assert.equal(other, other:acquire(1))
      other:release()
    end)

    it_yields("release inside the callback acts for the holding coroutine",
        function()
      local path = H.path("revoke")
      local m = zk:mutex(path):on_revoke(function(l)
        assert.is_true(l:release())
      end)
      local phase, ran = "start", 0
      H.run(zk, {
        function()
          assert(m:acquire(5))
          phase = "holding"
          while m:is_held() do coroutine.yield() end -- until revoked
        end,
      }, 20, function()
        if phase == "holding" then
          -- the main coroutine does not hold it; the callback still may
          assert.is_false(m:is_held())
          assert.equal(1, zklock.revoke(zk2, path))
          phase = "asked"
        elseif phase == "asked" then
          ran = ran + zk:dispatch(0.05)
        end
      end)
      assert.equal(1, ran)
      assert.same({}, m:participants())
    end)

    it("reaches semaphore holders on Curator's leases", function()
      local path = H.path("revoke")
      -- a semaphore mutex's holder hears it, like a mutex's
      local sm = zk:semaphore_mutex(path):on_revoke(function(l)
        assert.is_true(l:release())
      end)
      assert(sm:acquire(5))
      assert.equal(1, zklock.revoke(zk2, path))
      assert.equal(1, zk:dispatch(5))
      assert.is_false(sm:is_held())
      assert.same({}, sm:participants())
      -- the holders of a semaphore of 2: both leases are asked
      local spath = H.path("revoke")
      local sem = zk:semaphore(spath, 2)
      local a, b = assert(sem:acquire(5)), assert(sem:acquire(5))
      assert.equal(2, zklock.revoke(zk2, spath, 2))
      for _, l in ipairs { a, b } do
        assert.equal("__REVOKE__", (zk2:get(l:node())))
      end
      assert.is_true(a:release())
      assert.is_true(b:release())
      assert.equal(0, zklock.revoke(zk2, spath, 2))
    end)

    it("revoke returns 0 for a free lock", function()
      local path = H.path("revoke")
      assert.equal(0, zklock.revoke(zk2, path)) -- never used
      local m = zk:mutex(path)
      assert(m:acquire(5)); m:release()
      assert.equal(0, zklock.revoke(zk2, path)) -- used, free again
    end)
  end)
end)
