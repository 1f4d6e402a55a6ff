-- The chaos run's faults (spec/chaos/run.lua; what each does: its
-- C.FAULTS comment, docs/testing.md, "The chaos run"): each a function
-- that injects one, drawn from the run's fault stream, and returns who it
-- struck ("all", a worker's index, an nginx worker's pid, what a
-- reconfiguration moved) or false when it could not strike.
return function(x)
  local H, prof, rf, members, cl = x.H, x.prof, x.rf, x.members, x.cl
  local proxies, st, live, spawn, slots, procs = x.proxies, x.st, x.live,
    x.spawn, x.slots, x.procs
  -- a member's role (srvr's Mode), or nil when it does not answer
  local function mode(m)
    return (m:four_letter("srvr", 2) or ""):match("Mode: (%a+)")
  end
  return {
    kill = function()
      local i = rf:int(1, prof.workers)
      local p = live(i)
      if p:status() then return false end
      p:kill("KILL")
      p.killed = true
      local q = spawn(i, p.gen + 1)
      table.insert(slots[i], q)
      procs[#procs + 1] = q
      return tostring(i)
    end,
    stop = function()
      local i = rf:int(1, prof.workers)
      local p = live(i)
      if p:status() then return false end
      p:kill("STOP")
      H.nap(st + 1.5)
      p:kill("CONT")
      return tostring(i)
    end,
    pause = function()
      local m = members[rf:int(1, #members)]
      m:pause()
      H.nap(st + 1)
      m:resume()
      return "all"
    end,
    restart = function()
      local m = members[rf:int(1, #members)]
      if cl then
        local leader = cl:leader(10)
        if m == leader then return false end
      end
      m:restart(30)
      return "all"
    end,
    reconfig = function()
      if not (cl and prof.reconfig) then return false end
      local leader = cl:leader(10)
      if not leader then return false end
      local followers, observers = {}, {}
      for _, m in ipairs(members) do
        local md = mode(m)
        if md == "observer" then observers[#observers + 1] = m
        elseif m ~= leader then followers[#followers + 1] = m end
      end
      local what = rf:pick({ "follower", "leader", "observer", "set" })
      local out
      if what == "follower" then out = { followers[rf:int(1, #followers)] }
      elseif what == "leader" then out = { leader }
      elseif what == "observer" and #observers > 0 then
        out = { observers[1] }
      else -- the voting set, one member at a time (a new one first)
        what = "set"
        out = followers
        out[#out + 1] = leader
      end
      for _, m in ipairs(out) do
        assert(cl:add({ observer = what == "observer" }))
        assert(cl:remove(m))
        -- (the nginx instances' new workers connect to the members now)
        if x.ngx then x.RN.hosts(H, x.ngx, cl.connect_string) end
      end
      return what
    end,
    kill_leader = function()
      if not cl then return false end
      local leader = cl:leader(10)
      if not leader then return false end
      os.execute(("kill -KILL %d 2>/dev/null"):format(leader:pid()))
      H.nap(1)
      leader:stop(1)
      leader:start(30)
      return "all"
    end,
    -- (a minority of the members cut off from the rest by a packet
    -- filter, zklock.testing's cluster:cut: docs/testing.md, "Partitions";
    -- up to (voters - 1) / 2 voters, the observer perhaps with them)
    partition = function()
      if not (cl and cl.net) then return false end
      local voters, observers = {}, {}
      for _, m in ipairs(members) do
        local md = mode(m)
        local list = md == "observer" and observers or voters
        list[#list + 1] = m
      end
      local out = {}
      for _ = 1, rf:int(1, math.max(1, math.floor((#voters - 1) / 2))) do
        out[#out + 1] = table.remove(voters, rf:int(1, #voters))
      end
      if #observers > 0 and rf:int(0, 1) == 1 then
        out[#out + 1] = observers[1]
      end
      assert(cl:cut(out))
      H.nap(st * 2 + 1)
      cl:heal()
      return "all"
    end,
    cut = function()
      for _, p in ipairs(proxies) do p:cut() end
      return "all"
    end,
    expire = function()
      for _, p in ipairs(proxies) do p:stall(true, true) end
      H.nap(st * 2 + 1)
      for _, p in ipairs(proxies) do p:stall(false, false) end
      return "all"
    end,
    -- (an nginx worker killed: spec/chaos/run_ngx.lua)
    nginx_kill = function()
      if not x.ngx then return false end
      return x.RN.kill(H, x.ngx, rf, x.direct, x.E, st)
    end,
  }
end
