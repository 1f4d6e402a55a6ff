-- The chaos worker's log (spec/chaos/worker.lua; the format is read by
-- spec/chaos/check.lua): the log file and its line writer, a Lua error
-- where api.md promises none, hold records (believed from the acquire to
-- the last is_held() that said so) and their release, the counter a
-- mutex guards and its fenced writes, an acquire's outcome.
return function(W, logfile)
  local plan, P, now, R, MAX_DATA = W.plan, W.P, W.now, W.R, W.MAX_DATA

  local log = assert(io.open(logfile, "a"))
  log:setvbuf("line")
  W.log = log
  local function L(...)
    local t = { ... }
    for i = 1, #t do
      local v = t[i]
      t[i] = type(v) == "number" and (v == math.floor(v) and
        string.format("%d", v) or string.format("%.6f", v)) or tostring(v)
    end
    log:write(table.concat(t, " "), "\n")
  end

  -- A Lua error where api.md promises none: a violation for the checker.
  local function unexpected(task, what, err)
    L("E", P, task and task.name or "-", now(), what,
      (tostring(err):gsub("%s+", " ")))
  end

  -- ---------------------------------------------------------------------------
  -- holds: believed from the acquire until the last is_held() that said so

  local function new_hold(kind, tname, task, token, node, mh, pass)
    local ts = task.ts
    task.ts = nil -- (the acquire's start, for this hold only)
    -- (t1 = -1: not believed until is_held() says so; pass: the hold's pass
    -- within a lock cohort, its token's second half)
    return { kind = kind, target = tname, task = task.name, t0 = now(),
      t1 = -1, ts = ts or -1, lost = -1, flip = 0, token = token or 0,
      node = node or "-", mh = mh or 0, rel_t = -1, rel_e = -1, rel = "none",
      pass = pass or 0 }
  end

  -- (the time is read before asking: is_held() answers for a moment at or
  -- after it, so [t0, t1] lies inside the hold).  is_held() may say false
  -- and then true again: a connection back in the same session before the
  -- hold was given up (docs/design.md, section 9.2).  But never true on a
  -- node other than the hold's own: that is someone else's hold believed.
  local function sample(h, held, node)
    local t = now()
    if held then
      h.t1 = t
      if node and h.node ~= "-" and node ~= h.node then h.flip = 1 end
    elseif h.lost < 0 then
      h.lost = t
    end
  end

  local function log_hold(h)
    L("H", h.kind, h.target, h.task, h.ts, h.t0, h.t1, h.lost, h.flip,
      h.token, h.mh, h.rel_t, h.rel_e, h.rel, h.pass, h.node)
  end

  -- Release through fn(): the outcome as one word.
  local function released(h, fn)
    h.rel_t = now()
    local ok, r, msg, code = pcall(fn)
    h.rel_e = now()
    if not ok then
      h.rel = "raised"
      return nil, r
    end
    h.rel = r and "ok" or tostring(code)
    return r, msg, code
  end

  -- Work under the hold(s) for about d seconds, sampling is_held().
  local function work(d, holds, checks, task)
    local t = now() + d
    repeat
      for i, h in ipairs(holds) do sample(h, checks[i]()) end
      if task.revoked then return end
      W.sleep(R:float() * 0.03)
    until now() >= t
    for i, h in ipairs(holds) do sample(h, checks[i]()) end
  end

  local function counter_value(data)
    return tonumber(data and data:match("^%d+") or "0") or 0
  end

  local function counter_data(v, big)
    local s = tostring(v)
    if big then return s .. " " .. string.rep("x", MAX_DATA - #s - 1) end
    return s
  end

  -- Does a write of `data` to t.counter, riding with lock's node (the
  -- release's multi, or fenced_set's), fit the server's jute.maxbuffer of
  -- 1 MiB - 1 with zklock's 1 KiB for the rest (docs/limits.md)?  One that
  -- does not is refused before anything is sent, and the hold goes on.
  local function fits(lock, t, data)
    return #data + #(lock:node() or "") + #t.counter + 1024 <= 1048575
  end

  -- An oversized write: the argument error, and nothing lost.
  local function refused(task, what, fn)
    local ok, err = pcall(fn)
    if ok or not tostring(err):find("jute.maxbuffer", 1, true) then
      unexpected(task, what .. " too big for the server",
        ok and "accepted" or err)
    end
  end

  -- Read the counter and write it back plus one, fenced by `lock`.
  local function fenced_increment(task, t, lock, token, big)
    local data, _, gcode = W.zk:get(t.counter, plan.st)
    if data == nil and gcode ~= "no_node" then return end
    local v = counter_value(data) + 1
    if not fits(lock, t, counter_data(v, big)) then
      return refused(task, "fenced_set", function()
        return lock:fenced_set(t.counter, counter_data(v, big), plan.st * 3)
      end)
    end
    local now_token, pass = lock:token()
    token = now_token or token -- (nil at the acquire in a reconnection)
    L("P", t.name, token, v)
    local ok, r, zxid, code = pcall(lock.fenced_set, lock, t.counter,
      counter_data(v, big), plan.st * 3)
    if not ok then return unexpected(task, "fenced_set", r) end
    L("W", t.name, token, r and zxid or 0, v, pass or 0,
      r and "ok" or code == "lock_lost" and "lost" or "unknown")
  end

  local function log_acquire(kind, tname, task, t_s, res, code, timeout)
    L("A", kind, tname, task.name, t_s, task.tq or -1, now(), res,
      tostring(code), timeout)
    task.tq = nil
  end

  W.L = L
  W.unexpected = unexpected
  W.new_hold = new_hold
  W.sample = sample
  W.log_hold = log_hold
  W.released = released
  W.work = work
  W.counter_value = counter_value
  W.counter_data = counter_data
  W.fits = fits
  W.refused = refused
  W.fenced_increment = fenced_increment
  W.log_acquire = log_acquire
end
