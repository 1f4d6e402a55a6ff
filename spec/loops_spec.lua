-- Waits in any Lua event loop: zk:fd() and zk:step(), and the adapters
-- zklock.cqueues, zklock.luv and zklock.copas (docs/api.md, "Waiting in
-- an event loop").  Each loop the runtime has (Debian's copas is for Lua
-- 5.1/5.2: LuaJIT only) gets the same specs; the exclusion checker runs
-- one process per loop.
local H = require "spec.helpers"
local zklock = require "zklock"
local loops = require "spec.loops"

local N = 4 -- coroutines waiting on one lock

-- A hold of `path` by another client, in a coroutine of the main thread:
-- give() releases it from wherever it is called (a loop's timer).
local function hold_elsewhere(srv, path)
  local other = H.connect(srv)
  local m = other:mutex(path)
  local co = coroutine.create(function()
    assert(m:acquire(5))
    coroutine.yield()
    assert(m:release())
  end)
  assert(coroutine.resume(co))
  return {
    client = other,
    give = function()
      local ok, err = coroutine.resume(co)
      assert(ok, err)
    end,
  }
end

local function queued(zk, path)
  return #H.children(zk, path)
end

-- The waiters of client zk on lock `path`, holder aside (`other` lists
-- the nodes): each its own node, or queued in the lock's cohort
-- (docs/design.md, section 16) in front of one.
local function waiters(zk, other, path)
  return math.max(queued(other, path) - 1, zk:mutex(path):local_waiters())
end

for _, name in ipairs(loops.available()) do
  describe("waits in " .. name, function()
    local srv

    lazy_setup(function() srv = H.testing.server() end)
    lazy_teardown(function()
      if srv then H.assert_no_orphans(srv); srv:close() end
    end)

    it(N .. " coroutines wait on a lock held elsewhere while a timer of " ..
       "the loop ticks (and collects garbage); each takes it once it is " ..
       "given up, told its place first (on_queued)", function()
      local path = H.path(name .. "-tick")
      local L = loops.new(name)
      local zk = assert(L.connect(srv.connect_string))
      local holder = hold_elsewhere(srv, path)
      local got, ticks, given_at = {}, 0, nil
      local told = {} -- (on_queued: once each, a place behind the holder)
      for i = 1, N do
        L.spawn(function()
          local m = zk:mutex(path)
          assert(m:acquire(20, { on_queued = function(p)
            assert.is_nil(told[i], "told twice")
            told[i] = p
          end }))
          assert.is_true(told[i] >= 1, "told " .. tostring(told[i]))
          local t = ticks
          assert(m:release())
          got[#got + 1] = { i = i, ticks = t }
        end)
      end
      -- the timer gives the lock up once every coroutine is queued and it
      -- has ticked a few times while they waited: were the waits blocking
      -- the thread, it would never tick and nobody would get the lock
      L.every(0.01, function()
        ticks = ticks + 1
        -- (a suspended coroutine may have no reference but zklock's: a
        -- collection must not take it, nor its lock, away)
        collectgarbage()
        if not given_at and ticks >= 5 and
            waiters(zk, holder.client, path) == N then
          given_at = ticks
          holder.give()
        end
      end)
      assert.is_true(L.run_until(function() return #got == N end, 30),
        "the waits did not end: " .. #got .. " of " .. N .. ", ticks " ..
        ticks)
      assert.is_true(given_at >= 5)
      for _, g in ipairs(got) do assert.is_true(g.ticks >= given_at) end
      assert.equal(N, #told)
      assert.equal(0, queued(holder.client, path))
      zk:close()
      L.finish()
      holder.client:close()
    end)

    it("a timed-out wait returns timeout (woken by the core at its " ..
       "deadline) and leaves the queue at once", function()
      local path = H.path(name .. "-timeout")
      local L = loops.new(name)
      local zk = assert(L.connect(srv.connect_string))
      local holder = hold_elsewhere(srv, path)
      local res, ticks
      ticks = 0
      L.spawn(function()
        local m = zk:mutex(path)
        res = { m:acquire(0.3) }
        res.queued = queued(holder.client, path) -- right after the return
      end)
      L.every(0.01, function() ticks = ticks + 1 end)
      assert.is_true(L.run_until(function() return res ~= nil end, 20))
      assert.is_nil(res[1])
      assert.equal("timeout", res[3])
      assert.equal(1, res.queued) -- the holder's node only
      assert.is_true(ticks > 0)
      holder.give()
      zk:close()
      L.finish()
      holder.client:close()
    end)

    if name == "cqueues" then
      it("cq:loop() returns once the client is closed (its watch ends)",
         function()
        local cqueues = require "cqueues"
        local cq = cqueues.new()
        local zk = assert(require("zklock.cqueues").connect(cq,
          srv.connect_string))
        local m = zk:mutex(H.path("cq-loop"))
        cq:wrap(function()
          assert(m:acquire(5))
          assert(m:release())
          zk:close()
        end)
        assert(cq:loop(20))
        assert.is_true(cq:empty(), "a task of zklock's still runs")
      end)
    end

    if name == "luv" and _VERSION == "Lua 5.4" then
      it("coroutine.close() of a waiting coroutine (Lua 5.4) takes its " ..
         "node out of the queue at once; the loop skips it after", function()
        local path = H.path(name .. "-abandon")
        local L = loops.new(name)
        local zk = assert(L.connect(srv.connect_string))
        local holder = hold_elsewhere(srv, path)
        local co = coroutine.create(function()
          local m = zk:mutex(path)
          m:acquire(20)
          error("not reached: the coroutine was closed")
        end)
        assert(coroutine.resume(co))
        assert.is_true(L.run_until(function()
          return queued(holder.client, path) == 2
        end, 20))
        assert.equal(1, require("zklock.loop").stats(zk).waiting)
        -- "at once": without a collection, nor the lock's coming
        collectgarbage("stop")
        assert(coroutine.close(co))
        local gone = L.run_until(function()
          return queued(holder.client, path) == 1
        end, 5)
        collectgarbage("restart")
        assert.is_true(gone, "the closed wait's node stayed")
        -- the hold moves on; the closed wait's record is dropped unrun
        holder.give()
        local m2 = zk:mutex(path)
        local got
        L.spawn(function()
          local held = m2:acquire(20)
          m2:release()
          got = held
        end)
        assert.is_true(L.run_until(function() return got ~= nil end, 20))
        assert.equal(0, require("zklock.loop").stats(zk).waiting)
        zk:close()
        L.finish()
        holder.client:close()
      end)
    end

    it("a callback that waits (on_revoke releasing) runs in a task of " ..
       "its own: the loop's other waits go on", function()
      local path = H.path(name .. "-revoke")
      local L = loops.new(name)
      local zk = assert(L.connect(srv.connect_string))
      local other = H.connect(srv)
      local revoked, got, held = false, false, false
      L.spawn(function()
        local m = zk:mutex(path)
        m:on_revoke(function(lock)
          assert(lock:release()) -- (a wait: the delete's answer)
          revoked = true
        end)
        assert(m:acquire(10))
        held = true
        -- a second coroutine queued behind the revocable hold
        L.spawn(function()
          local m2 = zk:mutex(path)
          assert(m2:acquire(10))
          got = true
          assert(m2:release())
        end)
      end)
      local asked = false
      L.every(0.01, function()
        if not asked and held and waiters(zk, other, path) == 1 then
          asked = true
          assert.equal(1, zklock.revoke(other, path))
        end
      end)
      assert.is_true(L.run_until(function() return revoked and got end, 20),
        "revoked " .. tostring(revoked) .. ", got " .. tostring(got))
      zk:close()
      L.finish()
      other:close()
    end)

    it("an extended hold outlives its first limit and ends at its new " ..
       "one: the core wakes the loop for on_lost, no deadline of the " ..
       "loop's own", function()
      local path = H.path(name .. "-extend")
      local L = loops.new(name)
      local zk = assert(L.connect(srv.connect_string))
      local stats = require("zklock.loop").stats
      local m = zk:mutex(path)
      local t_ext, deadline, held_mid, ended_at, lost_at
      m:on_lost(function() lost_at = H.now() end)
      L.spawn(function()
        assert(m:acquire(5, { max_hold = 0.5 }))
        t_ext = H.now()
        deadline = stats(zk).deadline
        assert.is_true(m:extend(2))
        assert.equal(deadline, stats(zk).deadline)
        L.sleep(1) -- (copas: a busy wait; C ends the hold either way)
        held_mid = m:is_held()
        repeat L.sleep(0.05) until not m:is_held()
        ended_at = H.now()
      end)
      assert.is_true(L.run_until(function()
        return ended_at ~= nil and lost_at ~= nil
      end, 20), "the extended hold's end")
      assert.is_true(held_mid, "held past its first limit")
      assert.is_true(ended_at - t_ext >= 2 - 0.05)
      assert.is_true(lost_at - t_ext >= 2 - 0.05)
      zk:close() -- (C deleted its node as it ended)
      L.finish()
    end)

    it("zk:close() ends the waits (closed) and the loop's watch", function()
      local path = H.path(name .. "-close")
      local L = loops.new(name)
      local zk = assert(L.connect(srv.connect_string))
      local holder = hold_elsewhere(srv, path)
      local codes = {}
      for _ = 1, 2 do
        L.spawn(function()
          local m = zk:mutex(path)
          local _, _, code = m:acquire(20)
          codes[#codes + 1] = code
        end)
      end
      local closed = false
      L.every(0.01, function()
        if not closed and waiters(zk, holder.client, path) == 2 then
          closed = true
          zk:close()
        end
      end)
      assert.is_true(L.run_until(function() return #codes == 2 end, 20))
      assert.same({ "closed", "closed" }, codes)
      L.finish()
      holder.give()
      holder.client:close()
    end)

    it("a wait outside the loop's coroutines blocks the thread, as " ..
       "without the adapter", function()
      local path = H.path(name .. "-outside")
      local L = loops.new(name)
      local zk = assert(L.connect(srv.connect_string))
      local m = zk:mutex(path)
      assert(m:acquire(5)) -- (the main coroutine: a plain blocking wait)
      assert(m:release())
      local _, _, code = zk:get(path .. "-none", 2)
      assert.equal("no_node", code)
      zk:close()
      L.finish()
    end)
  end)
end

describe("zk:fd() and zk:step() in a loop of one's own", function()
  local srv

  lazy_setup(function() srv = H.testing.server() end)
  lazy_teardown(function()
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  it("a select loop: the descriptor is readable when a waiting " ..
     "coroutine's lock moved, and zk:step() resumes it", function()
    local socket = require "socket"
    local loop = require "zklock.loop"
    local path = H.path("own-loop")
    local zk = H.connect(srv)
    local fd = zk:fd()
    assert.is_number(fd)
    assert.equal(fd, zk:fd())
    -- the smallest driver: coroutines of our own, the descriptor watched
    -- by the select below (watch has nothing to do)
    local driver = {
      current = function()
        local co, main = coroutine.running()
        if co and not main then return co end
      end,
      suspend = function() coroutine.yield() end,
      resume = function(co) assert(coroutine.resume(co)) end,
      watch = function() return function() end end,
      spawn = function(fn) assert(coroutine.resume(coroutine.create(fn))) end,
    }
    assert.equal(zk, loop.attach(zk, driver))
    assert.has_error(function() loop.attach(zk, driver) end,
      "bad argument #1 to 'attach' (this client is attached already)")
    local holder = hold_elsewhere(srv, path)
    local got = false
    local co = coroutine.create(function()
      local m = zk:mutex(path)
      assert(m:acquire(20))
      got = true
      assert(m:release())
    end)
    assert(coroutine.resume(co))
    local readable = { getfd = function() return fd end,
      dirty = function() return false end }
    local turns, deadline = 0, H.now() + 20
    while coroutine.status(co) ~= "dead" do
      assert(H.now() < deadline, "the wait did not end")
      local r = socket.select({ readable }, nil, 0.05)
      turns = turns + 1
      if r[1] then zk:step() end
      if turns == 3 then holder.give() end -- (the waiter is queued)
    end
    assert.is_true(got)
    assert.is_true(turns >= 3)
    zk:close()
    holder.client:close()
  end)

  it("bad arguments are refused clearly", function()
    local loop = require "zklock.loop"
    local zk = H.connect(srv)
    assert.has_error(function() loop.attach(zk, {}) end,
      "bad argument #2 to 'attach' (driver.current must be a function)")
    assert.has_error(function() loop.attach(zk, 1) end,
      "bad argument #2 to 'attach' (driver table expected, got number)")
    assert.has_error(function() require("zklock.cqueues").connect(1, "x") end)
    zk:close()
    assert.has_error(function() zk:fd() end)
  end)
end)

describe("exclusion across processes, one per event loop", function()
  local srv

  lazy_setup(function() srv = H.testing.server() end)
  lazy_teardown(function()
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  it("cqueues, luv and copas processes, two coroutines each: exact " ..
     "count, no overlap, and every loop's timer ticked", function()
    local CYCLES = 25
    local path = H.path("loops-excl")
    local file = H.tmpname("counter")
    H.write(file, "0")
    local gate = H.tmpname("gate")
    local jobs = {}
    local have = {}
    for _, n in ipairs(loops.available()) do have[n] = true end
    local runs = { "cqueues", "luv", "copas" }
    for _, name in ipairs(runs) do
      local log = H.tmpname("log")
      local p
      if have[name] then
        p = H.spawn("spec/workers/loop_counter.lua", srv.connect_string,
          path, file, log, CYCLES, name, gate)
      else -- (copas under Lua 5.4: Debian's runs on LuaJIT)
        p = H.spawn_lua("luajit", "./build/luajit/?.so;;",
          "spec/workers/loop_counter.lua", srv.connect_string, path, file,
          log, CYCLES, name, gate)
      end
      jobs[#jobs + 1] = { p = p, log = log, name = name }
    end
    H.write(gate, "go")
    local intervals = {}
    for _, j in ipairs(jobs) do
      local status = j.p:wait(120)
      local out = j.p:output()
      assert(status == 0, j.name .. " worker failed: " .. out)
      assert.is_truthy(tonumber(out:match("ticks=(%d+)")) > 0)
      j.p:cleanup()
      for a, b in H.read(j.log):gmatch("(%S+) (%S+)") do
        intervals[#intervals + 1] = { tonumber(a), tonumber(b) }
      end
      os.remove(j.log)
    end
    assert.equal(#runs * 2 * CYCLES, #intervals)
    assert.equal(1, H.max_overlap(intervals))
    assert.equal(#runs * 2 * CYCLES, tonumber(H.read(file)))
    os.remove(file)
    os.remove(gate)
  end)
end)
