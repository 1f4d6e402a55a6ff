-- A guarded node: read with the acquire (`acquire(t, { read = path })`),
-- written with the release (`release({ write = path, data = d })`), and
-- both through `zklock.with_lock(lock, { update = path }, fn)`
-- (docs/design.md, section 4.12).  And the hand-off that needs no listing
-- when the predecessor was all that stood ahead (section 4.4).
local H = require "spec.helpers"
local zklock = H.zklock

describe("a guarded node", function()
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

  it("is read with the acquire and written with the release", function()
    local path, node = H.path("guard"), H.path("guarded")
    local m = zk:mutex(path)
    -- missing: nil, and the write creates it
    local held, data, version = m:acquire(5, { read = node })
    assert.equal(m, held)
    assert.is_nil(data)
    assert.is_nil(version)
    local ok, v, created = m:release({ write = node, data = "1" })
    assert.is_true(ok)
    assert.same({ 0, 0 }, { v, created }) -- created: version 0, zxid 0
    assert.is_false(m:is_held())
    assert.same({}, H.lock_nodes(zk, path)) -- our node went with the write
    -- present: its data and version; the write sets it
    held, data, version = m:acquire(5, { read = node })
    assert.equal(m, held)
    assert.equal("1", data)
    assert.equal(0, version)
    -- reentry reads too, still under the lock; an inner write is fenced
    local again, d2 = m:acquire(5, { read = node })
    assert.equal(m, again)
    assert.equal("1", d2)
    local zxid
    ok, v, zxid = m:release({ write = node, data = "2" })
    assert.is_true(ok)
    assert.equal(1, v)
    assert.is_true(zxid > 0)
    assert.is_true(m:is_held())
    ok, v = m:release({ write = node, data = "3" })
    assert.is_true(ok)
    assert.equal(2, v)
    assert.same({ "3", 2 }, { zk:get(node) })
    assert.same({}, H.lock_nodes(zk, path))
  end)

  it("is not written once the hold is lost, and the release says so",
      function()
    local path, node = H.path("guard-lost"), H.path("guarded-lost")
    assert(zk:set(node, "before"))
    local m = zk:mutex(path)
    assert(m:acquire(5, { read = node }))
    -- our node goes behind our back (an operator, a reaper...)
    local del = assert(zk2:_delete(m:node()))
    assert.equal("done", H.await(zk2, del, H.now() + 10))
    -- whether or not the loss is known yet, the multi-op refuses
    local ok, msg, code = m:release({ write = node, data = "after" })
    assert.is_nil(ok)
    assert.equal("lock_lost", code)
    assert.matches("lock lost", msg)
    assert.same({ "before", 0 }, { zk:get(node) })
    assert.same({}, H.lock_nodes(zk, path))
  end)

  it("serves a waiter: it reads what the holder wrote with its release",
      function()
    local path, node = H.path("guard-wait"), H.path("guarded-wait")
    -- (two nodes, counted in participants: no cohort; cohort_spec has the
    -- cohort's form)
    local m1 = zk:mutex(path, { cohort = false })
    local m2 = zk:mutex(path, { cohort = false })
    local got
    H.run(zk, {
      function()
        assert(m1:acquire(5, { read = node }))
        -- (the second coroutine queues meanwhile: yields happen in waits)
        H.wait_until(function()
          return #assert(m1:participants()) == 2
        end, 20, "the waiter")
        assert(m1:release({ write = node, data = "from the first" }))
      end,
      function()
        local _, data = assert(m2:acquire(20, { read = node }))
        got = data
        assert(m2:release())
      end,
    }, 30)
    assert.equal("from the first", got)
  end)

  it("with_lock update: fn gets the data, its first result is written",
      function()
    local path, node = H.path("guard-wl"), H.path("guarded-wl")
    local m = zk:mutex(path)
    for _ = 1, 3 do
      local a, b = zklock.with_lock(m, { timeout = 5, update = node },
        function(data, x)
          return tostring((tonumber(data) or 0) + x), "added", x
        end, 2)
      assert.equal("added", a)
      assert.equal(2, b)
    end
    assert.equal("6", (zk:get(node)))
    -- nil first result: nothing written, a plain release
    assert.equal("kept", zklock.with_lock(m, { update = node },
      function(data) assert.equal("6", data); return nil, "kept" end))
    assert.same({ "6", 2 }, { zk:get(node) })
    -- an error: released, nothing written, the error raised (with the
    -- frames where it was raised)
    local ok, err = pcall(zklock.with_lock, m, { update = node },
      function() error("boom") end)
    assert.is_false(ok)
    assert.matches("^spec/guarded_spec%.lua:%d+: boom\nstack traceback", err)
    assert.same({ "6", 2 }, { zk:get(node) })
    assert.same({}, H.lock_nodes(zk, path))
  end)

  it("refuses bad input", function()
    local m = zk:mutex(H.path("guard-bad"))
    assert.has_error(function() m:acquire(1, { read = "relative" }) end)
    assert.has_error(function() zk:semaphore_mutex(H.path("guard-sm"))
      :acquire(1, { read = "relative" }) end)
    assert(m:acquire(5))
    assert.has_error(function() m:release({ write = "/x" }) end) -- no data
    assert.has_error(function() m:release({ write = 1, data = "d" }) end)
    assert.has_error(function() m:release("no") end)
    assert.is_true(m:is_held()) -- nothing lost by the refusals
    assert(m:release())
  end)

  -- 4 processes x 25 increments of one counter node: exact with the plain
  -- form and the pipelined one; the same checker sees updates lost on a
  -- lock that lets two in at once
  for _, mode in ipairs { "pipelined", "plain", "broken" } do
    it(("4 processes x 25 increments, %s: %s"):format(mode,
        mode == "broken" and "the checker sees lost updates"
        or "the counter is exact"), function()
      local path, node = H.path("guard-" .. mode), H.path("counter-" .. mode)
      local meet = mode == "broken" and H.tmpname("meet") or nil
      local jobs = {}
      for i = 1, 4 do
        jobs[i] = { "spec/workers/guarded.lua", srv.connect_string, path,
          node, 25, mode, "$GATE", meet }
      end
      H.run_workers(jobs, 120)
      if meet then os.remove(meet) end
      local n = tonumber((zk:get(node)))
      if mode == "broken" then
        assert.is_true(n < 100, "no update lost: " .. n)
      else
        assert.equal(100, n)
      end
    end)
  end
end)

-- leases are holds too (issue 33): 3 processes x 20 increments under a
-- semaphore of 3, all three inside at once for the first: exact with
-- with_lock's update (a write conditional on the version read, fn run
-- again on a conflict); the contrast, a lease's unconditional write with
-- the release, loses updates
describe("a guarded update under a semaphore", function()
  local srv, zk
  lazy_setup(function()
    srv = H.testing.server()
    zk = H.connect(srv)
  end)
  lazy_teardown(function()
    if zk then zk:close() end
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  for _, mode in ipairs { "semaphore", "blind" } do
    it(("3 processes x 20 increments, %s: %s"):format(mode,
        mode == "blind" and "updates are lost" or "the counter is exact"),
        function()
      local path, node = H.path("sem-" .. mode), H.path("counter-" .. mode)
      local meet = H.tmpname("meet")
      local jobs = {}
      for i = 1, 3 do
        jobs[i] = { "spec/workers/guarded.lua", srv.connect_string, path,
          node, 20, mode, "$GATE", meet }
      end
      H.run_workers(jobs, 120)
      os.remove(meet)
      local n = tonumber((zk:get(node)))
      if mode == "blind" then
        assert.is_true(n < 60, "no update lost: " .. n)
      else
        assert.equal(60, n)
      end
    end)
  end
end)

describe("the hand-off", function()
  local srv, zk, holder_zk

  lazy_setup(function()
    srv = H.testing.server()
    zk = H.connect(srv)
    holder_zk = H.connect(srv)
  end)
  lazy_teardown(function()
    if zk then zk:close() end
    if holder_zk then holder_zk:close() end
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  -- requests of one acquire of `lock` taken in a coroutine; with `holder`
  -- held by another session until the waiter watches it
  local function requests_of(lock, opts, holder)
    local n
    local released = false
    H.run(zk, { function()
      local r0 = zk:stats().requests
      assert(lock:acquire(20, opts))
      n = zk:stats().requests - r0
      assert(lock:release())
    end }, 30, function()
      if holder and not released then
        local w = H.watches_by_session(srv)[zk:session_id()] or {}
        for _, p in ipairs(w) do
          if p == holder:node() then
            released = true
            assert(holder:release())
          end
        end
      end
    end)
    return n
  end

  for _, case in ipairs {
    { "a mutex", function(c, p) return c:mutex(p) end,
      function(c, p) return c:mutex(p) end },
    { "a write lock", function(c, p) return c:rwlock(p).write end,
      function(c, p) return c:rwlock(p).write end },
    { "a read lock behind a writer", function(c, p) return c:rwlock(p).read end,
      function(c, p) return c:rwlock(p).write end },
  } do
    local what, waiter_of, holder_of = case[1], case[2], case[3]
    it(what .. ": the predecessor alone ahead goes, and we hold without " ..
        "listing again", function()
      local path = H.path("handoff")
      local lock = waiter_of(zk, path)
      requests_of(lock) -- (the directory's parents are made)
      local uncontended = requests_of(lock) -- create, listing
      local holder = holder_of(holder_zk, path)
      assert(holder:acquire(5))
      local waited = requests_of(lock, nil, holder)
      -- two more: the waiter's self watch (a hold taken with no wait sends
      -- none, until it has lasted self_watch_delay: selfwatch_spec.lua)
      -- and the predecessor's watch; no second listing
      assert.equal(uncontended + 2, waited)
      -- with a guarded read: it rides behind the listing, and once more
      -- after the wake-up (the first said "wait"); and the waiter's self
      -- watch and the predecessor's watch
      local node = H.path("handoff-node")
      local plain_read = requests_of(lock, { read = node })
      assert(holder:acquire(5))
      local read = requests_of(lock, { read = node }, holder)
      assert.equal(plain_read + 3, read)
      assert.same({}, H.lock_nodes(zk, path))
    end)
  end
end)
