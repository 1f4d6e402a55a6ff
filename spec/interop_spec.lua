-- Interoperability with the real peers, never assumed: Apache Curator 5.4
-- (Java, spec/peers/CuratorPeer.java, compiled at set-up) and kazoo 2.8
-- (Python, spec/peers/kazoo_peer.py) share lock paths with zklock on one
-- real server.  Every wait is bounded; every process is reaped, also when
-- a spec fails.  ZKLOCK_INTEROP_VERBOSE=1 prints what each run measured.
local H = require "spec.helpers"
local zklock = H.zklock
local now = H.now
local unpack = table.unpack or unpack

local PYTHON = "/usr/bin/python3" -- Debian's, where python3-kazoo lives
local KAZOO = "spec/peers/kazoo_peer.py"
-- a JVM per peer process: start fast, stay small
local JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xmx128m " ..
  "-XX:-UsePerfData"

local function note(fmt, ...)
  if os.getenv("ZKLOCK_INTEROP_VERBOSE") then
    io.stderr:write(("\n[interop] " .. fmt .. "\n"):format(...))
  end
end

-- Fail at once, with its output, if p has exited with a non-zero status.
local function check_alive(p, what)
  local st = p:status()
  if st and st ~= 0 then
    error(("%s exited with status %d:\n%s"):format(what, st, p:output()), 2)
  end
  return st
end

local function wait_ok(p, what, timeout)
  local st = p:wait(timeout or 60)
  assert(st == 0, ("%s exited with status %s:\n%s"):format(what,
    tostring(st), p:output()))
end

describe("interoperability with Curator 5.4 and kazoo 2.8", function()
  local srv, java
  local procs, clients = {}, {}

  local function track(p) procs[#procs + 1] = p; return p end
  local function curator(...) return track(H.spawn_cmd(java, ...)) end
  local function kazoo(...)
    return track(H.spawn_cmd("env -u LD_PRELOAD " .. PYTHON .. " " .. KAZOO,
      ...))
  end
  local function peer(kind, ...)
    if kind == "curator" then return curator(...) end
    return kazoo(...)
  end
  local function worker(script, ...) return track(H.spawn(script, ...)) end
  local function client()
    local zk = H.connect(srv, { session_timeout = 10 })
    clients[#clients + 1] = zk
    return zk
  end

  -- Live connections on the server: a worker connects before it waits at
  -- its gate, so this tells when all of them are there.
  local function connections()
    local m = srv:four_letter("mntr") or ""
    return tonumber(m:match("zk_num_alive_connections%s+(%d+)")) or 0
  end

  local function wait_connected(base, list)
    H.wait_until(function()
      for _, w in ipairs(list) do check_alive(w.p, w.who .. " worker") end
      return connections() >= base + #list
    end, 90, #list .. " workers to connect")
  end

  -- Read "[tag] start end" logs into intervals { s, e, who, tag }.
  local function intervals_of(list)
    local out = {}
    for _, w in ipairs(list) do
      local text = assert(H.read(w.log), "no log from a " .. w.who .. " worker")
      for line in text:gmatch("[^\n]+") do
        local tag, a, b = line:match("^(%u?)%s*(%S+) (%S+)$")
        assert(a, "bad log line from " .. w.who .. ": " .. line)
        out[#out + 1] = { s = tonumber(a), e = tonumber(b), who = w.who,
          tag = tag }
      end
      os.remove(w.log)
    end
    table.sort(out, function(x, y) return x.s < y.s end)
    return out
  end

  lazy_setup(function()
    srv = H.testing.server()
    local dir = H.tmpname("curator-peer")
    local fh = assert(io.popen(("sh spec/peers/build.sh '%s' 2>&1; echo rc=$?")
      :format(dir)))
    local out = fh:read("*a")
    fh:close()
    assert(out:match("rc=0%s*$"), "building the Curator peer failed:\n" .. out)
    local cp = (H.read(dir .. "/classpath") or ""):gsub("%s+$", "")
    -- (env -u LD_PRELOAD: a sanitizer preloaded into the specs is no
    -- business of the JVM's or Python's)
    java = ("env -u LD_PRELOAD java %s -cp '%s' CuratorPeer"):format(
      JAVA_OPTS, cp)
    local ok = os.execute(PYTHON .. " -c 'import kazoo.recipe.lock' 2>/dev/null")
    assert(ok == true or ok == 0, -- (LuaJIT without 5.2 compat: a status)
      PYTHON .. " cannot import kazoo: install python3-kazoo (make deps)")
  end)

  after_each(function()
    -- a spec that failed may leave peers running: ask them to end their
    -- sessions (SIGTERM: Curator's shutdown hook, kazoo's handler), then kill
    for _, p in ipairs(procs) do
      if not p:status() then
        p:kill("TERM")
        pcall(p.wait, p, 15)
      end
      p:cleanup()
    end
    procs = {}
    for _, zk in ipairs(clients) do zk:close() end
    clients = {}
  end)

  lazy_teardown(function()
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  -- N peer and M zklock processes run the shared-counter checker on one
  -- path, started together through a gate once all are connected.
  -- zklock workers alternate between Lua 5.4 and LuaJIT
  local function zkl_worker(i, script, ...)
    local rt = H.runtimes()[(i - 1) % 2 + 1]
    return track(H.spawn_lua(rt[1], rt[2], script, ...))
  end

  -- sem: Curator InterProcessSemaphoreMutex and zklock's semaphore_mutex
  -- instead of the mutexes
  local function run_counter(kind, n_peer, n_zkl, cycles, sem, zmode)
    local path = H.path("interop-" .. kind)
    local file = H.tmpname("counter")
    H.write(file, "0")
    local gate = H.tmpname("gate")
    local base = connections()
    local list = {}
    for _ = 1, n_peer do
      local log = H.tmpname("log")
      local args = { "counter", srv.connect_string, path, file, log, cycles,
        gate }
      if sem then args[#args + 1] = "semmutex" end
      list[#list + 1] = { who = kind, log = log,
        p = peer(kind, unpack(args)) }
    end
    for i = 1, n_zkl do
      local log = H.tmpname("log")
      list[#list + 1] = { who = "zklock", log = log,
        p = zkl_worker(i, "spec/workers/counter.lua", srv.connect_string,
          path, file, log, cycles, zmode or (sem and "semmutex" or "lock"),
          gate) }
    end
    wait_connected(base, list)
    local t0 = now()
    H.write(gate, "go")
    for _, w in ipairs(list) do wait_ok(w.p, w.who .. " counter worker", 180) end
    local elapsed = now() - t0
    local iv = intervals_of(list)
    local overlaps, cross, reach = 0, 0, -math.huge
    for i, x in ipairs(iv) do
      if x.s < reach then overlaps = overlaps + 1 end
      if x.e > reach then reach = x.e end
      if i > 1 and iv[i - 1].who ~= x.who then cross = cross + 1 end
    end
    local count = tonumber(H.read(file))
    os.remove(file)
    os.remove(gate)
    note("%s: %d+%d processes x %d cycles in %.2f s, %d hand-overs between " ..
      "%s and zklock", kind, n_peer, n_zkl, cycles, elapsed, cross, kind)
    return { count = count, overlaps = overlaps, n = #iv, cross = cross }
  end

  -- (a) and (b)
  for _, kind in ipairs { "curator", "kazoo" } do
    local what = kind == "curator" and "Curator InterProcessMutex" or
      'kazoo Lock(extra_lock_patterns=["-lock-"])'
    it(what .. " and zklock mutex exclude each other: 2+2 processes x 100 " ..
        "cycles, exact count, no overlap", function()
      local r = run_counter(kind, 2, 2, 100)
      assert.equal(400, r.n)
      assert.equal(0, r.overlaps)
      assert.equal(400, r.count)
      -- the run proves something only if the two kinds took turns
      assert.is_true(r.cross > 0, "zklock and " .. kind .. " never alternated")
    end)
  end

  -- lock caching: a zklock node that lingers after its release is an
  -- ordinary lock node to Curator; its waiter is a contender to us
  it("Curator InterProcessMutex and zklock mutexes whose nodes linger " ..
      "(lock caching) exclude each other: 2+2 processes x 100 cycles, " ..
      "exact count, no overlap", function()
    local r = run_counter("curator", 2, 2, 100, false, "linger")
    assert.equal(400, r.n)
    assert.equal(0, r.overlaps)
    assert.equal(400, r.count)
    assert.is_true(r.cross > 0, "zklock and Curator never alternated")
  end)

  -- Curator InterProcessSemaphoreV2's layout and protocol, shared
  it("Curator InterProcessSemaphoreMutex and zklock semaphore_mutex " ..
      "(Lua 5.4 and LuaJIT) exclude each other: 2+2 processes x 50 " ..
      "cycles, exact count, no overlap", function()
    local r = run_counter("curator", 2, 2, 50, true)
    assert.equal(200, r.n)
    assert.equal(0, r.overlaps)
    assert.equal(200, r.count)
    assert.is_true(r.cross > 0, "zklock and Curator never alternated")
  end)

  -- 2 Curator peers and 2 zklock workers (one per runtime) on one path,
  -- started together through a gate once all are connected.
  -- peer_args(i, log, gate) and worker_args(i, log, gate) give their
  -- arguments.  Returns the logged intervals (sorted by start) and the
  -- same as { s, e } spans.
  local function run_mixed(what, peer_args, worker_script, worker_args)
    local gate = H.tmpname("gate")
    local base = connections()
    local list = {}
    for i = 1, 2 do
      local log = H.tmpname("log")
      list[#list + 1] = { who = "curator", log = log,
        p = curator(unpack(peer_args(i, log, gate))) }
      log = H.tmpname("log")
      list[#list + 1] = { who = "zklock", log = log,
        p = zkl_worker(i, worker_script, unpack(worker_args(i, log, gate))) }
    end
    wait_connected(base, list)
    H.write(gate, "go")
    for _, w in ipairs(list) do
      wait_ok(w.p, w.who .. " " .. what .. " worker", 180)
    end
    os.remove(gate)
    local iv, spans = intervals_of(list), {}
    for i, x in ipairs(iv) do spans[i] = { x.s, x.e } end
    return iv, spans
  end

  it("Curator InterProcessSemaphoreV2 and zklock semaphores (Lua 5.4 and " ..
      "LuaJIT) share 2 leases: never more, and both kinds at once",
      function()
    local path, CYCLES = H.path("interop-sem"), 15
    local iv, spans = run_mixed("semaphore", function(_, log, gate)
      return { "sem", srv.connect_string, path, 2, log, CYCLES, 30, gate }
    end, "spec/workers/lease.lua", function(_, log, gate)
      return { srv.connect_string, path, 2, log, CYCLES, gate, 0.03 }
    end)
    local mixed = false
    for i, x in ipairs(iv) do
      for j = 1, i - 1 do -- (sorted by start)
        local y = iv[j]
        if y.e > x.s and y.who ~= x.who then mixed = true end
      end
    end
    local max = H.max_overlap(spans)
    assert.equal(4 * CYCLES, #iv) -- every acquirer was served
    assert.is_true(max <= 2, "leases held at once: " .. max)
    assert.equal(2, max)
    assert.is_true(mixed, "a Curator and a zklock lease were never held " ..
      "at the same time")
  end)

  it("Curator LeaderLatch and zklock latches (Lua 5.4 and LuaJIT) on one " ..
      "path: one leader at a time, both kinds lead", function()
    local path, TERMS = H.path("interop-latch"), 4
    local iv, spans = run_mixed("latch", function(i, log, gate)
      return { "latch", srv.connect_string, path, "curator-" .. i, log,
        TERMS, 40, gate }
    end, "spec/workers/latch.lua", function(i, log, gate)
      return { srv.connect_string, path, "zklock-" .. i, log, TERMS, 40,
        gate }
    end)
    local kinds = {}
    for _, x in ipairs(iv) do kinds[x.who] = true end
    assert.equal(4 * TERMS, #iv) -- every term was served
    assert.equal(1, H.max_overlap(spans))
    assert.is_true(kinds.curator and kinds.zklock)
  end)

  it("Curator LeaderSelector and zklock selectors (Lua 5.4 and LuaJIT) on " ..
      "one path: one turn at a time, leadership alternates", function()
    local path, TURNS = H.path("interop-selector"), 4
    local iv, spans = run_mixed("selector", function(i, log, gate)
      return { "selector", srv.connect_string, path, "curator-" .. i, log,
        TURNS, 40, gate }
    end, "spec/workers/selector.lua", function(i, log, gate)
      return { srv.connect_string, path, "zklock-" .. i, log, TURNS, 40,
        gate }
    end)
    local cross = 0
    for i = 2, #iv do
      if iv[i - 1].who ~= iv[i].who then cross = cross + 1 end
    end
    assert.is_true(#iv >= 4 * TURNS) -- every participant had its turns
    assert.equal(1, H.max_overlap(spans))
    assert.is_true(cross > 0, "Curator and zklock never alternated")
  end)

  -- (c)
  local NODE = {
    curator = "/_c_%x+%-%x+%-%x+%-%x+%-%x+%-lock%-%d%d%d%d%d%d%d%d%d%d$",
    kazoo = "/" .. ("%x"):rep(32) .. "__lock__%d%d%d%d%d%d%d%d%d%d$",
  }

  for _, kind in ipairs { "curator", "kazoo" } do
    it(kind .. " holder blocks zklock: acquire(0.5) times out, and a queued " ..
        "zklock waiter gets the lock when it releases", function()
      local path = H.path("interop-hold")
      local ready, release = H.tmpname("ready"), H.tmpname("release")
      local p = peer(kind, "hold", srv.connect_string, path, ready, release)
      local node = H.wait_until(function()
        check_alive(p, kind .. " holder")
        local s = H.read(ready)
        return s and s ~= "" and s
      end, 60, kind .. " to hold the lock")
      assert.matches(NODE[kind], node)
      local zk = client()
      local m = zk:mutex(path)
      local t = now()
      local ok, _, code = m:acquire(0.5)
      assert.is_nil(ok)
      assert.equal("timeout", code)
      assert.is_true(now() - t >= 0.5)
      assert.same({ node }, m:participants()) -- our node went with the timeout
      -- another zklock process queues behind the peer's node...
      local result = H.tmpname("result")
      local w = worker("spec/workers/acquire.lua", srv.connect_string, path,
        result, 10, 60)
      H.wait_until(function()
        check_alive(w, "zklock waiter")
        return #m:participants() == 2
      end, 30, "the zklock waiter to queue")
      assert.equal(node, m:participants()[1])
      assert.is_nil(H.read(result))
      -- ...and gets the lock once the peer lets go
      H.write(release, "go")
      H.wait_until(function()
        check_alive(w, "zklock waiter")
        return H.read(result)
      end, 30, "the zklock waiter to get the lock")
      assert.equal("held", H.read(result))
      wait_ok(p, kind .. " holder")
      wait_ok(w, "zklock waiter")
      os.remove(ready); os.remove(release); os.remove(result)
    end)

    it("zklock holder blocks a " .. kind .. " waiter until it releases",
        function()
      local path = H.path("interop-wait")
      local zk = client()
      local m = zk:mutex(path)
      assert(m:acquire(5))
      local file, log, gate = H.tmpname("counter"), H.tmpname("log"),
        H.tmpname("gate")
      H.write(file, "0")
      H.write(gate, "go")
      local p = peer(kind, "counter", srv.connect_string, path, file, log, 1,
        gate)
      H.wait_until(function()
        check_alive(p, kind .. " waiter")
        return #m:participants() == 2
      end, 60, kind .. " to queue behind zklock")
      local parts = m:participants()
      assert.equal(m:node(), parts[1])
      assert.matches(NODE[kind], parts[2])
      assert.is_nil(p:status())
      assert.equal("0", H.read(file))
      local released_at = now()
      assert.is_true(m:release())
      wait_ok(p, kind .. " waiter")
      assert.equal("1", H.read(file))
      -- same clock (CLOCK_MONOTONIC) on both sides: it entered after us
      local entered = tonumber(H.read(log):match("^(%S+)"))
      assert.is_true(entered >= released_at, ("%s entered at %.6f, before " ..
        "zklock released at %.6f"):format(kind, entered, released_at))
      note("%s entered %.1f ms after zklock's release", kind,
        (entered - released_at) * 1000)
      os.remove(file); os.remove(log); os.remove(gate)
    end)
  end

  -- (d)
  it("Curator InterProcessReadWriteLock and zklock rwlock: writers exclude " ..
      "everyone, readers share", function()
    local path = H.path("interop-rw")
    local gate = H.tmpname("gate")
    local CYCLES = { read = 15, write = 8 }
    local HOLDMS = 20
    local base = connections()
    local list = {}
    for _, mode in ipairs { "read", "read", "write", "write" } do
      local log = H.tmpname("log")
      list[#list + 1] = { who = "curator", log = log,
        p = curator("rw", srv.connect_string, path, mode, log, CYCLES[mode],
          HOLDMS, gate) }
      log = H.tmpname("log")
      list[#list + 1] = { who = "zklock", log = log,
        p = worker("spec/workers/interop_rw.lua", srv.connect_string, path,
          mode, log, CYCLES[mode], HOLDMS, gate) }
    end
    wait_connected(base, list)
    local t0 = now()
    H.write(gate, "go")
    for _, w in ipairs(list) do wait_ok(w.p, w.who .. " rw worker", 180) end
    local elapsed = now() - t0
    local iv = intervals_of(list)
    local expect = 4 * CYCLES.read + 4 * CYCLES.write
    assert.equal(expect, #iv)
    local bad, rr, rr_mixed = {}, 0, 0
    for i = 1, #iv do
      for j = i + 1, #iv do
        local x, y = iv[i], iv[j]
        if y.s < x.e and x.s < y.e then
          if x.tag == "W" or y.tag == "W" then
            bad[#bad + 1] = ("%s %s [%.6f,%.6f] / %s %s [%.6f,%.6f]"):format(
              x.who, x.tag, x.s, x.e, y.who, y.tag, y.s, y.e)
          else
            rr = rr + 1
            if x.who ~= y.who then rr_mixed = rr_mixed + 1 end
          end
        end
      end
    end
    os.remove(gate)
    note("rw: %d intervals in %.2f s, %d R/R overlaps (%d Curator/zklock)",
      #iv, elapsed, rr, rr_mixed)
    assert.equal(0, #bad, ("a writer overlapped, %d times: %s"):format(#bad,
      table.concat(bad, "; ", 1, math.min(#bad, 5))))
    assert.is_true(rr > 0, "no two readers ever held the lock together")
  end)

  -- (e)
  it("Curator's Revoker reaches a zklock holder's on_revoke callback",
      function()
    local zk = client()
    local path = H.path("interop-revoke")
    local m = zk:mutex(path)
    assert(m:acquire(5))
    local fired = {}
    m:on_revoke(function(l) fired[#fired + 1] = l end)
    local p = curator("revoke", srv.connect_string, m:node())
    local deadline = now() + 30
    while #fired == 0 do
      check_alive(p, "Curator revoker")
      assert(now() < deadline, "on_revoke never ran")
      zk:dispatch(0.2)
    end
    assert.equal(1, #fired)
    assert.equal(m, fired[1])
    assert.is_true(m:is_held()) -- revocation asks; the holder decides
    assert.is_true(m:release())
    wait_ok(p, "Curator revoker")
  end)

  -- (issue 33: a lease is a hold; before, nobody watched a lease node)
  it("Curator's Revoker reaches a zklock lease's on_revoke callback",
      function()
    local zk = client()
    local sem = zk:semaphore(H.path("interop-revoke-sem"), 2)
    local other = assert(sem:acquire(5))
    local lease = assert(sem:acquire(5))
    local fired = {}
    sem:on_revoke(function(l)
      fired[#fired + 1] = l
      assert.is_true(l:release())
    end)
    local p = curator("revoke", srv.connect_string, lease:node())
    local deadline = now() + 30
    while #fired == 0 do
      check_alive(p, "Curator revoker")
      assert(now() < deadline, "on_revoke never ran")
      zk:dispatch(0.2)
    end
    assert.equal(1, #fired)
    assert.equal(lease, fired[1])
    assert.is_false(lease:is_held())
    assert.is_true(other:is_held()) -- only the lease asked
    assert.equal("lock_lost", select(3, lease:release()))
    assert.is_true(other:release())
    wait_ok(p, "Curator revoker")
  end)

  it("zklock.revoke makes a revocable Curator holder release", function()
    local path = H.path("interop-revoke")
    local ready, done = H.tmpname("ready"), H.tmpname("done")
    local p = curator("hold-revocable", srv.connect_string, path, ready, done)
    local node = H.wait_until(function()
      check_alive(p, "Curator holder")
      local s = H.read(ready)
      return s and s ~= "" and s
    end, 60, "Curator to hold the lock")
    local zk = client()
    local m = zk:mutex(path)
    assert.same({ node }, m:participants())
    -- zklock names the Curator holder: its node, and Curator's own data
    local h = assert(m:holders())
    assert.equal(1, #h)
    assert.equal(node, h[1].node)
    assert.is_true(h[1].token > 0)
    assert.matches("^0x%x+$", h[1].session)
    assert.is_nil(h[1].id:find("^zklock "))
    assert.equal(1, zklock.revoke(zk, path))
    H.wait_until(function()
      check_alive(p, "Curator holder")
      return H.read(done)
    end, 30, "Curator to release on revocation")
    assert.equal("revoked", H.read(done))
    wait_ok(p, "Curator holder")
    assert(m:acquire(5))
    assert.same({ m:node() }, m:participants())
    assert.is_true(m:release())
    os.remove(ready); os.remove(done)
  end)
end)
