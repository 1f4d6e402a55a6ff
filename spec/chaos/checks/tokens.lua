-- The chaos run's checker of zklock.check_token (issue 36; docs/testing.md,
-- "The chaos run"): the driver's token checker process asks, about once
-- a second, whether the token of a mutex's or semaphore mutex's holder it
-- listed, and the one it listed before on that target, hold (T records:
-- target, token, t_s, t_e, res).  An answer is checked against the holds
-- the workers believed: a hold believed through the whole check (from its
-- grant to its last is_held() true, its node not deleted by the chaos
-- actor by then) held the node ZooKeeper saw first, so "true" for another
-- token, or "false" for its own, is untrue.  (A passed or cached hold
-- shares its node's token: the answer is the node's.)  Any other answer
-- must be one that says the ensemble could not be asked: timeout,
-- connection_loss, session_expired (a `closed` from the driver's open
-- client is a hole).
return function(K, U)
  local list = U.list

  local UNANSWERED = { timeout = true, connection_loss = true,
    session_expired = true }

  function K.tokens(logs)
    local v = {}
    local deleted = {} -- node -> when the chaos actor deleted it first
    for _, x in ipairs(list(logs, "X")) do
      if not deleted[x.node] or x.t < deleted[x.node] then
        deleted[x.node] = x.t
      end
    end
    local holds = {} -- target -> its mutex and semaphore mutex holds
    for _, h in ipairs(list(logs, "H")) do
      if (h.kind == "mutex" or h.kind == "smutex") and h.t1 >= h.t0 then
        holds[h.target] = holds[h.target] or {}
        table.insert(holds[h.target], h)
      end
    end
    for _, r in ipairs(list(logs, "T")) do
      if r.res == "true" or r.res == "false" then
        for _, h in ipairs(holds[r.target] or {}) do
          local gone = deleted[h.node]
          if h.t0 <= r.t_s and h.t1 >= r.t_e and
              not (gone and gone <= r.t_e) then
            local own = h.token == r.token
            if (r.res == "true") ~= own then
              v[#v + 1] = { t = r.t_s, text = ("check_token(%s, %.0f) " ..
                "answered %s at [%.3f, %.3f], while %s held it with " ..
                "token %.0f [%.3f, %.3f]"):format(r.target, r.token, r.res,
                r.t_s, r.t_e, h.task, h.token, h.t0, h.t1) }
              break
            end
          end
        end
      elseif not UNANSWERED[r.res] then
        v[#v + 1] = { t = r.t_s, text = ("check_token(%s, %.0f) answered " ..
          "%s at %.3f: not an answer of an open client whose ensemble " ..
          "could not be asked"):format(r.target, r.token, r.res, r.t_s) }
      end
    end
    return v
  end
end
