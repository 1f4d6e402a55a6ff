-- `zklock run` (bin/zklock, docs/cli.md), a distributed flock(1): it
-- takes the mutex at PATH, runs the command as the leader of a process
-- group of its own, passes signals on to that group, signals it when the
-- hold is lost or revoked, holds the lock until the group has ended, and
-- exits with the command's status (or 75, 79, 126, 127).  With
-- --max-hold S the command may ask for more time (SIGUSR1 to the tool,
-- or --heartbeat FILE touched): each ask extends the hold to now + S.
local core = require "zklock.core"
local options = require "zklock.cli.options"
local session = require "zklock.cli.session"

local M = {}

local EX, say, finish = options.EX, options.say, options.finish
local connect, interruptible_call = session.connect,
  session.interruptible_call

local function hostname()
  local fh = io.open("/proc/sys/kernel/hostname")
  local h = fh and fh:read("*l") or "localhost"
  if fh then fh:close() end
  return h
end

-- The participant id written into the lock node, which anyone may read:
-- the host, the pid and the program, never the command's arguments (they
-- may hold a password).  --id replaces it.
local function default_id(argv)
  return ("zklock run %s pid %d: %s"):format(hostname(), core.pid(),
    argv[1]:sub(1, 200))
end

-- Signals that end a process, which a stopped one acts on only once it is
-- continued: SIGCONT follows them (as timeout(1) does).
local NEEDS_CONT = { HUP = true, INT = true, QUIT = true, USR1 = true,
  USR2 = true, ALRM = true, TERM = true, PIPE = true }

-- Why a hold ended without a release (other than its max hold): the
-- session expired; or the server has not answered for so long that it
-- may have expired it (a hold is given up at about 0.65 of the session
-- timeout: docs/design.md, section 9), said with how long; or, in contact
-- all along, someone else deleted its node.  renewed: the client's count
-- of renewed sessions when the hold began.
local function lost_reason(zk, renewed)
  local state, s = zk:state(), zk:stats()
  if state == "expired" or s.renewed > renewed then
    return "the session expired"
  end
  local quiet = s.since_contact
  if quiet and quiet >= zk:session_timeout() / 2 then
    return ("no contact with ZooKeeper for %.1f s"):format(quiet)
  end
  if state ~= "connected" and state ~= "connecting" then
    return "the session is " .. state
  end
  return "its node was deleted by someone else"
end

-- Asks for more time (docs/cli.md, "More time"): SIGUSR1 to the tool
-- (from the command, which finds the tool's pid in ZKLOCK_PID, or anyone
-- else), or with --heartbeat FILE a new modification time of FILE, looked
-- at every tenth of --max-hold (at most every second) from the tool's
-- loop.  `ask()` tells whether the command asked since last time; `env`
-- is what the command finds in its environment.
local function asker(opts)
  local A = { env = { ZKLOCK_PID = tostring(core.pid()),
    ZKLOCK_MAX_HOLD = opts.max_hold and ("%.10g"):format(opts.max_hold) or
      false,
    ZKLOCK_HEARTBEAT = opts.heartbeat or false } }
  local file = opts.heartbeat
  -- FILE's modification time; false: no such file; nil: it cannot be
  -- looked at now (taken as unchanged)
  local function stamp()
    local sec, nsec, code = core.mtime(file)
    if sec then return ("%d.%09d"):format(sec, nsec) end
    if code == "not_found" then return false end
  end
  local last, next_look = file and (stamp() or false), core.now()
  local every = opts.max_hold and math.min(opts.max_hold / 10, 1)
  -- usr1: SIGUSR1 came since last time
  function A.ask(usr1)
    local asked = usr1
    if file and core.now() >= next_look then
      next_look = core.now() + every
      local st = stamp()
      if st ~= nil then
        if st and st ~= last then asked = true end
        last = st
      end
    end
    return asked
  end
  return A
end

-- inherit: the descriptors the command gets (bin/zklock's, beyond 0, 1
-- and 2: those it was given)
function M.run(hosts, path, opts, argv, inherit)
  local zk = connect("run", hosts, opts, opts.id or default_id(argv))
  local m = zk:mutex(path, opts.ttl and { ttl = opts.ttl } or nil)
  local held, msg, code = interruptible_call(zk, m.acquire, m, opts.timeout,
    { max_hold = opts.max_hold })
  if not held then
    zk:close()
    if code == "timeout" then
      say("run: lock %s not acquired within %gs", path, opts.timeout)
      finish(EX.tempfail)
    end
    say("run: lock %s not acquired: %s", path, msg)
    finish(EX.unavailable)
  end
  session.set_interruptible(false)
  local acquired = core.now()
  local renewed = zk:stats().renewed
  local lost, revoked = false, false
  m:on_lost(function() lost = true end)
  if opts.revocable then m:on_revoke(function() revoked = true end) end

  -- The command leads a process group of its own (its pgid is its pid):
  -- signals go to the group, so that what the command started gets them
  -- too, and the lock is held until every process of the group has ended.
  -- SIGUSR1 is caught first: an ask for more time, never passed on (and
  -- the tool does not die of it).
  local A = asker(opts)
  core.catch_signals({ "USR1" })
  local pid, err, why = core.spawn(argv, inherit, true, A.env)
  if not pid then
    m:release()
    zk:close()
    say("run: cannot run %s", err)
    finish(why == "not_found" and EX.notfound or EX.noexec)
  end

  local sig = opts.signal or "TERM"
  local signalled = false        -- sent `sig` for a loss or a revocation
  local first, first_at = nil, nil -- the first signal sent, and when
  local killed = false
  local function signal_group(s)
    core.killpg(pid, s)
    if NEEDS_CONT[s] then core.killpg(pid, "CONT") end
    if not first then first, first_at = s, core.now() end
  end
  local mh = opts.max_hold
  local limit_from, granted, refused = acquired, 0, false
  -- An ask for more time: the hold then ends mh from now.  Once the
  -- command has been signalled for a loss or a revocation, an ask changes
  -- nothing (said once); before that, an extend that finds the hold ended
  -- (it ran out just now) makes it a loss, said below.
  local function more_time()
    if signalled then
      if not refused then
        say("run: lock %s: asked for more time after the %s: refused", path,
          lost and "hold ended" or "revocation")
        refused = true
      end
    elseif not (lost or revoked) then
      if m:extend(mh) then
        limit_from, granted = core.now(), granted + 1
      else
        lost = true
      end
    end
  end
  local kind, a -- how the command (the group's leader) ended
  while true do
    if not kind then
      local k, x = core.wait(pid, true)
      if k == nil then -- (cannot happen: our own child)
        say("run: %s", x)
        zk:close()
        finish(EX.software)
      end
      if k ~= "running" then kind, a = k, x end
    end
    if kind and not core.group_alive(pid) then break end
    local usr1 = false
    for _, s in ipairs(core.caught()) do
      if s == "USR1" then usr1 = true else signal_group(s) end
    end
    if A.ask(usr1) and mh then more_time() end
    if not lost and not m:is_held() then lost = true end
    if (lost or revoked) and not signalled then
      local reason = not lost and "revocation requested" or
        mh and core.now() - limit_from >= mh - 0.1 and
        ("its max hold of %gs ran out%s"):format(mh, granted == 0 and "" or
          (" after %d ask%s for more time"):format(granted,
            granted == 1 and "" or "s")) or
        lost_reason(zk, renewed)
      say("run: lock %s %s while the command ran (%s); sending SIG%s to " ..
        "process group %d", path, lost and "lost" or "revoked", reason, sig,
        pid)
      signal_group(sig)
      signalled = true
    end
    if first and opts.kill_after and not killed and
        core.now() - first_at >= opts.kill_after then
      say("run: process group %d still runs %gs after SIG%s; sending " ..
        "SIGKILL", pid, opts.kill_after, first)
      core.killpg(pid, "KILL")
      killed = true
    end
    zk:dispatch(0.05)
  end

  local released, _, rcode = m:release()
  zk:close()
  if lost or revoked or (not released and rcode == "lock_lost") then
    if not signalled then
      say("run: lock %s was lost while the command ran (found at release)",
        path)
    end
    finish(EX.lost)
  end
  if kind == "exited" then finish(a) end
  finish(128 + a) -- signaled: a is the signal's number
end

return M
