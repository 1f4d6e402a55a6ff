-- The chaos worker's objects (spec/chaos/worker.lua): a target's lock
-- object (broken on purpose when the plan says so), shared by the
-- process's coroutines or a task's own, on the shared client or on one of
-- its own; an acquire through pcall, logged, perhaps abandoned; a task's
-- own client closed after its op.
return function(W)
  local now, R, R2, zk, connect = W.now, W.R, W.R2, W.zk, W.connect
  local focus, avoid, broken = W.focus, W.avoid, W.broken
  local unexpected, log_acquire = W.unexpected, W.log_acquire
  local clients, spawn, sleep = W.clients, W.spawn, W.sleep
  local has_close, ABANDON = W.has_close, W.ABANDON
  local new_client, close_client, made_on, call_start = W.new_client,
    W.close_client, W.made_on, W.call_start

  -- ---------------------------------------------------------------------------
  -- objects: shared by the process's coroutines, or a task's own

  -- A target's object on client c.  plan.broken names the recipes to break
  -- on purpose, to prove the checkers (spec/chaos_spec.lua): a mutex (m2)
  -- and a semaphore mutex that let two hold at once, a semaphore of one
  -- lease too many, a read/write lock whose writers take the read lock; and
  -- below, contenders that lose their place (m3), a release that forgets
  -- its node (m1), a latch per worker, a barrier waited on elsewhere, a
  -- double barrier of one member too few.
  local function make_on(c, t)
    if t.kind == "mutex" then
      if broken.mutex and t.name == "m2" then
        return require("zklock.testing").broken_mutex(c, t.path, 2)
      end
      return c:mutex(t.path, { linger = t.linger, cohort = t.cohort,
        pass_limit = t.pass_limit, ttl = t.ttl })
    elseif t.kind == "rw" then
      local rw = c:rwlock(t.path, { linger = t.linger, cohort = t.cohort,
        pass_limit = t.pass_limit })
      if broken.rw then return { read = rw.read, write = rw.read } end
      return rw
    elseif t.kind == "smutex" then
      if broken.smutex then
        return require("zklock.testing").broken_mutex(c, t.path, 2)
      end
      return c:semaphore_mutex(t.path)
    elseif t.kind == "sem" then
      return c:semaphore(t.path, t.n + (broken.sem and 1 or 0))
    end
  end
  local function make(c, t)
    local obj = made_on(make_on(c, t), c)
    if t.kind == "rw" then made_on(obj.read, c); made_on(obj.write, c) end
    return obj
  end

  local shared = {}
  local function shared_obj(t)
    shared[t.name] = shared[t.name] or make(t.ttl and W.ttl_client or zk, t)
    return shared[t.name]
  end

  -- What an op acquires on: the shared object, or a new one (on the shared
  -- client, or on a client of its own that another task may close while it
  -- waits).
  local function choose_obj(task, t, new)
    if task.force_shared or R:chance(0.5) then
      return shared_obj(t), "shared"
    end
    if R:chance(0.12) then
      local c = connect()
      if c then
        new_client(c)
        clients[#clients + 1] = c
        if R:chance(0.5) then -- closed under the waiting acquire
          local d = R:float() * 2
          spawn("closer", function()
            sleep(d)
            close_client(c)
          end)
        end
        task.own_client = c
        return new(c), "client"
      end
    end
    return new(zk), "own"
  end

  -- Plan how a wait ends early: an error out of the waiter; or, from the
  -- scheduler, coroutine.close() of the task (Lua 5.4) or, when the object is
  -- the task's own, the task dropped for garbage collection, its object with
  -- it, while it waits.
  local function plan_abandon(task, timeout, kind)
    local p = focus == "abandon_lease" and kind ~= "mutex" and 0.5 or 0.08
    if not R:chance(p) then return end
    local d = R:float() * math.min(timeout, 3)
    if has_close and R:chance(0.5) or not has_close and R2:chance(0.3) then
      task.close_at = now() + d
    else
      task.abandon_at = now() + d
    end
  end

  local function is_shared(obj)
    for _, o in pairs(shared) do
      if o == obj or type(o) == "table" and (o.read == obj or o.write == obj)
      then
        return true
      end
    end
    return false
  end

  local function pick_timeout()
    return R:pick({ 0, 0.5, 2, 2, 5, 5 })
  end

  local function pick_work()
    return R:pick({ 0.01, 0.05, 0.1, 0.3, 0.6, 1.2 })
  end

  -- acquire through pcall: the lock (and read data), or nil and an outcome
  local function acquire(task, kind, tname, obj, timeout, opts)
    local t_s = now()
    task.ts = nil
    task.tq = false
    task.t_s, task.akind, task.atarget, task.atimeout = t_s, kind, tname,
      timeout
    task.aown = not is_shared(obj)
    call_start(task, obj)
    if not (avoid.abandon_lease and (kind == "smutex" or kind == "lease" or
        kind == "multi")) then
      plan_abandon(task, timeout, kind)
    end
    local take = obj.acquire
    if broken.fifo and kind == "mutex" and tname == "m3" and timeout > 0.3 then
      -- broken on purpose: a contender that loses its place (gives up its
      -- node after a while and queues again at the back)
      take = function(o, t, op)
        local deadline = now() + t
        while true do
          local left = deadline - now()
          local a, b, c = o:acquire(math.max(0, math.min(0.3, left)), op)
          if a or c ~= "timeout" or left <= 0.3 then return a, b, c end
        end
      end
    end
    -- on_queued (issue 36) on a third of the acquires that take it: told
    -- at most once, exactly once when it holds, a place >= 0 (api.md, "A
    -- place in the queue"); not on the broken fifo's, which acquires again
    -- and again
    local told
    if kind ~= "multi" and take == obj.acquire and W.R5:chance(0.3) then
      told = {}
      local o = {}
      for k, v in pairs(opts or {}) do o[k] = v end
      o.on_queued = function(p) told[#told + 1] = p end
      opts = o
    end
    local ok, got, data, ver_or_code = pcall(take, obj, timeout, opts)
    if told then
      local p = told[1]
      if #told > 1 or (ok and got and #told ~= 1) or (p ~= nil and
          (type(p) ~= "number" or p < 0 or p ~= math.floor(p))) then
        unexpected(task, kind .. ":acquire", ("on_queued told %d time(s)" ..
          " (%s), the acquire %s"):format(#told, tostring(p),
          ok and got and "held" or "not held"))
      end
    end
    task.abandon_at, task.close_at, task.t_s = nil, nil, nil
    if not ok then
      if got == ABANDON then
        log_acquire(kind, tname, task, t_s, "abandon", "-", timeout)
      else
        log_acquire(kind, tname, task, t_s, "raised", "-", timeout)
        unexpected(task, kind .. ":acquire", got)
      end
      return nil
    end
    if not got then
      log_acquire(kind, tname, task, t_s, "fail", ver_or_code, timeout)
      return nil
    end
    log_acquire(kind, tname, task, t_s, "ok", "-", timeout)
    task.ts = kind ~= "multi" and t_s or nil
    return got, data
  end

  -- A client of a task's own is closed after its op (idempotent: a closer
  -- may have closed it already).
  local function release_client(task)
    local c = task.own_client
    if not c then return end
    task.own_client = nil
    close_client(c)
    for i = #clients, 1, -1 do
      if clients[i] == c then table.remove(clients, i) end
    end
  end

  local function drop(task)
    -- the object goes for garbage collection with its hold
    release_client(task)
    collectgarbage()
    collectgarbage()
  end

  W.make = make
  W.shared_obj = shared_obj
  W.choose_obj = choose_obj
  W.is_shared = is_shared
  W.pick_timeout = pick_timeout
  W.pick_work = pick_work
  W.acquire = acquire
  W.release_client = release_client
  W.drop = drop
end
