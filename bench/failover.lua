-- Leadership failover (loaded by bench/run.lua): how long from the
-- leader's end to the next participant leading, after a clean close() and
-- after a SIGKILL (then the server must first expire the dead session),
-- for zklock's leader latch and Curator's LeaderLatch, on the same server,
-- with the same session timeout.  Median of REPS each.
local core = require "zklock.core"
local tcore = require "zklock.testing.core"

return function(hosts, java_cp, line, tmp)
  local REPS = tonumber(os.getenv("BENCH_FAILOVER_REPS")) or 5
  local ST = 4 -- session timeout, seconds (the bench server's minimum)
  local lua = os.getenv("ZKLOCK_LUA") or "lua5.4"
  local seq = 0

  local function read(f)
    local fh = io.open(f)
    if not fh then return "" end
    local s = fh:read("*a")
    fh:close()
    return s
  end

  local function wait_for(f, pattern, what)
    local deadline = core.now() + 120
    while true do
      local v = read(f):match(pattern)
      if v then return v end
      assert(core.now() < deadline, what .. " never came")
      tcore.sleep(0.005)
    end
  end

  -- a participant process; returns its out file, release file and pid
  local function start(kind, path)
    seq = seq + 1
    local out = ("%s/zklock-fo-%d-%d.out"):format(tmp, core.pid(), seq)
    local rel = out .. ".release"
    local cmd
    if kind == "zklock" then
      cmd = ("%s bench/latch_worker.lua %s %s %s %s %d"):format(lua, hosts,
        path, out, rel, ST)
    else
      cmd = ("java -Dpeer.session.ms=%d -cp %s CuratorPeer latchbench %s %s " ..
        "%s %s"):format(ST * 1000, java_cp, hosts, path, out, rel)
    end
    local fh = assert(io.popen(("sh -c 'exec %s' >/dev/null 2>&1 & echo $!")
      :format(cmd)))
    local pid = tonumber(fh:read("*l"))
    fh:close()
    return { out = out, rel = rel, pid = pid }
  end

  local function finish(p)
    local f = io.open(p.rel, "w"); f:close()
    local deadline = core.now() + 30
    while os.execute("kill -0 " .. p.pid .. " 2>/dev/null") == true or
        os.execute("kill -0 " .. p.pid .. " 2>/dev/null") == 0 do
      if core.now() > deadline then os.execute("kill -9 " .. p.pid); break end
      tcore.sleep(0.01)
    end
    os.remove(p.out); os.remove(p.rel)
  end

  -- one failover: the leader ends (close or kill), the follower leads
  local function once(kind, how)
    local path = ("/bench/failover/%s-%d"):format(kind, seq)
    local leader = start(kind, path)
    wait_for(leader.out, "leading (%S+)", "the first leader")
    local follower = start(kind, path)
    wait_for(follower.out, "joined", "the follower's node")
    local t_end
    if how == "close" then
      local f = io.open(leader.rel, "w"); f:close()
      t_end = tonumber(wait_for(leader.out, "closed (%S+)", "the close"))
    else
      t_end = core.now()
      os.execute("kill -9 " .. leader.pid)
    end
    local t_lead = tonumber(wait_for(follower.out, "leading (%S+)",
      "the follower's leadership"))
    finish(follower)
    if how == "close" then finish(leader) else
      os.remove(leader.out); os.remove(leader.rel)
    end
    return t_lead - t_end
  end

  for _, how in ipairs { "close", "kill" } do
    for _, kind in ipairs { "zklock", "curator" } do
      if kind == "zklock" or java_cp then
        local lat, sum = {}, 0
        for i = 1, REPS do
          lat[i] = once(kind, how)
          sum = sum + lat[i]
        end
        line(("%s.latch.failover.%s"):format(kind, how), REPS, sum, lat)
      end
    end
  end
end
