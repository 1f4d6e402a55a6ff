-- Leases and multilock members are holds (issue 33; docs/api.md,
-- "Holds"): a semaphore's lease has what a lock's hold has (on_revoke,
-- on_lost, fenced_set, a guarded read and write, max_hold, a fencing
-- token), through the lock layer's stages; a multilock tells its own
-- callbacks of a member's revocation or loss.  Against a real standalone
-- ZooKeeper; the CLI as a process.

local H = require "spec.helpers"
local zklock = H.zklock

-- Run a C op of zk to its end: its results (as op:result()).
local function op(zk, method, ...)
  local o, msg, code = zk[method](zk, ...)
  if not o then return nil, msg, code end
  assert(H.await(zk, o, H.now() + 10) == "done", method .. " hung")
  return o:result()
end

describe("leases are holds", function()
  local srv, zk, zk2
  local setup, teardown = H.fixture(function(s, a, b)
    srv, zk, zk2 = s, a, b
  end)
  lazy_setup(setup)
  lazy_teardown(teardown)

  -- dispatch zk's callbacks until cond(), bounded
  local function dispatch_until(cond, what)
    H.wait_until(function()
      zk:dispatch(0.05)
      return cond()
    end, 20, what)
  end

  it("a lease revoked by `zklock revoke HOSTS PATH --leases N` runs its " ..
     "on_revoke, and the tool's count is true", function()
    local path = H.path("lease-revoke")
    local sem = zk:semaphore(path, 3)
    local told = {}
    sem:on_revoke(function(lease)
      told[#told + 1] = lease
      assert.is_true(lease:release())
    end)
    local leases = {}
    for i = 1, 3 do leases[i] = assert(sem:acquire(5)) end
    local p = H.spawn("bin/zklock", "revoke", srv.connect_string, path,
      "--leases", "2")
    local rc = p:wait(60)
    local out = p:output()
    p:cleanup()
    assert.equal(0, rc, out)
    assert.equal("asked 2 holders of " .. path .. " to release\n", out)
    dispatch_until(function() return #told == 2 end, "two revocations")
    -- the first two leases (sequence order) were asked, and let go
    assert.equal(leases[1], told[1])
    assert.equal(leases[2], told[2])
    assert.is_false(leases[1]:is_held())
    assert.is_true(leases[3]:is_held())
    assert.equal(1, #sem:participants())
    -- their owner hears it once, at its own release
    local ok, msg, code = leases[1]:release()
    assert.is_nil(ok)
    assert.equal("lock_lost", code)
    assert.matches("revoked", msg)
    assert.has_error(function() leases[1]:release() end)
    assert.is_true(leases[3]:release())
    assert.equal(0, zk:dispatch(0.1)) -- nothing more to tell
  end)

  it("zklock.revoke reaches a lease; sem:release() in on_revoke releases " ..
     "that lease", function()
    local path = H.path("lease-revoke")
    local sem = zk:semaphore(path, 2)
    local a = assert(sem:acquire(5))
    local b = assert(sem:acquire(5)) -- the newest of this coroutine
    -- set after the acquires: the leases held hear it too
    sem:on_revoke(function() assert.is_true(sem:release()) end)
    assert.equal(1, zklock.revoke(zk2, path, 1)) -- the first lease: a
    dispatch_until(function() return not a:is_held() end, "the revocation")
    assert.is_true(b:is_held())
    assert.same({ nil, "lock lost: revoked", "lock_lost" }, { a:release() })
    assert.is_true(b:release())
  end)

  it("a lease whose node someone else deletes gets on_lost; its " ..
     "fenced_set and its write with the release are refused", function()
    local path, target = H.path("lease-lost"), H.path("lease-target")
    local sem = zk:semaphore(path, 2)
    local lost = {}
    sem:on_lost(function(lease) lost[#lost + 1] = lease end)
    local a = assert(sem:acquire(5))
    local b = assert(sem:acquire(5))
    -- a live lease fences: its write lands, with its node's token
    local v, zxid = a:fenced_set(target, "a")
    assert.equal(0, v)
    assert.is_true(zxid > a:token())
    assert.equal("a", (zk2:get(target)))
    assert(op(zk2, "_delete", a:node()))
    dispatch_until(function() return #lost == 1 end, "on_lost")
    assert.equal(a, lost[1])
    assert.is_false(a:is_held())
    assert.is_nil(a:token())
    assert.same({ nil, "lock lost", "lock_lost" },
      { a:fenced_set(target, "late") })
    local ok, _, code = a:release{ write = target, data = "late" }
    assert.is_nil(ok)
    assert.equal("lock_lost", code)
    assert.equal("a", (zk2:get(target))) -- nothing written
    -- the other lease is untouched, and writes with its release
    assert.is_true(b:is_held())
    local r, version = b:release{ write = target, data = "b" }
    assert.is_true(r)
    assert.equal(1, version)
    assert.equal("b", (zk2:get(target)))
    assert.same({}, sem:participants())
  end)

  it("a lease past its max_hold is lost, told, and writes nothing",
      function()
    local path, target = H.path("lease-mh"), H.path("lease-mh-target")
    local sem = zk:semaphore(path, 1)
    local lost = 0
    sem:on_lost(function() lost = lost + 1 end)
    local a = assert(sem:acquire(5, { max_hold = 0.3 }))
    dispatch_until(function() return lost == 1 end, "on_lost at max_hold")
    assert.is_false(a:is_held())
    assert.same({ nil, "lock lost", "lock_lost" }, { sem:fenced_set(target,
      "x") })
    assert.equal("lock_lost", select(3, a:release()))
    assert.equal("no_node", select(3, zk2:get(target)))
  end)

  it("with_lock updates under a semaphore mutex and a semaphore",
      function()
    local node = H.path("lease-counter")
    for _, lock in ipairs { zk:semaphore_mutex(H.path("lease-sm")),
                            zk:semaphore(H.path("lease-sem"), 3) } do
      for _ = 1, 3 do
        local got = assert(zklock.with_lock(lock, { update = node },
          function(d) return tostring((tonumber(d) or 0) + 1), "done" end))
        assert.equal("done", got)
      end
    end
    assert.equal("6", (zk:get(node)))
    -- fn's other results come back; nil leaves the node alone
    assert.equal("same", zklock.with_lock(zk:semaphore(H.path("lease-sem"),
      3), { update = node }, function(d)
        assert.equal("6", d)
        return nil, "same"
      end))
    assert.equal("6", (zk:get(node)))
  end)

  it("under a semaphore of 2, fn runs again when the other holder wrote " ..
     "first, and no update is lost", function()
    local path, node = H.path("lease-cas"), H.path("lease-cas-n")
    local sem = zk:semaphore(path, 2)
    local calls, seen = 0, {}
    local n = assert(zklock.with_lock(sem, { update = node }, function(d)
      calls = calls + 1
      seen[calls] = d
      if calls == 1 then
        -- the other holder writes in between our read and our write
        assert(zklock.with_lock(zk2:semaphore(path, 2), { update = node },
          function(d2) return tostring((tonumber(d2) or 0) + 10), true end))
      end
      return tostring((tonumber(d) or 0) + 1), calls
    end))
    assert.equal(2, n)
    assert.same({ nil, "10" }, { seen[1], seen[2] })
    assert.equal("11", (zk:get(node)))
    assert.same({}, sem:participants())
  end)

  it("a lease's token fences: later leases' tokens are greater", function()
    local sem = zk:semaphore(H.path("lease-token"), 1)
    local a = assert(sem:acquire(5))
    local ta = a:token()
    assert.is_true(a:release())
    local b = assert(sem:acquire(5))
    assert.is_true(b:token() > ta)
    assert.is_true(b:release())
  end)
end)

describe("a multilock's members are holds", function()
  local zk, zk2
  local setup, teardown = H.fixture(function(_, a, b) zk, zk2 = a, b end)
  lazy_setup(setup)
  lazy_teardown(teardown)

  it("a member's loss is told to the multilock's on_lost, which may " ..
     "release the rest", function()
    local a, b = zk:mutex(H.path("ml-a")), zk:semaphore_mutex(H.path("ml-b"))
    local ml = zk:multilock({ a, b })
    local told = {}
    ml:on_lost(function(m, member)
      told[#told + 1] = { m, member }
      local ok, msg, code = m:release()
      told.answer = { ok, msg, code }
    end)
    assert(ml:acquire(5))
    assert(op(zk2, "_delete", b:node()))
    H.wait_until(function()
      zk:dispatch(0.05)
      return #told == 1
    end, 20, "the multilock's on_lost")
    assert.equal(ml, told[1][1])
    assert.equal(b, told[1][2])
    assert.equal("lock_lost", told.answer[3])
    assert.is_false(a:is_held()) -- released with the rest
    assert.same({}, a:participants())
    assert.same({ nil, "multilock: lock lost: lost", "lock_lost" },
      { ml:release() })
  end)

  it("a member asked to revoke is told to the multilock's on_revoke",
      function()
    local pa, pb = H.path("ml-ra"), H.path("ml-rb")
    local a, b = zk:mutex(pa), zk:mutex(pb)
    local ml = zk:multilock({ a, b })
    assert(ml:acquire(5))
    local told
    -- set while held: the hold hears it
    ml:on_revoke(function(m, member)
      told = member
      assert.is_true(m:release())
    end)
    assert.equal(1, zklock.revoke(zk2, pa))
    H.wait_until(function()
      zk:dispatch(0.05)
      return told ~= nil
    end, 20, "the multilock's on_revoke")
    assert.equal(a, told)
    assert.same({}, a:participants())
    assert.same({}, b:participants())
    assert.equal("lock_lost", select(3, ml:release()))
  end)

  -- (found by the chaos run: make chaos PROFILE=chaos SEED=41
  -- FOCUS=lease_ends, a member's fenced_set after its multilock was
  -- released in on_revoke raised "not held by the calling coroutine")
  it("every member released in the multilock's callback has ended for " ..
     "its owner, not only the one the news was about", function()
    local pa, pb = H.path("ml-ea"), H.path("ml-eb")
    local a, b = zk:mutex(pb), zk:semaphore_mutex(pa) -- (b: first, by path)
    local ml = zk:multilock({ a, b })
    local told
    ml:on_revoke(function(m, member)
      told = member
      assert.is_true(m:release())
    end)
    assert(ml:acquire(5))
    assert.equal(1, zklock.revoke(zk2, pb)) -- (a's: released last)
    H.wait_until(function()
      zk:dispatch(0.05)
      return told ~= nil
    end, 20, "the multilock's on_revoke")
    assert.equal(a, told)
    local data = H.path("ml-e-data")
    for _, l in ipairs({ a, b }) do
      assert.is_false(l:is_held())
      assert.equal("lock_lost", select(3, l:fenced_set(data, "x")))
      assert.equal("lock_lost", select(3, l:extend(1)))
    end
    assert.equal("lock_lost", select(3, ml:release()))
    assert.is_nil(zk:get(data))
    -- and the owner takes them again afresh
    assert(ml:acquire(5))
    assert.is_true(a:is_held() and b:is_held())
    assert.is_true(ml:release())
  end)
end)
