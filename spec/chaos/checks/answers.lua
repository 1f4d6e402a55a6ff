-- The chaos run's checker of answers (spec/chaos/check.lua; its findings
-- count under the contract checker): an error code is a claim about the
-- world (docs/api.md, "Codes"), checked against the logs.
--
--   closed            the client was closed: its close (C) was logged
--                     before the answer;
--   session_expired   the client saw its session expire during the call:
--                     the expiries it counted just after the answer (e1)
--                     exceed its renewals at the start (e0);
--   timeout           the deadline passed: t_e - t_s >= timeout (one
--                     clock: every worker logs CLOCK_MONOTONIC, zklock's
--                     deadlines are read on it too);
--   lock_lost from a write (a release with a write, with_lock's update,
--   fenced_set; a read/write lock's fenced writes; a lease's, a semaphore
--   mutex's): nothing written, so the value it would have written (each
--   names its write) is never read, by anyone, ever; and so for the
--   write of a with_lock update under a semaphore whose fn ran again (a
--   conflict: another lease's holder wrote first, "refused").
--
-- A call that raised, was abandoned or answered another code claims
-- nothing here.  Each finding says what was answered and what the logs
-- say instead.
return function(K, U)
  local list = U.list

  -- the shared client ("P/0") of the process of a task ("g1/3.0") or a
  -- process tag ("3.0")
  local function shared_client(who)
    local p = who and who:match("(%d+%.%d+)$")
    return p and p .. "/0"
  end

  local function client_of(rec, who)
    if rec.cl and rec.cl ~= "" and rec.cl ~= "-" then return rec.cl end
    return shared_client(who)
  end

  -- the writes (W's call) and reads (G's how) in words
  local CALLS = { release = "the write with the release",
    update = "with_lock's update", fenced = "fenced_set" }
  local READS = { read = "read with a later acquire", get = "read by a " ..
    "later holder", update = "read by a later with_lock update",
    final = "the counter's final value" }

  -- Every answer that makes a claim checked here: { what, who, cl, t_s,
  -- t_e, code, timeout, e0, e1 }.
  local function answers(logs)
    local out = {}
    local function add(a) out[#out + 1] = a end
    for _, a in ipairs(list(logs, "A")) do
      if a.res == "fail" then
        add({ what = a.kind .. " acquire of " .. a.target, who = a.task,
          cl = client_of(a, a.task), t_s = a.t_s, t_e = a.t_e,
          code = a.code, timeout = a.timeout, e0 = a.e0, e1 = a.e1 })
      end
    end
    for _, b in ipairs(list(logs, "BW")) do
      add({ what = "barrier wait of " .. b.target, who = b.task,
        cl = shared_client(b.task), t_s = b.t_s, t_e = b.t_e, code = b.res,
        timeout = b.timeout, e0 = b.e0, e1 = b.e1 })
    end
    for kind, name in pairs({ DE = "enter", DL = "leave" }) do
      for _, d in ipairs(list(logs, kind)) do
        add({ what = ("double barrier %s of %s round %s"):format(name,
          d.target, tostring(d.k)), who = d.p, cl = shared_client(d.p),
          t_s = d.t_s, t_e = d.t_e, code = d.res, timeout = d.timeout,
          e0 = d.e0, e1 = d.e1 })
      end
    end
    return out
  end

  -- the first close of each client, and each client's state events
  local function clients(logs)
    local closed, states = {}, {}
    for _, c in ipairs(list(logs, "C")) do
      if not closed[c.cl] or c.t < closed[c.cl] then closed[c.cl] = c.t end
    end
    for _, z in ipairs(list(logs, "Z")) do
      states[z.cl] = states[z.cl] or {}
      table.insert(states[z.cl], z)
    end
    return closed, states
  end

  -- what client cl last said of its session at or before t (for the text)
  local function last_state(states, cl, t)
    local last
    for _, z in ipairs(states[cl] or {}) do
      if z.t <= t and (not last or z.t >= last.t) then last = z end
    end
    return last and ("%s at %.3f"):format(last.state, last.t) or "none"
  end

  local function not_closed(closed, states, cl, t)
    return ("its client %s %s (its last state: %s)"):format(tostring(cl),
      closed[cl] and ("closed only at %.3f"):format(closed[cl]) or
      "never closed", last_state(states, cl, t))
  end

  --- Untrue answers: `closed`, `session_expired`, `timeout`, and
  -- `lock_lost` from a write, as above.  `tol`: seconds a timeout may
  -- fall short by (the logs' rounding; 1 ms).
  function K.answers(logs, tol)
    tol = tol or 0.001
    local v = {}
    local function flag(t, text)
      v[#v + 1] = { t = t, text = "untrue answer: " .. text }
    end
    local closed, states = clients(logs)
    for _, a in ipairs(answers(logs)) do
      local head = ("%s by %s answered %s at %.3f"):format(a.what,
        tostring(a.who), tostring(a.code), a.t_e)
      if a.code == "closed" and not (closed[a.cl] and
          closed[a.cl] <= a.t_e) then
        flag(a.t_e, head .. ", " .. not_closed(closed, states, a.cl, a.t_e))
      elseif a.code == "session_expired" and a.e0 and a.e1 and
          a.e0 >= 0 and a.e1 >= 0 and a.e1 <= a.e0 then
        flag(a.t_e, ("%s, its client %s saw no expiry during the call " ..
          "(renewals %d at the start, expiries %d at the answer; last " ..
          "state: %s)"):format(head, tostring(a.cl), a.e0, a.e1,
          last_state(states, a.cl, a.t_e)))
      elseif a.code == "timeout" and a.timeout and
          a.t_e - a.t_s < a.timeout - tol then
        flag(a.t_e, ("%s, %.3f s after it began, timeout %s"):format(head,
          a.t_e - a.t_s, tostring(a.timeout)))
      end
    end
    -- a release (H) that answered closed
    for _, h in ipairs(list(logs, "H")) do
      local cl = client_of(h, h.task)
      if h.rel == "closed" and not (closed[cl] and closed[cl] <= h.rel_e)
      then
        flag(h.rel_e, ("%s release of %s by %s answered closed at %.3f, " ..
          "%s"):format(h.kind, h.target, h.task, h.rel_e,
          not_closed(closed, states, cl, h.rel_e)))
      end
    end
    -- lock_lost from a write: the value it named never read
    local seen = {}
    for _, g in ipairs(list(logs, "G")) do
      if not seen[g.tag] or g.t < seen[g.tag].t then seen[g.tag] = g end
    end
    for _, w in ipairs(list(logs, "W")) do
      local g = (w.what == "lost" or w.what == "refused") and w.tag and
        seen[w.tag]
      if g then
        flag(g.t, ("%s: %s %s (value %s, token %s pass %s) %s, nothing " ..
          "written; it was written: %s at %.3f"):format(w.target,
          CALLS[w.call] or "the write", w.tag, tostring(w.v),
          tostring(w.token), tostring(w.pass), w.what == "lost" and
          "answered lock_lost" or "was run again (a conflict)",
          READS[g.how] or "read", g.t))
      end
    end
    local lost = {} -- read/write locks' fenced writes: value -> which
    for _, w in ipairs(list(logs, "V")) do
      if w.what == "lost" then
        lost[w.which .. " " .. w.v] = w
      end
    end
    for _, r in ipairs(list(logs, "R")) do
      for _, which in ipairs({ "a", "b" }) do
        local w = lost[which .. " " .. r[which]]
        if w then
          flag(r.t0, ("%s: the fenced write of %s to node %s (token %s) " ..
            "answered lock_lost, nothing written; reader %s read it"):format(
            r.target, w.v, which, tostring(w.token), r.task))
        end
      end
    end
    return v
  end
end
