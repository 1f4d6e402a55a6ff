-- Holds on TTL nodes (docs/api.md, "Holds that outlive the process"): the
-- hold outlives its process and session; the same participant id takes
-- it back; not renewed, the server expires it and the next waiter gets
-- it; the exclusion checker across restarts.  Real processes, SIGKILLed.
local H = require "spec.helpers"
local zklock = H.zklock

-- How often the server looks for expired TTL nodes (its default, 60 s,
-- would make every expiry here a minute late).
local CHECK = 0.2

describe("a hold on a TTL node", function()
  local srv, zk
  local setup, teardown = H.fixture(function(s, a) srv, zk = s, a end, nil,
    { ttl_check = CHECK })
  lazy_setup(setup)
  lazy_teardown(teardown)

  local function holder(path, id, ttl, after)
    local ready = H.tmpname("ready")
    local p = H.spawn("spec/workers/ttl_holder.lua", srv.connect_string,
      path, id, ttl, ready, after or "hold")
    H.wait_until(function() return H.read(ready) end, 30,
      "the holder's hold")
    local token, waited = H.read(ready):match("^(%S+) (%S+)")
    return p, token, tonumber(waited)
  end

  it("outlives its process and session; the same id takes it back at " ..
     "once, the same node (which an ephemeral node would not survive)",
     function()
    local path = H.path("ttl")
    local p, token = holder(path, "deploy-job", 60)
    p:kill("KILL")
    assert.is_not_nil(p:wait(30))
    -- the holder's session (2 s) ends; its node stays, and a waiter
    -- keeps waiting (an ephemeral node would have gone with the session)
    local m = zk:mutex(path)
    local ok, _, code = m:acquire(5)
    assert.is_nil(ok)
    assert.equal("timeout", code)
    assert.is_true(zklock.check_token(zk, path, token))
    -- a process with the same id: the same node, held at once
    local p2, token2 = holder(path, "deploy-job", 60, "release")
    assert.equal(token, token2)
    assert.equal(0, p2:wait(30), p2:output())
    -- released: the waiter's turn
    assert(m:acquire(10))
    assert.is_false((zklock.check_token(zk, path, token)))
    assert.is_true(m:release())
    assert.same({}, H.lock_nodes(zk, path))
  end)

  it("not renewed, is expired by the server after its TTL: the next " ..
     "waiter gets it then, not before", function()
    local path = H.path("ttl")
    local ttl = 3
    local p = holder(path, "crashing-job", ttl)
    local m = zk:mutex(path)
    local killed = H.now()
    p:kill("KILL")
    assert.is_not_nil(p:wait(30))
    assert(m:acquire(30))
    -- its last renewal was at most a third of the TTL before the kill,
    -- and the server expires it a TTL after that
    assert.is_true(H.now() - killed >= ttl * 2 / 3 - 0.05,
      ("got it %.2fs after the kill"):format(H.now() - killed))
    assert.is_true(m:is_held())
    assert.is_true(m:release())
  end)

  it("renewed while held and while queued: holds and waits outlast the " ..
     "TTL many times over", function()
    local path = H.path("ttl")
    local a = H.connect(srv, { session_timeout = 5, id = "a" })
    local b = H.connect(srv, { session_timeout = 5, id = "b" })
    finally(function() a:close(); b:close() end)
    local ma = a:mutex(path, { ttl = 1.5 })
    local mb = b:mutex(path, { ttl = 1.5 })
    assert(ma:acquire(5))
    local token = ma:token()
    -- b queues behind a: its own TTL node lives while it waits
    local ok, _, code = mb:acquire(4.5)
    assert.is_nil(ok)
    assert.equal("timeout", code)
    assert.is_true(ma:is_held())
    assert.equal(token, ma:token())
    assert.is_true(zklock.check_token(b, path, token))
    assert.is_true(ma:release())
    assert(mb:acquire(5))
    assert.is_true(mb:release())
  end)

  it("ephemeral and TTL nodes queue as one", function()
    local path = H.path("ttl")
    local t = H.connect(srv, { id = "t" })
    finally(function() t:close() end)
    local first = zk:mutex(path)
    local mt = t:mutex(path, { ttl = 30 })
    local me = t:mutex(path, { cohort = false })
    local places, order = {}, {}
    local holding = false
    local function take(m, name, after) -- (once after() is true)
      return function()
        while not after() do coroutine.yield() end
        assert(m:acquire(20, { on_queued = function(n) places[name] = n end }))
        order[#order + 1] = name
        assert.is_true(m:release())
      end
    end
    -- a holder; a TTL waiter, then an ephemeral one; once both are
    -- queued, the holder lets go
    H.run(t, { function()
      assert(first:acquire(5))
      holding = true
      while not (places.ttl and places.ephemeral) do coroutine.yield() end
      assert.is_true(first:release())
    end, take(mt, "ttl", function() return holding end),
      take(me, "ephemeral", function() return places.ttl end) }, 30)
    assert.same({ ttl = 1, ephemeral = 2 }, places)
    assert.same({ "ttl", "ephemeral" }, order)
  end)

  it("bad input and what does not go with ttl raise, naming it", function()
    for _, bad in ipairs({ 0, -1, "1", 1e10 }) do
      assert.has_error(function() zk:mutex("/p", { ttl = bad }) end,
        "bad argument #2 to 'mutex' (ttl must be a number of seconds > 0)")
    end
    assert.has_error(function() zk:semaphore_mutex("/p", { ttl = 5 }) end,
      "bad argument #2 to 'semaphore_mutex' (only a mutex holds on a TTL " ..
      "node (ttl): see docs/api.md, Holds that outlive the process)")
    assert.has_error(function() zk:mutex("/p", { ttl = 5, linger = 1 }) end,
      "bad argument #2 to 'mutex' (a lock with ttl neither lingers nor " ..
      "queues in a cohort (ttl with linger): see docs/api.md, Holds that " ..
      "outlive the process)")
    assert.has_error(function() zk:mutex("/p", { ttl = 5, cohort = true })
      end)
    local m = zk:mutex(H.path("ttl"), { ttl = 5 })
    assert.has_error(function() m:on_revoke(function() end) end)
  end)

  it("zk:close() deletes its TTL nodes; without an id, nothing is taken " ..
     "back, not even by another client of the process", function()
    local path = H.path("ttl")
    local c1, c2 = H.connect(srv), H.connect(srv) -- (no id: the default)
    local m1 = c1:mutex(path, { ttl = 30 })
    assert(m1:acquire(5))
    local m2 = c2:mutex(path, { ttl = 30 })
    local ok, _, code = m2:acquire(0.5)
    assert.is_nil(ok)
    assert.equal("timeout", code)
    c1:close()
    assert(m2:acquire(5)) -- (c1's node went with its close)
    assert.is_true(m2:release())
    c2:close()
    assert.same({}, H.lock_nodes(zk, path))
  end)

  it("several acquirers of one client and id queue a node each (slot " ..
     "0, slot 1), in order", function()
    local path = H.path("ttl")
    local c = H.connect(srv, { session_timeout = 5, id = "many" })
    finally(function() c:close() end)
    local m1, m2 = c:mutex(path, { ttl = 30 }), c:mutex(path, { ttl = 30 })
    assert(m1:acquire(5))
    local ok, _, code = m2:acquire(0.5) -- (queued behind m1: its own node)
    assert.is_nil(ok)
    assert.equal("timeout", code)
    local first = m1:node()
    assert.is_true(m1:release())
    -- the same again, m1 and m2 in two coroutines: m2 told 1
    local places, second, holding = {}, nil, false
    H.run(c, { function()
      assert(m1:acquire(5))
      holding = true
      while not places[1] do coroutine.yield() end
      assert.is_true(m1:release())
    end, function()
      while not holding do coroutine.yield() end
      assert(m2:acquire(10, { on_queued = function(n) places[1] = n end }))
      assert.is_true(m2:is_held())
      second = m2:node()
      assert.is_true(m2:release())
    end }, 20)
    assert.same({ 1 }, places)
    assert.are_not.equal(first:match("^(.*%-lock%-)"),
      second:match("^(.*%-lock%-)"))
    -- slot 0 is free again: m1 takes a node named as its first was
    assert(m1:acquire(5))
    assert.equal(first:match("^(.*%-lock%-)"), m1:node():match("^(.*%-lock%-)"))
    assert.is_true(m1:release())
  end)
end)

describe("a server without TTL nodes", function()
  it("refuses the first acquire with ttl, saying what it needs", function()
    local srv = H.testing.server({ ttl_nodes = false })
    local zk = H.connect(srv)
    finally(function() zk:close(); srv:close() end)
    local m = zk:mutex(H.path("ttl"), { ttl = 5 })
    local ok, msg = m:acquire(5)
    assert.is_nil(ok)
    assert.matches("zookeeper.extendedTypesEnabled=true", msg, 1, true)
    -- an ephemeral lock on the same server works
    local e = zk:mutex(H.path("ttl"))
    assert(e:acquire(5))
    assert.is_true(e:release())
  end)
end)

describe("the exclusion checker across restarts", function()
  local WORKERS, CYCLES = 3, 40

  it(("%d processes x %d cycles on TTL holds, each SIGKILLed once while " ..
      "holding and started again with its id: exact count, no overlap")
      :format(WORKERS, CYCLES), function()
    local srv = H.testing.server({ ttl_check = CHECK })
    finally(function() srv:close() end)
    local path = H.path("ttl-excl")
    local file, gate = H.tmpname("counter"), H.tmpname("gate")
    H.write(file, "0")
    local procs, logs, marks, kill_at = {}, {}, {}, {}
    local function start(i, resume_t0)
      procs[i] = H.spawn("spec/workers/ttl_counter.lua", srv.connect_string,
        path, file, logs[i], CYCLES, "ttl-worker-" .. i, 30, gate,
        kill_at[i], marks[i], resume_t0)
    end
    for i = 1, WORKERS do
      logs[i], marks[i] = H.tmpname("log"), H.tmpname("mark")
      kill_at[i] = 5 + 10 * i -- (cycles 15, 25, 35)
      start(i)
    end
    H.write(gate, "go")
    -- each worker, once it holds at its kill cycle: killed, started again
    local restarted = {}
    for _ = 1, WORKERS do
      local i, mark
      H.wait_until(function()
        for k = 1, WORKERS do
          mark = not restarted[k] and H.read(marks[k])
          if mark then i = k; return true end
        end
      end, 120, "a worker holding at its kill cycle")
      procs[i]:kill("KILL")
      assert.is_not_nil(procs[i]:wait(30))
      restarted[i] = true
      start(i, mark:match("^(%S+)"))
    end
    for i, p in ipairs(procs) do
      assert.equal(0, p:wait(180), "worker " .. i .. ": " .. p:output())
    end
    local intervals = H.intervals(logs)
    assert.equal(WORKERS * CYCLES, #intervals)
    assert.equal(1, H.max_overlap(intervals))
    assert.equal(WORKERS * CYCLES, tonumber(H.read(file)))
  end)
end)
