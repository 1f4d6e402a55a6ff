-- make bench: every figure against one fresh ZooKeeper started here, with
-- production defaults (every write fsynced), in one run.  One line each:
--   <name> ops=<n> ops_per_s=<x> p50_us=<y> p99_us=<z>
-- Rounds alternate between programs so drift hits them alike.
local zklock = require "zklock"
local core = require "zklock.core"
local testing = require "zklock.testing"

local ROUNDS = tonumber(os.getenv("BENCH_ROUNDS")) or 3
local CYCLES = tonumber(os.getenv("BENCH_CYCLES")) or 1000
-- W1 in whole processes: more rounds than the rest (a process per program
-- per round, short ones); the whole-process check's cycles per process
local W1_ROUNDS = tonumber(os.getenv("BENCH_W1_ROUNDS")) or 5
local WHOLE_CYCLES = tonumber(os.getenv("BENCH_WHOLE_CYCLES")) or 1500
local C, M = 8, tonumber(os.getenv("BENCH_C8_CYCLES")) or 150
local SEM_CYCLES = tonumber(os.getenv("BENCH_SEM_CYCLES")) or 500
local LEASES = 2 -- the contended semaphore: C contenders, LEASES leases
local TMP = os.getenv("ZKLOCK_TEST_TMP") or "/tmp"

local function pct(lat, p)
  table.sort(lat)
  return lat[math.max(1, math.ceil(#lat * p))] or 0
end

local function line(name, ops, secs, lat)
  print(("%s ops=%d ops_per_s=%.1f p50_us=%.0f p99_us=%.0f"):format(
    name, ops, ops / secs, pct(lat, 0.5) * 1e6, pct(lat, 0.99) * 1e6))
  return ops / secs
end

local JAVA_CP = os.getenv("ZKLOCK_PEER_CP") -- the compiled Curator peer

-- BENCH_ONLY=w5 (make bench-memory): W5 alone
-- BENCH_ONLY=w1: W1 in whole processes and the whole-process check alone
local W5_ONLY = os.getenv("BENCH_ONLY") == "w5"
local W1_ONLY = os.getenv("BENCH_ONLY") == "w1"
local ok, err = true, nil
local srv = not W5_ONLY and testing.server({ tick_time = 2000 })
if srv then ok, err = pcall(function()
  local hosts = srv.connect_string
  -- W1 in whole processes, per runtime, beside the floor, Curator and
  -- kazoo (bench/w1_run.lua); then the whole-process check: start,
  -- connect, cycles, close, measured from outside (bench/whole.lua)
  local KAZOO = "/usr/bin/python3 spec/peers/kazoo_peer.py" -- (Debian's)
  local w1 = dofile("bench/w1_run.lua")(hosts, JAVA_CP, KAZOO, W1_ROUNDS,
    CYCLES)
  local floor_rate, w1rate = w1.floor, w1["lua5.4"]
  do
    local fh = assert(io.popen(("LUA_CPATH='./build/luajit/?.so;;' luajit " ..
      "bench/whole.lua %s %d %d"):format(hosts, WHOLE_CYCLES, ROUNDS)))
    io.write(fh:read("*a"))
    assert(fh:close(), "bench/whole.lua failed")
  end
  if W1_ONLY then return end
  local zk = assert(zklock.connect(hosts))
  -- TLS (docs/security.md): the same cycle over TLS, beside plaintext on
  -- the same server (Netty, both ports: TLS needs NettyServerCnxnFactory),
  -- rounds alternating
  do
    local plain_port = require("zklock.testing.core").free_port()
    local tsrv = testing.server({ tick_time = 2000, tls = true,
      config = { clientPort = plain_port, clientPortAddress = "127.0.0.1" } })
    local tok, terr = pcall(function()
      local zp = assert(zklock.connect("127.0.0.1:" .. plain_port))
      local zt = assert(zklock.connect(tsrv.connect_string,
                                       { tls = tsrv.tls }))
      local runs = {
        { name = "zklock.mutex.uncontended.netty", m = zp:mutex("/bench/wt"),
          ops = 0, secs = 0, lat = {} },
        { name = "zklock.mutex.uncontended.tls", m = zt:mutex("/bench/wt"),
          ops = 0, secs = 0, lat = {} },
      }
      for _, r in ipairs(runs) do assert(r.m:acquire()); r.m:release() end
      for _ = 1, ROUNDS do
        for _, r in ipairs(runs) do
          local t0 = core.now()
          for _ = 1, CYCLES do
            local a = core.now()
            assert(r.m:acquire())
            r.m:release()
            r.lat[#r.lat + 1] = core.now() - a
          end
          r.ops = r.ops + CYCLES
          r.secs = r.secs + core.now() - t0
        end
      end
      local plain = line(runs[1].name, runs[1].ops, runs[1].secs, runs[1].lat)
      local tls = line(runs[2].name, runs[2].ops, runs[2].secs, runs[2].lat)
      print(("ratio zklock.mutex.uncontended.tls/zklock.mutex.uncontended." ..
        "netty=%.2f"):format(tls / plain))
      print(("ratio zklock.mutex.uncontended.tls/zklock.mutex.uncontended." ..
        "lua5.4=%.2f"):format(tls / w1rate))
      zp:close()
      zt:close()
    end)
    tsrv:close()
    assert(tok, terr)
  end
  -- lock caching (linger): the same cycle on a lock whose released node
  -- lingers: no request at all while nobody else asks
  do
    local ml = zk:mutex("/bench/w1c", { linger = 600 })
    assert(ml:acquire()); ml:release()
    local n, lat = CYCLES * 10, {}
    local r0 = zk:stats().requests
    local t0 = core.now()
    for i = 1, n do
      local a = core.now()
      assert(ml:acquire())
      ml:release()
      lat[i] = core.now() - a
    end
    local rate = line("zklock.mutex.cached", n, core.now() - t0, lat)
    print(("ratio zklock.mutex.cached/floor.create_delete=%.1f " ..
      "requests_per_cycle=%.3f"):format(rate / floor_rate,
      (zk:stats().requests - r0) / n))
    -- what a contender pays: an acquire by another session against the
    -- lingering node (our watch sees it, our node goes, its wake-up), and
    -- against a free lock, alternating
    local other = assert(zklock.connect(hosts))
    local om = other:mutex("/bench/w1c")
    local vs, free = {}, {}
    for i = 1, 200 do
      assert(ml:acquire()); ml:release() -- lingers again
      local a = core.now()
      assert(om:acquire(10))
      vs[i] = core.now() - a
      om:release()
      a = core.now()
      assert(om:acquire(10))
      free[i] = core.now() - a
      om:release()
    end
    print(("zklock.mutex.cached.contender ops=200 acquire_p50_us=%.0f " ..
      "acquire_p99_us=%.0f free_lock_p50_us=%.0f free_lock_p99_us=%.0f")
      :format(pct(vs, 0.5) * 1e6, pct(vs, 0.99) * 1e6, pct(free, 0.5) * 1e6,
        pct(free, 0.99) * 1e6))
    other:close()
  end

  -- what zklock.metrics adds to a cycle: one acquire and one release
  -- recorded (docs/performance.md), beside the W1 cycle it rides on
  do
    local metrics = require "zklock.metrics"
    local N = 200000
    local t0 = core.now()
    for i = 1, N do
      metrics.acquire_ended(zk, "bench", 1e-4 + (i % 997) * 1e-6, nil)
      metrics.released(zk, "bench", 1e-3 + (i % 991) * 1e-6)
    end
    local us = (core.now() - t0) / N * 1e6
    print(("zklock.metrics.cost us_per_cycle=%.2f share_of_w1_cycle=%.2f%%")
      :format(us, us / (1e6 / w1rate) * 100))
  end
  zk:close()

  -- W2: C separate processes (sessions) on one mutex
  local lua = os.getenv("ZKLOCK_LUA") or "lua5.4"
  local function c8(name, command)
    local gate = ("%s/zklock-bench-gate-%d"):format(TMP, core.pid())
    local outs, done = {}, {}
    for i = 1, C do
      outs[i] = ("%s/zklock-bench-c8-%d-%d"):format(TMP, core.pid(), i)
      done[i] = outs[i] .. ".done"
      os.execute(("sh -c '%s; echo $? >%s' >/dev/null 2>&1 &"):format(
        command(gate, outs[i]), done[i]))
    end
    local g = assert(io.open(gate, "w")); g:close()
    local deadline = core.now() + 300
    for i = 1, C do
      while not io.open(done[i]) do
        assert(core.now() < deadline, name .. " workers did not finish")
        os.execute("sleep 0.1")
      end
    end
    local lat, first, last = {}, math.huge, 0
    for i = 1, C do
      local fh = assert(io.open(outs[i]))
      local a, b = fh:read("*n", "*n")
      assert(a, name .. " worker " .. i .. " failed")
      first, last = math.min(first, a), math.max(last, b)
      for v in fh:lines() do
        if tonumber(v) then lat[#lat + 1] = tonumber(v) end
      end
      fh:close()
      os.remove(outs[i]); os.remove(done[i])
    end
    os.remove(gate)
    return line(name, C * M, last - first, lat)
  end
  local z = c8("zklock.mutex.c8", function(gate, out)
    return ("%s bench/worker.lua %s /bench/c8 %d %s %s"):format(lua, hosts, M,
      gate, out)
  end)
  -- the same with lock caching: each worker's released node lingers
  -- (BENCH.md: at least 0.9 x the plain line)
  local zl = c8("zklock.mutex.c8.linger", function(gate, out)
    return ("%s bench/worker.lua %s /bench/c8l %d %s %s linger=600"):format(
      lua, hosts, M, gate, out)
  end)
  print(("ratio zklock.mutex.c8.linger/zklock.mutex.c8=%.2f (target >= 0.9)")
    :format(zl / z))
  if JAVA_CP then
    local cur = c8("curator.mutex.c8", function(gate, out)
      return ("java -cp %s CuratorPeer bench %s /bench/cc8 %d %s %s"):format(
        JAVA_CP, hosts, M, gate, out)
    end)
    print(("ratio zklock.mutex.c8/curator.mutex.c8=%.2f (target >= 2.5)")
      :format(z / cur))
  end
  local kz = c8("kazoo.mutex.c8", function(gate, out)
    return ("%s bench %s /bench/kc8 %d %s %s"):format(KAZOO, hosts, M, gate,
      out)
  end)
  print(("ratio zklock.mutex.c8/kazoo.mutex.c8=%.2f"):format(z / kz))
  print(("ratio zklock.mutex.c8/floor.create_delete=%.2f (target >= 1.0)")
    :format(z / floor_rate))

  -- guarded: C processes adding one to a counter node under the mutex,
  -- plain (acquire, get, set, release) and pipelined (the read with the
  -- acquire, the write with the release), and Curator (InterProcessMutex,
  -- getData, setData); the counter must end exact in each
  local function guarded(name, node, command)
    local check = assert(zklock.connect(hosts))
    local before = tonumber((check:get(node))) or 0
    local rate = c8(name, command)
    local after = tonumber((check:get(node))) or 0
    check:close()
    -- (each zklock worker adds one more before the gate: its warm-up)
    local expect = C * M + (name:find("^zklock") and C or 0)
    assert(after - before == expect, ("%s: the counter went from %d to %d, " ..
      "not by %d"):format(name, before, after, expect))
    return rate
  end
  local gp = guarded("zklock.guarded.plain", "/bench/gnode-p",
    function(gate, out)
      return ("%s bench/guarded_worker.lua %s /bench/gp /bench/gnode-p %d " ..
        "%s %s plain"):format(lua, hosts, M, gate, out)
    end)
  local gq = guarded("zklock.guarded.pipelined", "/bench/gnode-q",
    function(gate, out)
      return ("%s bench/guarded_worker.lua %s /bench/gq /bench/gnode-q %d " ..
        "%s %s pipelined"):format(lua, hosts, M, gate, out)
    end)
  print(("ratio zklock.guarded.pipelined/zklock.guarded.plain=%.2f " ..
    "(target >= 2)"):format(gq / gp))
  if JAVA_CP then
    local gc = guarded("curator.guarded", "/bench/gnode-c",
      function(gate, out)
        return ("java -cp %s CuratorPeer guarded %s /bench/gc /bench/gnode-c " ..
          "%d %s %s"):format(JAVA_CP, hosts, M, gate, out)
      end)
    print(("ratio zklock.guarded.pipelined/curator.guarded=%.2f " ..
      "(target >= 3)"):format(gq / gc))
  end
  local gk = guarded("kazoo.guarded", "/bench/gnode-k", function(gate, out)
    return ("%s guarded %s /bench/gk /bench/gnode-k %d %s %s"):format(KAZOO,
      hosts, M, gate, out)
  end)
  print(("ratio zklock.guarded.pipelined/kazoo.guarded=%.2f"):format(gq / gk))

  -- semaphores (Curator InterProcessSemaphoreV2's protocol on both sides):
  -- one client's lease cycle, then C contenders for LEASES leases
  zk = assert(zklock.connect(hosts))
  local sem = zk:semaphore("/bench/s1", LEASES)
  assert(sem:acquire()):release() -- parents exist, code is warm
  local s1 = { lat = {} }
  local t0 = core.now()
  for i = 1, SEM_CYCLES do
    local a = core.now()
    assert(sem:acquire()):release()
    s1.lat[i] = core.now() - a
  end
  local srate = line("zklock.semaphore.uncontended", SEM_CYCLES,
    core.now() - t0, s1.lat)
  zk:close()
  if JAVA_CP then
    local fh = assert(io.popen(("java -cp %s CuratorPeer sembench %s " ..
      "/bench/cs1 %d %d"):format(JAVA_CP, hosts, LEASES, SEM_CYCLES)))
    local out = fh:read("*a")
    fh:close()
    io.write(out)
    local cur = tonumber(out:match("ops_per_s=(%S+)"))
    if cur then
      print(("ratio zklock.semaphore.uncontended/curator.semaphore." ..
        "uncontended=%.2f"):format(srate / cur))
    end
  end
  local name = ("semaphore.c%dl%d"):format(C, LEASES)
  local zs = c8("zklock." .. name, function(gate, out)
    return ("%s bench/worker.lua %s /bench/sc8 %d %s %s %d"):format(lua, hosts,
      M, gate, out, LEASES)
  end)
  if JAVA_CP then
    local cur = c8("curator." .. name, function(gate, out)
      return ("java -cp %s CuratorPeer sembench %s /bench/csc8 %d %d %s %s")
        :format(JAVA_CP, hosts, LEASES, M, gate, out)
    end)
    print(("ratio zklock.%s/curator.%s=%.2f"):format(name, name, zs / cur))
  end

  -- leadership failover, after close() and after SIGKILL (bench/failover.lua)
  dofile("bench/failover.lua")(hosts, JAVA_CP, line, TMP)

  -- herd: 1,000 waiters on one mutex, in one process (cooperative
  -- coroutines on one session); per release, the watch notifications the
  -- session got, and the server's watch count (wchs) with all queued
  dofile("bench/herd.lua")(hosts, srv)
  -- lock cohorts: the same shape with the waiters in one cohort, and a
  -- remote contender's wait under sustained local load (bench/cohort.lua)
  dofile("bench/cohort.lua")(hosts)
end)
srv:close()
end
assert(ok, err)

-- W5: memory over 10^5 cycles (make bench; make bench-memory: 10^6 too),
-- one process per runtime.  A server of its own, without fsync
-- (forceSync=no): the client's memory does not depend on the disk.  Even
-- so 10^6 cycles take about 13 minutes per runtime here: make bench
-- (under 20 minutes) stops at 10^5.
if W1_ONLY then return end
local W5 = os.getenv("BENCH_W5_CYCLES") or "100000"
local fast = testing.server({ tick_time = 2000,
  config = { forceSync = "no" } })
ok, err = pcall(function()
  for _, rt in ipairs { { "lua5.4", "./build/lua5.4/?.so" },
      { "luajit", "./build/luajit/?.so" } } do
    local t0 = core.now()
    local fh = assert(io.popen(("LUA_CPATH='%s;;' %s bench/w5_worker.lua " ..
      "%s %s"):format(rt[2], rt[1], fast.connect_string, W5)))
    local first, last, n
    for l in fh:lines() do
      local c, rss, heap = l:match("cycles=(%d+) rss_kb=(%d+) lua_kb=(%d+)")
      if c then
        c, rss, heap = tonumber(c), tonumber(rss), tonumber(heap)
        print(("w5.%s cycles=%d rss_kb=%d lua_heap_kb=%d"):format(rt[1], c,
          rss, heap))
        first = first or rss
        last, n = rss, c
      end
    end
    assert(fh:close(), "w5 worker failed")
    print(("w5.%s rss_growth_kb=%d over %d cycles (%.1f s)"):format(rt[1],
      last - first, n - 10000, core.now() - t0))
  end
end)
fast:close()
assert(ok, err)
