-- Leader election (zk:leader_latch, Curator LeaderLatch compatible) against
-- a real server: one leader, the lowest node; leadership handed over on
-- close; ended at once by a foreign deletion or a lost session, and taken
-- up again by itself; exactly one leader at a time across processes of
-- both runtimes, with the checker proven on a broken stand-in.
local H = require "spec.helpers"

local unpack = table.unpack or unpack

describe("leader election", function()
  local srv, zk, zk2

  lazy_setup(function()
    srv = H.testing.server({ min_session_timeout = 1000 })
    zk = H.connect(srv, { id = "alpha" })
    zk2 = H.connect(srv, { id = "beta" })
  end)
  lazy_teardown(function()
    if zk then zk:close() end
    if zk2 then zk2:close() end
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  it("the lowest node leads; leader(), participants(), token(); close " ..
     "hands over", function()
    local path = H.path("latch")
    local a, b = zk:leader_latch(path), zk2:leader_latch(path)
    assert.equal(a, a:start())
    assert.is_true(a:await(5))
    assert(b:start())
    assert.same({ nil, "timeout", "timeout" }, { b:await(0.3) })
    assert.is_true(a:has_leadership())
    assert.is_false(b:has_leadership())
    assert.equal("alpha", b:leader())
    local p = assert(b:participants())
    assert.equal(2, #p)
    assert.same({ "alpha", true }, { p[1].id, p[1].leader })
    assert.same({ "beta", false }, { p[2].id, p[2].leader })
    assert.is_true(a:token() > 0)
    assert.is_nil(b:token())
    assert.has_error(function() a:start() end) -- started already
    assert.is_true(a:close())
    assert.is_true(b:await(5))
    assert.equal("beta", a:leader(), "the next in line leads")
    assert.is_true(b:close())
    assert.is_true(b:close()) -- idempotent
    assert.is_nil(a:leader())
  end)

  it("on_change: true on coming to lead, false when someone else deletes " ..
     "our node; then it joins again and leads again", function()
    local path = H.path("latch")
    local a = zk:leader_latch(path, "solo")
    local changes = {}
    a:on_change(function(v) changes[#changes + 1] = v end)
    assert(a:start())
    assert(a:await(5))
    H.wait_until(function() zk:dispatch(); return #changes == 1 end, 10,
      "on_change(true)")
    local node = assert(a:participants())[1].node
    local del = assert(zk2:_delete(node))
    assert(H.await(zk2, del, H.now() + 10) == "done")
    H.wait_until(function() return not a:has_leadership() end, 10,
      "leadership to end")
    H.wait_until(function() zk:dispatch(); return #changes == 3 end, 10,
      "false, then true again")
    assert.same({ true, false, true }, changes)
    assert(a:await(5))
    assert.not_equal(node, assert(a:participants())[1].node) -- a new node
    a:close()
  end)

  -- ---------------------------------------------------------------------
  -- deferred dispatch (issue 22, item 6): callbacks run later than the
  -- waits, as under zklock.ngx (a timer runs them), so a wait may join
  -- again while the last attempt's news is still queued

  -- fn(), with callbacks run only by zk:dispatch() (the plug point
  -- dispatcher, zklock.ngx's switch: the waits then run none).
  local function deferred(fn)
    local plug = require("zklock.rt.plug")
    local saved = plug.hooks.dispatcher
    plug.register("dispatcher", true)
    local ok, err = pcall(fn)
    plug.register("dispatcher", saved)
    assert(ok, err)
  end

  -- Delete `node` from the other client and wait for the answer.
  local function delete(node)
    local del = assert(zk2:_delete(node))
    assert(H.await(zk2, del, H.now() + 10) == "done")
  end

  it("deferred dispatch: a queued 'lost' of an attempt the latch has " ..
     "left does not end the hold it has now; on_change says false, then " ..
     "true (issue 22, item 6)", function()
    deferred(function()
      local path = H.path("latch")
      local a = zk:leader_latch(path, "stale-lost")
      local changes = {}
      a:on_change(function(v) changes[#changes + 1] = v end)
      assert(a:start())
      assert.is_true(a:await(5))
      zk:dispatch()
      assert.same({ true }, changes)
      -- someone deletes our node: the first attempt's "lost" is queued
      delete(assert(a:participants())[1].node)
      H.wait_until(function() return not a:has_leadership() end, 10,
        "leadership to end")
      -- await joins again and leads, no callback running meanwhile
      assert.is_true(a:await(5))
      local token = assert(a:token())
      assert.same({ true }, changes)
      -- now the queue runs: the first attempt's "lost", the second's "held"
      zk:dispatch()
      assert.is_true(a:has_leadership(),
        "the first attempt's 'lost' ended the second attempt's hold")
      assert.equal(token, a:token())
      assert.same({ true, false, true }, changes)
      a:close()
    end)
  end)

  it("deferred dispatch: a queued 'held' of an attempt the latch has " ..
     "left calls no on_change(true), and its 'lost' leaves the new node " ..
     "queued (issue 22, item 6)", function()
    deferred(function()
      local path = H.path("latch")
      local a = zk:leader_latch(path, "first")
      local b = zk2:leader_latch(path, "second")
      local changes = {}
      a:on_change(function(v) changes[#changes + 1] = v end)
      assert(a:start())
      assert.is_true(a:await(5)) -- (its "held" stays queued)
      assert(b:start())
      H.wait_until(function() return #assert(a:participants()) == 2 end, 10,
        "the second participant to queue")
      -- someone deletes our node: that hold ends ("lost" queued after
      -- "held"), and the other participant leads
      delete(assert(a:participants())[1].node)
      H.wait_until(function() return not a:has_leadership() end, 10,
        "leadership to end")
      assert.is_true(b:await(5))
      -- a joins again, behind b
      assert.same({ nil, "timeout", "timeout" }, { a:await(0) })
      local p = assert(a:participants())
      assert.same({ "second", "first" }, { p[1].id, p[2].id })
      local queued = p[2].node
      -- the first attempt's "held", then its "lost"
      zk:dispatch()
      assert.same({}, changes, "on_change for a node given back")
      assert.is_false(a:has_leadership())
      p = assert(a:participants())
      assert.same({ "second", "first" }, { p[1].id, p[2].id })
      assert.equal(queued, p[2].node,
        "the first attempt's 'lost' made the latch join again")
      -- the current attempt's own news still counts
      b:close()
      assert.is_true(a:await(5))
      zk:dispatch()
      assert.same({ true }, changes)
      a:close()
    end)
  end)

  -- A stalled proxy (its session silent) is let through again only once
  -- wait() has seen what it waits for and the server has expired the
  -- session (no node left under path), whatever failed meanwhile.
  local function through_expiry(proxy, path, wait)
    local ok, err = pcall(function()
      wait()
      H.wait_until(function() return #H.children(zk, path) == 0 end, 20,
        "the server to expire the session (our node gone)")
    end)
    proxy:cut()
    proxy:stall(false, false)
    assert(ok, err)
  end

  it("a lost session ends leadership, and the latch leads again on the " ..
     "renewed session", function()
    local proxy = H.testing.proxy(srv)
    local c = H.connect(proxy:connect_string(), { session_timeout = 2 })
    local path = H.path("latch")
    local a = c:leader_latch(path)
    local changes = {}
    a:on_change(function(v) changes[#changes + 1] = v end)
    assert(a:start())
    assert(a:await(5))
    proxy:stall(true, true) -- silence: the server expires the session
    through_expiry(proxy, path, function()
      H.wait_until(function() return not a:has_leadership() end, 10,
        "leadership to end")
    end)
    -- joined again by itself: no await, no start, only the notices
    H.wait_until(function()
      c:dispatch(0.05)
      return a:has_leadership() and #changes == 3
    end, 20, "leadership again on the renewed session: true, false, true")
    assert.same({ true, false, true }, changes)
    assert.equal(1, c:stats().renewed)
    a:close()
    c:close()
    proxy:close()
  end)

  it("await(0) on a hold the server has not confirmed lately returns at " ..
     "once, without handing the waiter a negative timeout (issue 22, " ..
     "item 9)", function()
    local proxy = H.testing.proxy(srv)
    local c = H.connect(proxy:connect_string(), { session_timeout = 3 })
    local st = c:session_timeout()
    local path = H.path("latch")
    local a = c:leader_latch(path)
    assert(a:start())
    assert.is_true(a:await(5))
    local att = H.core.unbox(a).att -- (to check the case is the one meant)
    local given, before, ok, msg, code, took = {}, nil, nil, nil, nil, nil
    proxy:stall(true, true) -- silence: the hold is no longer believed
    through_expiry(proxy, path, function()
      -- disconnected, and past the margin: has_leadership() is false, but
      -- the attempt holds until the lost deadline (last heard + timeout)
      H.wait_until(function()
        return c:state() == "connecting" and not a:has_leadership()
      end, 10, "the connection to drop and the margin to pass")
      H.zklock.set_waiter(function(cl, gen, t)
        given[#given + 1] = t == nil and "nil" or t
        return cl:_wait(gen, t)
      end)
      local done, err = pcall(function()
        before = att:poll()
        local t0 = H.now()
        ok, msg, code = a:await(0)
        took = H.now() - t0
      end)
      H.zklock.set_waiter(nil)
      assert(done, err)
    end)
    assert.equal("held", before, "the lost deadline passed before the " ..
      "check: not the case meant")
    assert.same({ nil, "timeout", "timeout" }, { ok, msg, code })
    for _, t in ipairs(given) do
      assert.is_true(type(t) == "number" and t > 0,
        "the waiter was given timeout " .. tostring(t))
    end
    assert.is_true(took < 0.1 * st, ("await(0) took %.3f s"):format(took))
    a:close()
    c:close()
    proxy:close()
  end)

  it("the core's wait: a timeout that has run out (negative) does not " ..
     "wait for the next change (issue 22, item 9)", function()
    local c = H.connect(srv)
    local m = c:mutex(H.path("wait"))
    -- a hold the timer thread ends in 1 s: a change bound to come
    assert(m:acquire(5, { max_hold = 1 }))
    local _, gen = c:_poll()
    for _, t in ipairs({ -1, -1e-9, 0 }) do
      local t0 = H.now()
      c:_wait(gen, t)
      local took = H.now() - t0
      assert.is_true(took < 0.5, ("_wait(gen, %s) took %.3f s"):format(t,
        took))
    end
    assert.equal(gen, select(2, c:_poll()), "returned on a change, not " ..
      "at once")
    -- (and the change does come: the waits above returned before it)
    assert.not_equal(gen, c:_wait(gen, 10))
    assert.is_false(m:is_held())
    c:close()
  end)

  it("a latch collected while leading gives its node back", function()
    local path = H.path("latch")
    do
      local a = zk:leader_latch(path)
      assert(a:start())
      assert(a:await(5))
    end
    H.wait_until(function()
      collectgarbage()
      collectgarbage()
      return #H.children(zk2, path) == 0
    end, 10, "the collected latch's node to go")
    if H.is54 then -- <close> leaves, as close() does
      local spath = H.path("selector")
      local sel = zk:leader_selector(spath, function() end)
      local latch = assert(load([[
        local zk, path, sel = ...
        local latch <close> = zk:leader_latch(path)
        local s <close> = sel
        assert(latch:start())
        assert(latch:await(5))
        assert(sel:start())
        return latch
      ]]))(zk, path, sel)
      assert.is_false(latch:has_leadership())
      assert.same({}, H.children(zk2, path))
      assert.matches("closed", tostring(sel), 1, true)
      H.wait_until(function() return #H.children(zk2, spath) == 0 end, 10,
        "the closed selector's node to go")
    end
  end)

  it("selector: a lost session interrupts fn, which sees it without " ..
     "letting callbacks run", function()
    local proxy = H.testing.proxy(srv)
    local c = H.connect(proxy:connect_string(), { session_timeout = 2 })
    local saw
    local path = H.path("selector")
    local s = c:leader_selector(path, function(sel)
      proxy:stall(true, true) -- silence: the hold cannot be believed
      local deadline = H.now() + 10
      -- (no dispatch, no zklock wait: only the question)
      while not sel:is_interrupted() and H.now() < deadline do H.nap(0.02) end
      saw = sel:is_interrupted()
    end, { requeue = false })
    assert(s:start())
    through_expiry(proxy, path, function()
      H.wait_until(function()
        c:dispatch(0.01)
        return saw ~= nil
      end, 20, "the turn to run and end")
    end)
    assert.is_true(saw)
    -- the turn is over and requeue is false: the renewed session (and the
    -- late news of the lost hold) queue nothing
    H.wait_until(function()
      c:dispatch(0.02)
      return c:stats().renewed == 1
    end, 20, "the renewed session")
    c:dispatch(0.2)
    assert.same({}, H.children(zk, path))
    s:close()
    c:close()
    proxy:close()
  end)

  it("refuses bad arguments", function()
    assert.has_error(function() zk:leader_latch("x") end)
    assert.has_error(function() zk:leader_latch("/x", 5) end)
    local a = zk:leader_latch(H.path("latch"))
    assert.has_error(function() a:await(1) end) -- not started
    assert.has_error(function() a:on_change(1) end)
  end)

  -- ---------------------------------------------------------------------
  -- the leader selector

  it("selector: fn runs when chosen, leadership lasts until it returns, " ..
     "requeued participants take turns", function()
    local path = H.path("selector")
    local log, clients, sels, failures = {}, { zk, zk2 }, {}, {}
    for i, name in ipairs { "A", "B" } do
      sels[i] = clients[i]:leader_selector(path, function(sel)
        local ok, err = pcall(function()
          log[#log + 1] = name
          assert.is_true(sel:has_leadership())
          assert.is_false(sels[3 - i]:has_leadership())
          assert.equal(zk:session_id() == clients[i]:session_id() and
            "alpha" or "beta", assert(zk:mutex(path):holders())[1].id)
        end)
        if not ok then failures[#failures + 1] = tostring(err) end
      end)
    end
    assert(sels[1]:start())
    assert(sels[2]:start())
    H.wait_until(function()
      zk:dispatch(0.01); zk2:dispatch(0.01)
      return #log >= 6
    end, 30, "six turns")
    sels[1]:close(); sels[2]:close()
    assert.same({}, failures)
    for i = 2, #log do
      assert.not_equal(log[i - 1], log[i], "turns: " .. table.concat(log, " "))
    end
    assert.is_false(sels[1]:has_leadership())
  end)

  it("selector: requeue = false runs once; interrupt() and a lost node " ..
     "ask fn to stop", function()
    local path = H.path("selector")
    -- its fn fails: reported, and the turn ends as if fn had returned
    local logged = {}
    H.zklock.set_logger(function(level, msg)
      logged[#logged + 1] = level .. " " .. msg
    end)
    local once = zk2:leader_selector(path, function() error("turn fails") end,
      { requeue = false })
    assert(once:start())
    local ok, err = pcall(H.wait_until, function()
      zk2:dispatch(0.01); return once:turns() == 1 end, 10, "its one turn")
    H.zklock.set_logger(nil)
    assert(ok, err)
    assert.matches("^error leader selector function failed: .*turn fails",
      logged[1])
    assert.is_false(once:has_leadership())
    local seen, deleted = {}, false
    local s
    s = zk:leader_selector(path, function(sel)
      -- a cooperative job: works until asked to stop
      local node = assert(zk:mutex(path):holders())[1].node
      if not deleted then -- someone deletes our node: the turn must stop
        deleted = true
        local del = assert(zk2:_delete(node))
        assert(H.await(zk2, del, H.now() + 10) == "done")
      end
      H.wait_until(function()
        zk:dispatch(0.02)
        return sel:is_interrupted()
      end, 10, "the interruption")
      seen[#seen + 1] = sel:has_leadership()
      if #seen == 2 then sel:interrupt() end
    end, { id = "job" })
    assert(s:start())
    H.wait_until(function() zk:dispatch(0.01); return #seen >= 1 end, 20,
      "an interrupted turn")
    assert.is_false(seen[1]) -- our node went: no leadership
    s:close()
    assert.equal(1, once:turns())
    once:close()
  end)

  -- ---------------------------------------------------------------------
  -- processes of both runtimes: never two leaders at once

  local function run_latches(broken)
    local path = H.path("latch-procs")
    local gate = H.tmpname("gate")
    local procs, logs = {}, {}
    for i = 1, 4 do
      local rt = H.runtimes()[(i - 1) % 2 + 1]
      logs[i] = H.tmpname("log")
      local args = { "spec/workers/latch.lua", srv.connect_string, path,
        "p" .. i, logs[i], 4, 40, gate }
      if broken then args[#args + 1] = "broken" end
      procs[i] = H.spawn_lua(rt[1], rt[2], unpack(args))
    end
    H.write(gate, "go")
    local spans = {}
    for i, p in ipairs(procs) do
      local st = p:wait(120)
      local out = p:output()
      p:cleanup()
      assert.equal(0, st, "worker " .. i .. ": " .. tostring(out))
      for a, b in (H.read(logs[i]) or ""):gmatch("(%S+) (%S+)") do
        spans[#spans + 1] = { tonumber(a), tonumber(b) }
      end
      os.remove(logs[i])
    end
    os.remove(gate)
    return spans, H.max_overlap(spans)
  end

  it("4 processes (Lua 5.4 and LuaJIT) x 4 terms: one leader at a time, " ..
     "every term served", function()
    local spans, max = run_latches(false)
    assert.equal(16, #spans)
    assert.equal(1, max)
  end)

  it("the checker catches two leaders at once", function()
    local spans, max = run_latches(true)
    assert.equal(16, #spans)
    assert.is_true(max > 1, "leaders at once: " .. max)
  end)
end)
