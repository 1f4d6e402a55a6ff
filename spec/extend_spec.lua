-- `extend` (issue 33; docs/api.md, "Extending a hold"; docs/design.md,
-- section 9.6): on every kind of hold (mutex, semaphore mutex, read,
-- write, semaphore lease, multilock) an extended hold outlives its first
-- limit and ends at its new one, as a lost hold; `extend(math.huge)`
-- removes the limit and a hold without one gets one; an ended hold
-- answers lock_lost and stays ended; misuse raises; the next hold of a
-- node (a cohort's pass, a lingering node reused) keeps its own limit.
-- Under nginx and in an event loop: spec/nginx_spec.lua,
-- spec/loops_spec.lua.  Against a real standalone ZooKeeper; no sleep
-- orders anything: bounded waits for the event, and limits with margins
-- for a loaded machine.
local H = require "spec.helpers"
local C = require "spec.cohort"
local zklock = H.zklock
local op = require "zklock.rt.op"
local it_yields = H.it_yields(it)
local yield_until = C.yield_until

local FIRST, EXTENDED, CHECK = 0.5, 3, 1 -- (seconds)

-- Until time t, check() holds at every look (zk's callbacks run between).
local function holds_until(zk, t, check, what)
  while H.now() < t do
    zk:dispatch()
    assert(check(), what)
    H.nap(0.02)
  end
end

-- fn() raises "bad argument #1 to 'extend' (...)" with `words` in it.
local function refused(fn, words)
  local ok, err = pcall(fn)
  assert.is_false(ok, "no error")
  assert.matches("bad argument #1 to 'extend'", err, 1, true)
  if words then assert.matches(words, err, 1, true) end
end

-- Every kind of hold behind one face: take(opts) acquires it with on_lost
-- counted in lost[name]; h.extend, h.is_held, h.release.
local function kinds(zk)
  local list = {}
  local function lock_kind(name, lock)
    list[#list + 1] = { name = name, take = function(lost, opts)
      lock:on_lost(function() lost[name] = (lost[name] or 0) + 1 end)
      assert(lock:acquire(5, opts))
      return lock
    end }
  end
  lock_kind("mutex", zk:mutex(H.path("ext-mutex")))
  lock_kind("semaphore_mutex", zk:semaphore_mutex(H.path("ext-sm")))
  local rw = zk:rwlock(H.path("ext-rw-read"))
  lock_kind("rw.read", rw.read)
  lock_kind("rw.write", zk:rwlock(H.path("ext-rw-write")).write)
  local kept = {} -- the leases taken through a semaphore
  local function counted(lost, name)
    return zk:semaphore(H.path("ext-sem"), 2):on_lost(function()
      lost[name] = (lost[name] or 0) + 1
    end)
  end
  list[#list + 1] = { name = "lease", take = function(lost, opts)
    return assert(counted(lost, "lease"):acquire(5, opts))
  end }
  list[#list + 1] = { name = "semaphore", take = function(lost, opts)
    local sem = counted(lost, "semaphore")
    -- (kept: a lease nobody refers to is collected, and its node goes)
    kept[#kept + 1] = assert(sem:acquire(5, opts))
    return sem -- (sem:extend: the newest lease)
  end }
  list[#list + 1] = { name = "multilock", take = function(lost, opts)
    local p = H.path("ext-ml")
    local a, b = zk:mutex(p .. "/a"), zk:rwlock(p .. "/b").write
    for _, l in ipairs { a, b } do
      l:on_lost(function() lost.multilock = (lost.multilock or 0) + 1 end)
    end
    return assert(zk:multilock({ a, b }):acquire(5, opts))
  end }
  return list
end

describe("extend", function()
  local srv, zk, zk2
  local setup, teardown = H.fixture(function(s, a, b)
    srv, zk, zk2 = s, a, b
  end)
  lazy_setup(setup)
  lazy_teardown(teardown)

  it("on every kind: an extended hold outlives its first limit and ends " ..
     "at its new one (on_lost told then, release lock_lost)", function()
    local lost, holds, t_ext = {}, {}, nil
    for _, k in ipairs(kinds(zk)) do
      local h = k.take(lost, { max_hold = FIRST })
      t_ext = H.now() -- (each extended at once: its first limit is near)
      assert.is_true(h:extend(EXTENDED), k.name)
      holds[#holds + 1] = { name = k.name, h = h, t_ext = t_ext }
    end
    holds_until(zk, t_ext + CHECK, function()
      for _, e in ipairs(holds) do
        if not e.h:is_held() or lost[e.name] then return false end
      end
      return true
    end, "every hold outlives its first limit")
    local ended = {}
    H.dispatch_until(zk, function()
      for _, e in ipairs(holds) do
        if not ended[e.name] and not e.h:is_held() then
          ended[e.name] = H.now()
        end
      end
      for _, e in ipairs(holds) do
        if not ended[e.name] then return false end
      end
      return true
    end, "every hold to end at its new limit")
    for _, e in ipairs(holds) do
      local at = ended[e.name] - e.t_ext
      assert.is_true(at >= EXTENDED - 0.05, ("%s ended %.2f s after " ..
        "its extend"):format(e.name, at))
      H.dispatch_until(zk, function() return lost[e.name] end,
        "on_lost of " .. e.name)
      assert.is_nil(e.h:extend(EXTENDED), e.name) -- (not revived)
      assert.is_false(e.h:is_held(), e.name)
      local ok, msg, code = e.h:release()
      assert.is_nil(ok, e.name)
      assert.equal("lock_lost", code, e.name .. ": " .. tostring(msg))
    end
  end)

  it("extend(math.huge) removes a limit; a hold without max_hold gets " ..
     "one, for all its levels", function()
    local unlimited = zk:mutex(H.path("ext-huge"))
    local limited = zk:mutex(H.path("ext-none"))
    local lost = 0
    limited:on_lost(function() lost = lost + 1 end)
    assert(unlimited:acquire(5, { max_hold = FIRST }))
    assert.is_true(unlimited:extend(math.huge))
    assert(limited:acquire(5))
    assert(limited:acquire(5)) -- (reentrant: the whole hold is extended)
    local t0 = H.now()
    assert.is_true(limited:extend(CHECK))
    holds_until(zk, t0 + CHECK - 0.1, function()
      return unlimited:is_held() and limited:is_held()
    end, "both held")
    H.dispatch_until(zk, function() return lost == 1 end, "on_lost")
    assert.is_true(H.now() - t0 >= CHECK - 0.05)
    assert.is_false(limited:is_held())
    limited:release() -- (the inner level)
    assert.equal("lock_lost", select(3, limited:release()))
    assert.is_true(unlimited:is_held()) -- (long past its first limit)
    assert.is_true(unlimited:release())
  end)

  it("a hold that has ended answers lock_lost and is not revived",
      function()
    local path = H.path("ext-ended")
    -- past its limit
    local m = zk:mutex(path)
    assert(m:acquire(5, { max_hold = 0.2 }))
    H.wait_until(function() return not m:is_held() end, 10, "the end")
    local ok, msg, code = m:extend(60)
    assert.is_nil(ok)
    assert.equal("lock_lost", code)
    assert.is_string(msg)
    assert.is_false(m:is_held())
    assert.equal("lock_lost", select(3, m:release()))
    -- lost: its node deleted by another session
    local lost = false
    m:on_lost(function() lost = true end)
    assert(m:acquire(5))
    assert(op.call_op(zk2, 5, "_delete", m:node()))
    H.dispatch_until(zk, function() return lost end, "on_lost")
    assert.equal("lock_lost", select(3, m:extend(60)))
    assert.is_false(m:is_held())
    assert.equal("lock_lost", select(3, m:release()))
    -- revoked, and released in its on_revoke
    local rpath = H.path("ext-revoked")
    local r = zk:mutex(rpath)
    r:on_revoke(function(l) l:release() end)
    assert(r:acquire(5))
    assert.equal(1, zklock.revoke(zk2, rpath))
    H.dispatch_until(zk, function() return not r:is_held() end, "revoke")
    ok, msg, code = r:extend(60)
    assert.is_nil(ok)
    assert.equal("lock_lost", code)
    assert.matches("revoked", msg)
    assert.equal("lock_lost", select(3, r:release()))
    -- a semaphore mutex released by another coroutine
    local sm = zk:semaphore_mutex(H.path("ext-sm-other"))
    local A = coroutine.create(function()
      assert(sm:acquire(5))
      coroutine.yield()
      local aok, amsg, acode = sm:extend(60)
      return aok, amsg, acode, sm:release()
    end)
    assert(coroutine.resume(A))
    assert.is_true(sm:release()) -- (main: any coroutine may)
    local _, aok, amsg, acode, rok = coroutine.resume(A)
    assert.is_nil(aok)
    assert.equal("lock_lost", acode)
    assert.matches("released by another coroutine", amsg)
    assert.is_nil(rok)
    -- a lease past its limit
    local lease = assert(zk:semaphore(H.path("ext-sem-ended"), 1)
      :acquire(5, { max_hold = 0.2 }))
    H.wait_until(function() return not lease:is_held() end, 10, "its end")
    assert.equal("lock_lost", select(3, lease:extend(60)))
    assert.is_false(lease:is_held())
    assert.equal("lock_lost", select(3, lease:release()))
    -- a lease lost (its node deleted), and one revoked and released in
    -- its on_revoke
    local spath = H.path("ext-sem-lost")
    local sem, llost = zk:semaphore(spath, 2), false
    sem:on_lost(function() llost = true end)
    sem:on_revoke(function(l) assert.is_true(l:release()) end)
    local gone, revoked = assert(sem:acquire(5)), assert(sem:acquire(5))
    assert(op.call_op(zk2, 5, "_delete", gone:node()))
    H.dispatch_until(zk, function() return llost end, "the lease's on_lost")
    assert.equal("lock_lost", select(3, gone:extend(60)))
    assert.equal(1, zklock.revoke(zk2, spath, 2)) -- (gone's went)
    H.dispatch_until(zk, function() return not revoked:is_held() end,
      "the lease's revocation")
    ok, msg, code = revoked:extend(60)
    assert.is_nil(ok)
    assert.equal("lock_lost", code)
    assert.matches("revoked", msg)
    assert.is_false(revoked:is_held())
    assert.equal("lock_lost", select(3, gone:release()))
    assert.equal("lock_lost", select(3, revoked:release()))
    -- a multilock one of whose members was lost: named
    local p = H.path("ext-ml-ended")
    local a, b = zk:mutex(p .. "/a"), zk:mutex(p .. "/b")
    local blost = false
    b:on_lost(function() blost = true end)
    local ml = assert(zk:multilock({ a, b }):acquire(5))
    assert(op.call_op(zk2, 5, "_delete", b:node()))
    H.dispatch_until(zk, function() return blost end, "b's on_lost")
    ok, msg, code = ml:extend(60)
    assert.is_nil(ok)
    assert.equal("lock_lost", code)
    assert.matches(p .. "/b", msg, 1, true)
    assert.is_true(a:is_held())
    assert.equal("lock_lost", select(3, ml:release()))
    H.wait_until(function() return #H.lock_nodes(zk, p) == 0 end, 10,
      "the nodes to go")
  end)

  it("a downgraded read is extended alone, and still ends with its " ..
     "write hold", function()
    local rw = zk:rwlock(H.path("ext-downgrade"))
    assert(rw.write:acquire(5, { max_hold = 2 * CHECK }))
    assert(rw.read:acquire(5)) -- (rests on our write node)
    assert.is_true(rw.read:extend(60))
    H.wait_until(function() return not rw.write:is_held() end, 10,
      "the write hold's end")
    H.wait_until(function() return not rw.read:is_held() end, 10,
      "the read's end, with it")
    assert.equal("lock_lost", select(3, rw.read:extend(60)))
    assert.equal("lock_lost", select(3, rw.read:release()))
    assert.equal("lock_lost", select(3, rw.write:release()))
  end)

  it("misuse raises, in acquire's words", function()
    local path = H.path("ext-misuse")
    local m = zk:mutex(path)
    local sem = zk:semaphore(H.path("ext-misuse-sem"), 2)
    local ml = zk:multilock({ zk:mutex(path .. "-a") })
    -- seconds: negative, zero, NaN, not a number (held or not)
    assert(m:acquire(5))
    local lease = assert(sem:acquire(5))
    assert(ml:acquire(5))
    for _, obj in ipairs { m, lease, sem, ml } do
      for _, bad in ipairs { -1, 0, 0 / 0, -math.huge } do
        refused(function() obj:extend(bad) end, "seconds must be > 0")
      end
      for _, bad in ipairs { "1", {}, true } do
        refused(function() obj:extend(bad) end, "number expected")
      end
      refused(function() obj:extend() end, "number expected, got nil")
    end
    assert.is_true(m:release())
    assert.is_true(ml:release())
    -- a coroutine that holds nothing
    refused(function() m:extend(1) end,
      "zklock.mutex " .. path .. " is not held by the calling coroutine")
    refused(function() ml:extend(1) end, "multilock not held")
    assert.is_true(lease:release())
    refused(function() lease:extend(1) end, "already released")
    refused(function() sem:extend(1) end, "holds no lease")
    -- a semaphore mutex: the caller's own hold only
    local sm = zk:semaphore_mutex(H.path("ext-misuse-sm"))
    local A = coroutine.create(function()
      assert(sm:acquire(5)); coroutine.yield(); assert(sm:release())
    end)
    assert(coroutine.resume(A))
    refused(function() sm:extend(1) end, "is not held by the calling")
    assert(coroutine.resume(A))
    -- a closed client
    local zc = H.connect(srv)
    local cm = zc:mutex(H.path("ext-closed"))
    local csem = zc:semaphore(H.path("ext-closed-sem"), 1)
    local cml = zc:multilock({ zc:mutex(H.path("ext-closed-ml")) })
    assert(cm:acquire(5))
    local cl = assert(csem:acquire(5))
    assert(cml:acquire(5))
    zc:close()
    for _, obj in ipairs { cm, cl, csem, cml } do
      refused(function() obj:extend(1) end, "client is closed")
    end
  end)

  it_yields("a hold passed on in a cohort keeps its own limit", function()
    local path = H.path("ext-cohort")
    local a, b, c = zk:mutex(path), zk:mutex(path), zk:mutex(path)
    local t_ext, b_past, c_lost, c_rel = nil, nil, false, nil
    c:on_lost(function() c_lost = true end)
    H.run(zk, {
      function()
        assert(a:acquire(5))
        yield_until(function() return a:local_waiters() == 2 end)
        t_ext = H.now()
        assert.is_true(a:extend(CHECK)) -- (a's hold only)
        assert(a:release()) -- passed to b, no max_hold
      end,
      function()
        coroutine.yield()
        assert(b:acquire(20))
        local _, pass = b:token()
        assert.equal(1, pass) -- (passed)
        -- past a's extended end: b's hold has no limit
        yield_until(function() return H.now() > t_ext + 2 * CHECK end)
        b_past = b:is_held()
        assert.is_true(b:extend(math.huge))
        assert(b:release()) -- passed to c, whose max_hold is its own
      end,
      function()
        coroutine.yield(); coroutine.yield()
        assert(c:acquire(20, { max_hold = FIRST }))
        local _, pass = c:token()
        assert.equal(2, pass)
        yield_until(function() zk:dispatch(); return c_lost end)
        assert.is_false(c:is_held())
        c_rel = { c:release() }
      end,
    }, 30)
    assert.is_true(b_past)
    assert.equal("lock_lost", c_rel[3])
    H.wait_until(function() return #H.lock_nodes(zk, path) == 0 end, 10,
      "the node to go")
  end)

  it("a lingering node reused keeps its own limit", function()
    local path = H.path("ext-linger")
    local m = zk:mutex(path, { linger = 30, cohort = false })
    assert(m:acquire(5))
    local token = m:token()
    local t_ext = H.now()
    assert.is_true(m:extend(FIRST))
    assert.is_true(m:release()) -- (lingers)
    assert(m:acquire(5)) -- no max_hold
    assert.equal(token, m:token()) -- (the same node: reused)
    holds_until(zk, t_ext + FIRST + CHECK, function() return m:is_held() end,
      "held past the last hold's extended end")
    assert.is_true(m:extend(math.huge))
    assert.is_true(m:release())
    assert(m:acquire(5, { max_hold = FIRST })) -- its own limit
    assert.equal(token, m:token())
    H.wait_until(function() return not m:is_held() end, 10, "its own end")
    assert.equal("lock_lost", select(3, m:release()))
    H.wait_until(function() return #H.lock_nodes(zk, path) == 0 end, 10,
      "the node to go")
  end)
end)
