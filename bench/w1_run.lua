-- W1 in whole processes (issue 34, docs/performance.md), for bench/run.lua:
-- rounds of one fresh process per program, in rotated order so that drift
-- hits them alike: the C floor (build/floor), the lock protocol's floor
-- (build/floor_list: create, the listing piped behind it, delete, in C with
-- the C client zklock builds), zklock under Lua 5.4 and
-- under LuaJIT, cohorts on (the default) and off (bench/w1.lua), Curator
-- (CuratorPeer bench) and kazoo (kazoo_peer.py bench).  Each process warms
-- up, times its loop and prints its line with cpu_us_per_cycle (its own
-- CPU over the loop); here they are added up: the rate over all rounds,
-- p50 the median of the rounds' medians, p99 the highest round's, the CPU,
-- requests and notifications per cycle over all cycles.  Then the ratios
-- and their targets (BENCH.md): rates over all rounds; CPU per cycle as
-- the median of the rounds' ratios (each round runs both programs; one
-- round disturbed by other work on the machine moves a ratio of sums).
--   dofile("bench/w1_run.lua")(hosts, java_cp, kazoo, rounds, cycles)
--     -> { floor = rate, ["lua5.4"] = rate, luajit = rate,
--          curator = rate|nil, kazoo = rate|nil }
-- BENCH_ONLY=w1 runs this alone (bench/run.lua).
local RUNTIMES = {
  { rt = "lua5.4", cpath = "./build/lua5.4/?.so;;", cpu_target = 3 },
  { rt = "luajit", cpath = "./build/luajit/?.so;;", cpu_target = 2 },
}
local W1 = "zklock.mutex.uncontended."
-- the per-cycle fields added up over the rounds (weighted by cycles)
local PER_CYCLE = { "cpu_us_per_cycle", "lua_thread_cpu_us_per_cycle",
  "requests_per_cycle", "notifications_per_cycle", "on_cpu_us_per_cycle",
  "off_cpu_us_per_cycle", "on_lua_thread_us_per_cycle",
  "off_lua_thread_us_per_cycle" }

local function median(t)
  table.sort(t)
  return t[math.max(1, math.ceil(#t / 2))]
end

return function(hosts, java_cp, kazoo, rounds, cycles)
  local progs = {
    { name = "floor.create_delete",
      cmd = ("./build/floor %s %d"):format(hosts, cycles) },
    { name = "floor.create_list_delete",
      cmd = ("./build/floor_list %s %d list"):format(hosts, cycles) },
  }
  for _, r in ipairs(RUNTIMES) do
    for _, off in ipairs { false, true } do
      progs[#progs + 1] = {
        name = W1 .. r.rt .. (off and ".cohort_off" or ""),
        cmd = ("LUA_CPATH='%s' %s bench/w1.lua %s %d path=/bench/w1-%s%s")
          :format(r.cpath, r.rt, hosts, cycles, r.rt,
            off and "-off cohort=off" or ""),
      }
    end
    -- cohorts on and off taking turns in one process (w1.lua ab=1)
    progs[#progs + 1] = { name = W1 .. r.rt .. ".cohort_ab", ab = true,
      cmd = ("LUA_CPATH='%s' %s bench/w1.lua %s %d path=/bench/w1-%s-ab " ..
        "ab=1"):format(r.cpath, r.rt, hosts, cycles, r.rt) }
  end
  if java_cp then
    progs[#progs + 1] = { name = "curator.mutex.uncontended",
      cmd = ("java -cp %s CuratorPeer bench %s /bench/cw1 %d"):format(java_cp,
        hosts, cycles) }
  end
  progs[#progs + 1] = { name = "kazoo.mutex.uncontended",
    cmd = ("%s bench %s /bench/kw1 %d"):format(kazoo, hosts, cycles) }

  for _, p in ipairs(progs) do
    p.ops, p.secs, p.p50, p.p99, p.sum, p.cpu = 0, 0, {}, 0, {}, {}
    p.abr = {}
  end
  for r = 1, rounds do
    for k = 0, #progs - 1 do
      local p = progs[(r - 1 + k) % #progs + 1]
      local fh = assert(io.popen(p.cmd .. " 2>&1"))
      local out = fh:read("*a")
      fh:close()
      local l = out:match("[^\n]*" .. p.name:gsub("%.", "%%.") ..
        " ops=[^\n]*")
      local n = l and tonumber(l:match(" ops=(%d+)"))
      if not n then
        if not p.name:find("^zklock") and not p.name:find("^floor") then
          -- a peer that failed: said, and left out
          io.write(("bench: %s failed: %s\n"):format(p.name, out))
          p.failed = true
        else
          error(p.name .. " failed: " .. out)
        end
      else
        local f = {}
        for k2, v in l:gmatch("([%w_]+)=(%S+)") do f[k2] = tonumber(v) end
        p.ops = p.ops + n
        if p.ab then
          p.abr[r] = f.on_cpu_us_per_cycle / f.off_cpu_us_per_cycle
        else
          p.secs = p.secs + n / f.ops_per_s
          p.p50[#p.p50 + 1] = f.p50_us
          p.p99 = math.max(p.p99, f.p99_us)
          p.cpu[r] = f.cpu_us_per_cycle
        end
        for _, k2 in ipairs(PER_CYCLE) do
          if f[k2] then p.sum[k2] = (p.sum[k2] or 0) + f[k2] * n end
        end
      end
    end
  end

  -- CPU: the median over the rounds of a's over b's
  local function cpu_ratio(a, b)
    local t = {}
    for r = 1, rounds do
      if a.cpu[r] and b.cpu[r] then t[#t + 1] = a.cpu[r] / b.cpu[r] end
    end
    return median(t)
  end

  local by = {}
  for _, p in ipairs(progs) do
    if p.ops > 0 then
      local extra = {}
      for _, k2 in ipairs(PER_CYCLE) do
        if p.sum[k2] then
          p[k2] = p.sum[k2] / p.ops
          extra[#extra + 1] = (k2:find("_us_per_cycle$") and " %s=%.1f"
            or " %s=%.3f"):format(k2, p[k2])
        end
      end
      if p.ab then
        print(("%s ops=%d%s"):format(p.name, p.ops, table.concat(extra)))
      else
        p.rate = p.ops / p.secs
        print(("%s ops=%d ops_per_s=%.1f p50_us=%.0f p99_us=%.0f%s"):format(
          p.name, p.ops, p.rate, median(p.p50), p.p99, table.concat(extra)))
      end
      by[p.name] = p
    end
  end

  local floor = by["floor.create_delete"]
  local proto = by["floor.create_list_delete"]
  local cur, kz = by["curator.mutex.uncontended"], by["kazoo.mutex.uncontended"]
  local res = { floor = floor.rate, curator = cur and cur.rate,
    kazoo = kz and kz.rate }
  for _, r in ipairs(RUNTIMES) do
    local on, off = by[W1 .. r.rt], by[W1 .. r.rt .. ".cohort_off"]
    res[r.rt] = on.rate
    print(("ratio %s/floor.create_delete=%.2f (target >= 0.95)"):format(
      on.name, on.rate / floor.rate))
    -- (the protocol's own floor: what the three requests cost in C)
    print(("ratio %s/floor.create_list_delete=%.2f cpu=%.2f"):format(
      on.name, on.rate / proto.rate, cpu_ratio(on, proto)))
    print(("ratio cpu %s/floor.create_delete=%.2f (target <= %d)"):format(
      on.name, cpu_ratio(on, floor), r.cpu_target))
    print(("ratio cpu %s/%s=%.3f (target <= 1.05)"):format(on.name, off.name,
      cpu_ratio(on, off)))
    local ab = by[W1 .. r.rt .. ".cohort_ab"]
    if ab then
      print(("ratio cpu %s on/off=%.3f lua_thread on/off=%.3f (target <= " ..
        "1.05; one process, blocks alternating)"):format(ab.name,
        median(ab.abr), ab.on_lua_thread_us_per_cycle /
        ab.off_lua_thread_us_per_cycle))
    end
    print(("counts %s requests_per_cycle=%.3f (target = 3) " ..
      "notifications_per_cycle=%.3f (target = 0)"):format(on.name,
      on.requests_per_cycle, on.notifications_per_cycle))
    for _, peer in ipairs { cur or false, kz or false } do
      if peer then
        print(("ratio %s/%s=%.2f (target >= 1.8)"):format(on.name, peer.name,
          on.rate / peer.rate))
      end
    end
  end
  print(("ratio floor.create_list_delete/floor.create_delete=%.2f cpu=%.2f")
    :format(proto.rate / floor.rate, cpu_ratio(proto, floor)))
  for _, peer in ipairs { cur or false, kz or false } do
    if peer and peer.cpu_us_per_cycle then
      print(("ratio cpu %s/floor.create_delete=%.2f"):format(peer.name,
        cpu_ratio(peer, floor)))
    end
  end
  return res
end
