-- The chaos run's checker of nginx workers killed with SIGKILL
-- (spec/chaos/run_ngx.lua, spec/chaos/chaos_ngx.lua): a killed worker's
-- holds end with its session, within the session timeout and a bound
-- (ZooKeeper expires sessions on its tick); nothing of it stays; its
-- master starts another worker, which connects a session of its own (in
-- init_worker: nothing of the killed one's passes to it).  And the
-- holds it had begun (O) but never ended (no H) are given the end they
-- had, the last is_held() true it logged (OT), so that the other
-- checkers weigh them like any hold.
return function(K, U)
  local list, proc_of = U.list, U.proc_of

  --- Holds begun by a killed worker: H records made from O and OT, added
  -- to logs.H (rel "killed"); and what cannot be, as violations.
  function K.close_killed(logs)
    local v, ended, last, kills = {}, {}, {}, {}
    for _, h in ipairs(list(logs, "H")) do ended[h.id] = true end
    for _, o in ipairs(list(logs, "OT")) do
      if not last[o.id] or o.t > last[o.id] then last[o.id] = o.t end
    end
    for _, k in ipairs(list(logs, "K")) do kills[k.who] = k end
    logs.H = logs.H or {}
    for _, o in ipairs(list(logs, "O")) do
      if not ended[o.id] then
        local k = kills[proc_of(o.task)]
        if not k or k.t < o.t0 then
          v[#v + 1] = { t = o.t0, text = ("%s's hold of %s begun at %.3f " ..
            "never ended (no release logged: a Lua error? nginx's " ..
            "error.log), and its process was not killed"):format(o.task,
            o.target, o.t0) }
        end
        local t1 = math.max(o.t1, last[o.id] or -1)
        logs.H[#logs.H + 1] = { kind = "mutex", target = o.target,
          task = o.task, ts = -1, t0 = o.t0, t1 = t1, lost = -1, flip = 0,
          token = o.token, mh = 0, rel_t = -1, rel_e = -1, rel = "killed",
          pass = o.pass, node = o.node, cl = "-", id = o.id }
      end
    end
    return v
  end

  --- Each kill (K): the worker's nodes (listed once it was dead, then
  -- again until none was left) gone within `bound` seconds of its death
  -- (its session timeout and ZooKeeper's tick), and its master's new
  -- worker connected with a session of its own.
  function K.killed(logs, bound)
    local v, why = {}, {}
    for _, w in ipairs(list(logs, "KW")) do why[w.who] = w.why end
    for _, k in ipairs(list(logs, "K")) do
      local function say(what)
        v[#v + 1] = { t = k.t, text = ("ngx worker %s killed at %.3f: %s")
          :format(k.who, k.t, what) }
      end
      local nodes = k.held + k.queued
      if k.held < 0 then
        say("its nodes could not be listed (nothing verified)")
      elseif k.gone < 0 then
        say(("its %d node(s) still there long after"):format(nodes))
      elseif k.gone - k.t > bound then
        say(("its %d node(s) went %.2f s after, past %.2f s"):format(nodes,
          k.gone - k.t, bound))
      end
      if k.fresh == 0 then
        say("its master's new worker never connected a session of its own"
          .. (why[k.who] and (" (" .. why[k.who] .. ")") or ""))
      end
    end
    return v
  end
end
