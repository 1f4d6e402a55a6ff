-- The chaos worker's log (spec/chaos/worker.lua; the format is read by
-- spec/chaos/check.lua): the log file and its line writer, a Lua error
-- where api.md promises none, the clients (their ids, state events,
-- closes, and the expiries each has seen), hold records (believed from the
-- acquire to the last is_held() that said so; each with an id that its
-- extends, callbacks and writes name) and their release, the counter a
-- mutex guards (each write of it named, each value read logged) and its
-- fenced writes, an acquire's outcome.
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
  -- clients: each has an id in the logs, "P/n" (the shared one, the first,
  -- "P/0"); its state events are logged (Z), and its close, before the
  -- close begins (C): an answer `closed` is checked against it
  -- (spec/chaos/checks/answers.lua)

  local ids = setmetatable({}, { __mode = "k" })
  local owners = setmetatable({}, { __mode = "k" }) -- object -> client
  local n_clients = 0
  local function new_client(c)
    local id = ("%s/%d"):format(P, n_clients)
    n_clients = n_clients + 1
    ids[c] = id
    c:on_state(function(new) L("Z", id, new, now()) end)
    return c
  end
  local function client_id(c) return c and ids[c] or "-" end

  -- obj (a lock, semaphore...) was made on client c
  local function made_on(obj, c)
    owners[obj] = c
    return obj
  end
  local function owner(obj) return owners[obj] or W.zk end

  local function close_client(c)
    if c:state() ~= "closed" then L("C", client_id(c), now()) end
    c:close()
  end

  -- The expiries client c has seen: its renewals, and one more while it
  -- is expired (renewed after).  At a call's start, the renewals alone:
  -- an answer `session_expired` must come with a count above it
  -- (read just after the answer, the state before the counter: a renewal
  -- in between is counted twice, never missed).  -1: closed.
  local EXPIRED = { expired = true, auth_failed = true, tls_failed = true }
  local function expiries(c, at_start)
    local st = c:state()
    if st == "closed" then return -1 end
    local ok, s = pcall(c._stats, c)
    if not ok then return -1 end
    if at_start then return s.renewed end
    return s.renewed + (EXPIRED[st] and 1 or 0)
  end

  -- A call of task's on obj's client begins.
  local function call_start(task, obj)
    local c = owner(obj)
    task.acl, task.ae0 = c, expiries(c, true)
  end

  -- ---------------------------------------------------------------------------
  -- holds: believed from the acquire until the last is_held() that said so

  local n_holds = 0
  local function new_hold(kind, tname, task, token, node, mh, pass)
    local ts = task.ts
    task.ts = nil -- (the acquire's start, for this hold only)
    n_holds = n_holds + 1
    -- (t1 = -1: not believed until is_held() says so; pass: the hold's pass
    -- within a lock cohort, its token's second half; cl: its client; id:
    -- unique in the run, named by its extends (XT), callbacks (CB) and
    -- writes (W); lim: when it ends by itself, as far as the worker
    -- knows, moved by its extends: worker_holds.lua)
    local t0 = now()
    return { kind = kind, target = tname, task = task.name, t0 = t0,
      t1 = -1, ts = ts or -1, lost = -1, flip = 0, token = token or 0,
      node = node or "-", mh = mh or 0, rel_t = -1, rel_e = -1, rel = "none",
      pass = pass or 0, cl = client_id(task.acl or W.zk),
      id = ("%s#%d"):format(P, n_holds),
      lim = mh and mh > 0 and t0 + mh or nil }
  end

  -- Ask ask() (is_held(), and the node it holds if it says) and record
  -- the answer.  A true answer counts from the time read before asking:
  -- is_held() answers for a moment at or after it, so [t0, t1] lies inside
  -- the hold even when the process is stopped (SIGSTOP) between the answer
  -- and the next line; read after, t1 would stretch over the stop.  A false
  -- one counts from the time read after.  is_held() may say false and then
  -- true again: a connection back in the same session before the hold was
  -- given up (docs/design.md, section 9.2).  But never true on a node
  -- other than the hold's own: that is someone else's hold believed.
  -- Returns the answer.
  local function sample(h, ask)
    local t = now()
    local held, node = ask()
    if held then
      h.t1 = t
      if node and h.node ~= "-" and node ~= h.node then h.flip = 1 end
    elseif h.lost < 0 then
      h.lost = now()
    end
    return held
  end

  local function log_hold(h)
    L("H", h.kind, h.target, h.task, h.ts, h.t0, h.t1, h.lost, h.flip,
      h.token, h.mh, h.rel_t, h.rel_e, h.rel, h.pass, h.node, h.cl, h.id)
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
      for i, h in ipairs(holds) do sample(h, checks[i]) end
      if task.revoked then return end
      W.sleep(R:float() * 0.03)
    until now() >= t
    for i, h in ipairs(holds) do sample(h, checks[i]) end
  end

  local function counter_value(data)
    return tonumber(data and data:match("^%d+") or "0") or 0
  end

  -- The counter's data: its value and the name of the write, unique in
  -- the run (a value read names the write that made it: an answer
  -- "nothing written" is checked against it, checks/answers.lua)
  local n_writes = 0
  local function write_tag()
    n_writes = n_writes + 1
    return ("%s:%d"):format(P, n_writes)
  end
  local function counter_data(v, big, tag)
    local s = tostring(v) .. " " .. tag
    if big then return s .. " " .. string.rep("x", MAX_DATA - #s - 1) end
    return s
  end

  -- The counter of target t read (how: "read" with the acquire, "get",
  -- "update" with_lock's): the write it names
  local function seen(t, data, how)
    local tag = type(data) == "string" and data:match("^%d+ (%S+)")
    if tag then L("G", t.name, tag, now(), how) end
  end

  -- A write of the counter (the call: "release", "fenced" or "update")
  -- and its outcome: "ok", "lost" (lock_lost: nothing written),
  -- "refused" (an update's conflict, fn run again: nothing written) or
  -- "unknown" (it may have been applied); by hold h, sent at t_s
  local function log_write(t, token, zxid, v, pass, what, tag, call, h, t_s)
    L("W", t.name, token, zxid, v, pass, what, tag, call,
      h and h.id or "-", t_s or -1)
  end

  -- Does a write of `data` to t.counter, riding with lock's node (the
  -- release's multi, or fenced_set's), fit the server's jute.maxbuffer of
  -- 1 MiB - 1 with zklock's 1 KiB for the rest (docs/limits.md)?  One that
  -- does not is refused before anything is sent, and the hold goes on.
  local function fits(lock, t, data)
    -- (a semaphore has no node(): its leases' are short)
    return #data + #(lock.node and lock:node() or "") + #t.counter + 1024
      <= 1048575
  end

  -- An oversized write: the argument error, and nothing lost.  Or
  -- lock_lost, when the hold's node went between fits() and the call (the
  -- C client's thread lets it go at any time): the size is reckoned with
  -- the node's path, and a lost hold sends nothing (docs/limits.md; the
  -- moving soak, seed 1795803083, met it).
  -- Returns true in that case (a release: the hold has ended).
  local function refused(task, what, fn)
    local ok, err, _, code = pcall(fn)
    if ok and err == nil and code == "lock_lost" then return true end
    if ok or not tostring(err):find("jute.maxbuffer", 1, true) then
      unexpected(task, what .. " too big for the server",
        ok and "accepted" or err)
    end
  end

  -- Read the counter and write it back plus one, fenced by `lock` (a
  -- lock, a lease, a semaphore: its newest lease), under hold h.  t: the
  -- target, or what stands for the node written ({ name, counter }).
  local function fenced_increment(task, t, lock, token, big, h)
    local data, _, gcode = W.zk:get(t.counter, plan.st)
    if data == nil and gcode ~= "no_node" then return end
    seen(t, data, "get")
    -- (a mutex broken on purpose, two holders at once: they read, then
    -- write, a moment apart, so that their updates meet and one is lost
    -- for the fencing checker to find, chaos_spec; by chance alone it
    -- missed two seeds in a row under LuaJIT)
    if W.broken and W.broken.mutex and t.name == "m2" then W.sleep(0.05) end
    local v, tag = counter_value(data) + 1, write_tag()
    local new = counter_data(v, big, tag)
    if not fits(lock, t, new) then
      return refused(task, "fenced_set", function()
        return lock:fenced_set(t.counter, new, plan.st * 3)
      end)
    end
    local now_token, pass = lock:token()
    token = now_token or token -- (nil at the acquire in a reconnection)
    L("P", t.name, token, v, tag)
    local t_s = now()
    local ok, r, zxid, code = pcall(lock.fenced_set, lock, t.counter,
      new, plan.st * 3)
    if not ok then return unexpected(task, "fenced_set", r) end
    log_write(t, token, r and zxid or 0, v, pass or 0,
      r and "ok" or code == "lock_lost" and "lost" or "unknown", tag,
      "fenced", h, t_s)
  end

  -- An acquire's outcome (A), on the client of its call_start(), with the
  -- expiries that client had seen at the start and has seen now.
  local function log_acquire(kind, tname, task, t_s, res, code, timeout)
    local c = task.acl or W.zk
    local e1 = expiries(c)
    L("A", kind, tname, task.name, t_s, task.tq or -1, now(), res,
      tostring(code), timeout, client_id(c), task.ae0 or -1, e1)
    task.tq = nil
  end

  W.L = L
  W.new_client, W.client_id, W.made_on, W.owner = new_client, client_id,
    made_on, owner
  W.close_client, W.expiries, W.call_start = close_client, expiries,
    call_start
  W.write_tag, W.seen, W.log_write = write_tag, seen, log_write
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
