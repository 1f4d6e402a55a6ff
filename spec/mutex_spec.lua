-- The reentrant mutex against a real standalone ZooKeeper.
local H = require "spec.helpers"
local zklock = H.zklock
-- specs whose waits yield (H.run): pending under PUC Lua 5.1
local it_yields = H.it_yields(it) -- (not under PUC Lua 5.1)

describe("zklock mutex", function()
  local srv, zk, zk2

  lazy_setup(function()
    srv = H.testing.server()
    zk = H.connect(srv)
    zk2 = H.connect(srv)
  end)

  lazy_teardown(function()
    -- nothing a spec took may be left behind while the sessions still live
    if srv then H.assert_no_orphans(srv) end
    if zk then zk:close() end
    if zk2 then zk2:close() end
    if srv then srv:close() end
  end)

  it("acquires and releases, with a node named the Curator way", function()
    local m = zk:mutex(H.path())
    assert.equal(m, m:acquire(5))
    assert.is_true(m:is_held())
    local node = m:node()
    assert.matches("/_c_%x+%-%x+%-4%x+%-%x+%-%x+%-lock%-%d%d%d%d%d%d%d%d%d%d$",
      node)
    assert.same({ node }, m:participants())
    assert.is_true(m:release())
    assert.is_false(m:is_held())
    assert.is_nil(m:token())
    assert.is_nil(m:node())
    assert.same({}, m:participants())
  end)

  it("is reentrant per coroutine: one node, released as often", function()
    local path = H.path()
    local m = zk:mutex(path)
    assert(m:acquire(5))
    local node = m:node()
    assert(m:acquire(5))
    assert.equal(node, m:node())
    assert.equal(1, #m:participants())
    assert.is_true(m:release())
    assert.is_true(m:is_held()) -- still held once
    assert.equal(1, #m:participants())
    assert.is_true(m:release())
    assert.is_false(m:is_held())
    assert.equal(0, #m:participants())
  end)

  it_yields("makes another coroutine wait like another process", function()
    local path = H.path()
    local m = zk:mutex(path)
    assert(m:acquire(5))
    local got = {}
    local co = coroutine.wrap(function()
      got[1] = { m:acquire(0.3) }
      got[2] = m:is_held()
    end)
    co()
    assert.is_nil(got[1][1])
    assert.equal("timeout", got[1][3])
    assert.is_false(got[2])
    assert.is_true(m:is_held()) -- the main coroutine still holds it
    -- and once the main coroutine releases, the other one gets it
    local order, released = {}, false
    H.run(zk, {
      function()
        assert.equal(m, m:acquire(10)); order[#order + 1] = "co"; m:release()
      end,
    }, 20, function()
      -- (queued: in the cohort, or behind our node with a node of its own)
      if not released and (m:local_waiters() == 1 or
          #m:participants() == 2) then
        released = true
        order[#order + 1] = "main releases"
        m:release()
      end
    end)
    assert.same({ "main releases", "co" }, order)
  end)

  it("refuses a release by a coroutine that does not hold it", function()
    local m = zk:mutex(H.path())
    assert.has_error(function() m:release() end,
      "bad argument #1 to 'release' (zklock.mutex " .. "" ..
      select(1, tostring(m):match("{(/[^,]+)")) ..
      " is not held by the calling coroutine)")
    assert(m:acquire(5))
    local ok, err = coroutine.wrap(function() return pcall(m.release, m) end)()
    assert.is_false(ok)
    assert.matches("not held by the calling coroutine", err)
    assert.is_true(m:is_held())
    m:release()
  end)

  it("times out with nil, msg, 'timeout' and leaves no node", function()
    local path = H.path()
    local m = zk:mutex(path)
    assert(m:acquire(5))
    local other = zk2:mutex(path)
    local t0 = H.now()
    local ok, msg, code = other:acquire(0.5)
    local took = H.now() - t0
    assert.is_nil(ok)
    assert.equal("timeout", code)
    assert.equal("timeout: " .. path .. " not acquired within 0.5s", msg)
    assert.is_true(took >= 0.5 and took < 5)
    assert.equal(1, #H.lock_nodes(zk, path))
    -- timeout 0: a single try
    ok, msg, code = other:acquire(0)
    assert.is_nil(ok)
    assert.matches("timeout", msg)
    assert.equal("timeout", code)
    assert.equal(1, #H.lock_nodes(zk, path))
    m:release()
    assert.equal(0, #H.lock_nodes(zk, path))
    assert.equal(other, other:acquire(0)) -- free: try-lock succeeds
    other:release()
  end)

  it_yields("serves waiters in FIFO order", function()
    local path = H.path()
    local holder = zk2:mutex(path)
    assert(holder:acquire(5))
    -- (each waiter its own node, counted in participants: no cohort)
    local m = zk:mutex(path, { cohort = false })
    local order, fns = {}, {}
    for i = 1, 5 do
      fns[i] = function()
        -- queue up strictly one after the other
        H.wait_until(function() return #m:participants() == i end, 10)
        assert(m:acquire(30))
        order[#order + 1] = i
        m:release()
      end
    end
    local released = false
    H.run(zk, fns, 30, function()
      if not released and #m:participants() == 6 then
        released = true
        holder:release()
      end
    end)
    assert.same({ 1, 2, 3, 4, 5 }, order)
  end)

  it("hands out strictly increasing fencing tokens", function()
    local path = H.path()
    local a, b = zk:mutex(path), zk2:mutex(path)
    local last = -1
    for i = 1, 6 do
      local m = (i % 2 == 0) and a or b
      assert(m:acquire(5))
      local t = m:token()
      assert.is_number(t)
      if H.is54 then assert.equal("integer", math.type(t)) end
      assert.is_true(t > last)
      last = t
      m:release()
    end
  end)

  it("frees the node of a held lock that is garbage-collected", function()
    local path = H.path()
    do
      local m = zk:mutex(path)
      assert(m:acquire(5))
    end
    assert.equal(1, #H.lock_nodes(zk, path))
    collectgarbage()
    collectgarbage()
    local other = zk2:mutex(path)
    assert.equal(other, other:acquire(10))
    other:release()
  end)

  it("with_lock returns fn's results and releases", function()
    local m = zk:mutex(H.path())
    local a, b, c = zklock.with_lock(m, 5, function(x, y)
      assert.is_true(m:is_held())
      return x + y, "two", nil
    end, 1, 2)
    assert.same({ 3, "two" }, { a, b })
    assert.is_nil(c)
    assert.is_false(m:is_held())
    -- without a timeout
    assert.equal("ok", zklock.with_lock(m, function() return "ok" end))
  end)

  it("with_lock releases on error and re-raises the original error", function()
    local m = zk:mutex(H.path())
    local e = { "my error" }
    local ok, err = pcall(zklock.with_lock, m, 5, function() error(e) end)
    assert.is_false(ok)
    assert.equal(e, err) -- the very same value
    assert.is_false(m:is_held())
    assert.equal(0, #m:participants())
  end)

  -- (issue 24, item 5: the frames inside fn were gone, in an outer
  -- xpcall(debug.traceback) and in nginx's error log)
  it("with_lock keeps fn's traceback: a string error is raised again " ..
     "with the frames where it was raised; a table, unchanged", function()
    local path = H.path()
    local m = zk:mutex(path)
    for _, opts in ipairs({ 5, { timeout = 5, update = path .. "/n" } }) do
      local ok, err = xpcall(function()
        return zklock.with_lock(m, opts, function()
          local function inner() error("boom") end
          inner()
        end)
      end, debug.traceback)
      assert.is_false(ok)
      assert.matches("^spec/mutex_spec%.lua:%d+: boom\nstack traceback " ..
        "%(where it was raised%):\n", err)
      assert.matches("spec/mutex_spec%.lua:%d+: in function 'inner'", err)
      assert.is_false(m:is_held())
      -- a table: the very same value, through the outer handler too
      local e = {}
      ok, err = xpcall(function()
        return zklock.with_lock(m, opts, function() error(e) end)
      end, debug.traceback)
      assert.is_false(ok)
      assert.equal(e, err)
      assert.is_false(m:is_held())
    end
    assert.equal(0, #m:participants())
    assert.is_nil((zk:get(path .. "/n"))) -- (nothing written)
  end)

  it("with_lock does not call fn when the lock is not acquired", function()
    local path = H.path()
    local holder = zk2:mutex(path)
    assert(holder:acquire(5))
    local called = false
    local r, msg, code = zklock.with_lock(zk:mutex(path), 0.2,
      function() called = true end)
    assert.is_nil(r)
    assert.equal("timeout", code)
    assert.is_string(msg)
    assert.is_false(called)
    holder:release()
  end)

  if H.is54 then
    it("releases at the end of a <close> scope (Lua 5.4)", function()
      local m = zk:mutex(H.path())
      local f = assert(load([[
        local m = ...
        do
          local l <close> = assert(m:acquire(5))
          assert(m:is_held())
        end
        return m:is_held()
      ]]))
      assert.is_false(f(m))
    end)
  end

  it("returns 'closed' after the client is closed", function()
    local c = H.connect(srv)
    local m, held = c:mutex(H.path()), c:mutex(H.path())
    local latch = c:leader_latch(H.path("latch"))
    assert(held:acquire(5))
    assert(latch:start())
    c:close()
    c:close() -- idempotent
    local closed = { nil, "client is closed", "closed" }
    assert.same(closed, { m:acquire(1) })
    -- the hold ended with the session: its release says so, once
    assert.is_false(held:is_held())
    assert.is_nil(held:token())
    assert.same(closed, { held:release() })
    assert.has_error(function() held:release() end)
    assert.same(closed, { held:holders() })
    assert.same(closed, { c:barrier(H.path("bar")):wait(1) })
    assert.same(closed, { latch:await(1) })
    assert.same(closed, { zklock.revoke(c, H.path()) })
    assert.same(closed, { zklock.with_lock(m, 1, error) })
  end)

  it("deletes the node of a lock held when its session closes", function()
    local c = H.connect(srv)
    local path = H.path()
    assert(c:mutex(path):acquire(5))
    c:close()
    local m = zk:mutex(path)
    assert.equal(m, m:acquire(10))
    m:release()
  end)

  it("survives collections that run inside its own calls (no " ..
     "self-deadlock)", function()
    -- garbage attempts collected while token()/node()/tostring() and
    -- participants() allocate: their __gc takes the client's mutex
    local path = H.path()
    local m = zk:mutex(path)
    local sm = zk:mutex(H.path())
    for _ = 1, 300 do
      assert(sm:acquire(5)) -- leaves an attempt behind for the GC
      sm:release()
      assert(m:acquire(5))
      assert.is_number(m:token())
      assert.is_string(m:node())
      assert.is_string(tostring(m))
      assert.equal(1, #m:participants())
      m:release()
    end
  end)

  it("treats an enormous timeout as for ever, not as a spin", function()
    local m = zk:mutex(H.path())
    assert.equal(m, m:acquire(1e300))
    m:release()
    assert.equal(m, m:acquire(math.huge))
    m:release()
  end)

  it("a failed acquire (no auth to watch) leaves no node behind", function()
    local path = H.path("acl")
    local owner = H.connect(srv)
    -- an open lock directory (made by an open client's lock) holding a node
    -- that only its creator may read: u2 can queue but not watch it
    local o = owner:mutex(path)
    assert(o:acquire(5)); o:release()
    local u1 = assert(zklock.connect(srv.connect_string,
      { acl = "creator", auth = { "digest", "u1:secret1" } }))
    local u2 = assert(zklock.connect(srv.connect_string,
      { acl = "open", auth = { "digest", "u2:secret2" } }))
    local a = u1:mutex(path)
    assert(a:acquire(5))
    local b = u2:mutex(path)
    local ok, msg, code = b:acquire(5)
    assert.is_nil(ok)
    assert.is_string(msg)
    assert.equal("no_auth", code)
    -- nothing of u2 is left behind
    assert.equal(1, #o:participants())
    a:release()
    assert.equal(o, o:acquire(5))
    o:release()
    u1:close(); u2:close(); owner:close()
  end)
end)
