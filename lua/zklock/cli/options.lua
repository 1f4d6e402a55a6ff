-- The words of the zklock command (bin/zklock, docs/cli.md): its exit
-- statuses, its usage text, its messages (say, usage_error), its exit
-- (finish), and the parsing of each command's arguments and options.
local core = require "zklock.core"
local check = require "zklock.rt.check"

local O = {}

local EX = {
  ok = 0,
  none = 1,          -- holders: nobody holds it; revoke: nobody asked
  usage = 64,        -- EX_USAGE
  nohost = 68,       -- EX_NOHOST: a host of HOSTS does not resolve
  unavailable = 69,  -- EX_UNAVAILABLE: no connection, a ZooKeeper failure
  software = 70,     -- EX_SOFTWARE: a bug of zklock's
  tempfail = 75,     -- EX_TEMPFAIL: not acquired in time; barrier still up
  lost = 79,         -- the lock was lost while the command ran
  noexec = 126,      -- the command could not be executed
  notfound = 127,    -- the command was not found
}

local USAGE = [[
Usage:
  zklock run HOSTS PATH [options] [--] CMD [ARG...]
  zklock holders HOSTS PATH [--leases N]
  zklock revoke HOSTS PATH [--leases N]
  zklock wait-barrier HOSTS PATH [--timeout S]
  zklock check-token HOSTS PATH TOKEN [--leases N]

HOSTS is a ZooKeeper connect string ("127.0.0.1:2181,127.0.0.1:2182/app"),
PATH a lock or barrier path ("/locks/backup").

run: run CMD while holding the mutex at PATH (Curator InterProcessMutex
nodes), a distributed flock(1).
  --timeout S        wait at most S seconds for the lock (default, or
                     inf: for ever)
  --max-hold S       end the hold after S seconds, as a lost lock; each
                     ask of CMD's moves the end to S seconds from then:
                     SIGUSR1 to the tool (kill -USR1 "$ZKLOCK_PID")
  --heartbeat FILE   with --max-hold: FILE's modification time moving
                     (touch "$ZKLOCK_HEARTBEAT") is an ask too; looked
                     at every S/10 seconds (at most 1)
  --signal NAME      sent to CMD when the lock is lost (default TERM)
  --kill-after S     KILL, if CMD still runs S seconds after the first
                     signal it was sent (that one, or TERM, INT, HUP
                     passed on)
  --revocable        `zklock revoke` (or Curator's Revoker) ends the hold:
                     CMD is signalled, the lock released once CMD's
                     group ended
  --id TEXT          written into the lock node; `zklock holders` shows it
                     (default: "zklock run HOST pid N: CMD", without ARGs)
  --ttl S            hold on a TTL node (with --id): the hold outlives
                     this tool, killed or its host restarted, for S
                     seconds; a run with the same --id takes it back at
                     once (the server must allow TTL nodes)
CMD runs in a process group of its own: signals go to the whole group
(not SIGUSR1: an ask), and the lock is held until every process of the
group has ended.  After the hold ended, an ask is refused.
holders: the holder(s) of the lock (mutex, read/write lock, or with
  --leases N a semaphore of N leases): one line each, tab-separated:
  node, session, token, id.
revoke: ask the holder(s) to release (Curator Revoker): prints "asked N
  holder(s) of PATH to release", or "nobody holds PATH".
wait-barrier: wait until the barrier node at PATH is removed (--timeout:
  as for run; default, or inf: for ever).
check-token: whether TOKEN is a current hold of the lock at PATH (mutex,
  read/write lock, or with --leases N a semaphore of N leases): TOKEN is
  a czxid in decimal (as `holders` prints it) or the string form
  CZXID.PASS (16 hex digits each, lock:token("string")); prints "current"
  or "not held: ..." (a passed hold's pass is not on the server: the
  node's answer).

Every command:
  --session-timeout S   (default 10)    --connect-timeout S   (default 10)
  --no-follow           keep to HOSTS: do not follow the ensemble's
                        membership (a proxy or NAT in front of it)
  --tls-ca FILE --tls-cert FILE --tls-key FILE
                        TLS with a client certificate (PEM files; --tls-ca
                        alone: none, for ssl.clientAuth=none); an
                        encrypted key's password from the environment
                        variable ZKLOCK_TLS_KEY_PASSWORD
  --tls-no-verify-host  do not check that the server's certificate names
                        the host dialled (docs/security.md: a warning)
  --sasl-user NAME      SASL (DIGEST-MD5 unless --sasl-mechanism M); the
  --sasl-password-file FILE   password from the file's first line, or
                        from ZKLOCK_SASL_PASSWORD; never an argument
  -h, --help
Each of these may come from the environment instead: ZKLOCK_TLS_CA,
ZKLOCK_TLS_CERT, ZKLOCK_TLS_KEY, ZKLOCK_SASL_USER, ZKLOCK_SASL_MECHANISM,
ZKLOCK_SASL_PASSWORD_FILE (an option wins over its variable).

Exit status:
  run: CMD's own status (128+N when a signal N ended it); 75 when the lock
  was not acquired within --timeout; 79 when the lock was lost or revoked
  while CMD ran (CMD was signalled); 126 CMD not executable; 127 CMD not
  found.
  holders, revoke: 0, or 1 when nobody holds the lock.
  check-token: 0 when TOKEN is a current hold, 1 when it is not.
  wait-barrier: 0 once removed, 75 when still up after --timeout.
  64 usage error; 68 a host of HOSTS does not resolve; 69 could not
  connect, or ZooKeeper failed.
ZKLOCK_LOG_LEVEL=error|warn|info|debug shows the ZooKeeper client's log.
]]

local function say(fmt, ...)
  io.stderr:write("zklock: ", fmt:format(...), "\n")
end

local function finish(status)
  io.stdout:flush()
  io.stderr:flush()
  os.exit(status)
end

local function usage_error(fmt, ...)
  say(fmt, ...)
  io.stderr:write("Try 'zklock --help'.\n")
  finish(EX.usage)
end

-- ---------------------------------------------------------------------------
-- options

local function seconds(name, v, positive)
  local n = tonumber(v)
  if not n or n ~= n or n == math.huge or n < 0 or (positive and n == 0)
      or n >= 1e9 then
    usage_error("--%s: expected a number of seconds %s, got '%s'", name,
      positive and "> 0" or ">= 0", v)
  end
  return n
end

-- --timeout: seconds, or "inf" / "infinity" (any case): for ever, as
-- when it is not given (nil)
local FOREVER = { inf = true, infinity = true }

local KINDS = {
  secs = function(name, v) return seconds(name, v, false) end,
  timeout = function(name, v)
    if FOREVER[v:lower()] then return nil end
    return seconds(name, v, false)
  end,
  secs_pos = function(name, v) return seconds(name, v, true) end,
  count = function(name, v)
    local n = tonumber(v)
    if not n or n ~= math.floor(n) or n < 1 or n > 2 ^ 31 - 1 then
      usage_error("--%s: expected a positive integer, got '%s'", name, v)
    end
    return n
  end,
  signal = function(name, v)
    if not core.signum(v) then
      usage_error("--%s: unknown signal '%s' (HUP, INT, QUIT, KILL, USR1, " ..
        "USR2, ALRM, TERM, CONT, STOP, TSTP, PIPE)", name, v)
    end
    return (v:gsub("^SIG", ""))
  end,
  text = function(_, v) return v end,
  file = function(name, v)
    if v == "" then usage_error("--%s: expected a file name", name) end
    return v
  end,
}
local FLAG = {} -- (an option without a value)

local COMMON = { ["session-timeout"] = "secs_pos", ["no-follow"] = "flag",
  ["connect-timeout"] = "secs", ["tls-ca"] = "text", ["tls-cert"] = "text",
  ["tls-key"] = "text", ["tls-no-verify-host"] = "flag",
  ["sasl-user"] = "text",
  ["sasl-mechanism"] = "text", ["sasl-password-file"] = "text" }

local COMMANDS = {
  run = { ["timeout"] = "timeout", ["max-hold"] = "secs_pos",
    ["signal"] = "signal", ["kill-after"] = "secs", ["id"] = "text",
    ["revocable"] = "flag", ["heartbeat"] = "file", ["ttl"] = "secs_pos" },
  holders = { ["leases"] = "count" },
  revoke = { ["leases"] = "count" },
  ["wait-barrier"] = { ["timeout"] = "timeout" },
  ["check-token"] = { ["leases"] = "count" },
}

-- A command's positional arguments: HOSTS, PATH, and check-token's TOKEN.
local POSITIONAL = { ["check-token"] = { "HOSTS", "PATH", "TOKEN" } }

-- Parses args[i..] of command `cmd`: positional arguments (HOSTS, PATH),
-- options, and for `run` the command (from `--` or the first argument
-- after PATH that is not an option).
local function parse(cmd, args, i)
  local spec = COMMANDS[cmd]
  local pos, opts, rest = {}, {}, nil
  while i <= #args do
    local a = args[i]
    if a == "--" then rest = i + 1; break end
    if a == "-h" or a == "--help" then io.stdout:write(USAGE); finish(EX.ok) end
    if a:sub(1, 2) == "--" then
      local name, val = a:match("^%-%-([^=]+)=(.*)$")
      name = name or a:sub(3)
      local kind = spec[name] or COMMON[name]
      if not kind then usage_error("%s: unknown option --%s", cmd, name) end
      if kind == "flag" then
        if val ~= nil then usage_error("--%s takes no value", name) end
        val = FLAG
      elseif val == nil then
        i = i + 1
        val = args[i]
        if val == nil then usage_error("--%s needs a value", name) end
      end
      if val == FLAG then val = true else val = KINDS[kind](name, val) end
      opts[(name:gsub("-", "_"))] = val -- (nil: --timeout inf)
    elseif a:sub(1, 1) == "-" and #a > 1 then
      usage_error("%s: unknown option %s", cmd, a)
    elseif cmd == "run" and #pos == 2 then
      rest = i
      break
    else
      pos[#pos + 1] = a
    end
    i = i + 1
  end
  local names = POSITIONAL[cmd] or { "HOSTS", "PATH" }
  if #pos < #names then
    usage_error("%s: expected %s", cmd, table.concat(names, ", ", 1,
      #names - 1) .. " and " .. names[#names])
  elseif #pos > #names then
    usage_error("%s: unexpected argument '%s'", cmd, pos[#names + 1])
  end
  local argv
  if cmd == "run" then
    argv = {}
    for k = rest or #args + 1, #args do argv[#argv + 1] = args[k] end
    if #argv == 0 then usage_error("run: no command given") end
    if argv[1] == "" then usage_error("run: the command is empty") end
    if opts.heartbeat and not opts.max_hold then
      usage_error("run: --heartbeat needs --max-hold")
    end
    if opts.ttl and not opts.id then
      usage_error("run: --ttl needs --id (the id that takes the hold back)")
    end
    if opts.ttl and opts.revocable then
      usage_error("run: --ttl and --revocable do not go together (a hold " ..
        "on a TTL node is not revocable)")
    end
  elseif rest and rest <= #args then
    usage_error("%s: unexpected argument '%s'", cmd, args[rest])
  end
  if cmd == "check-token" then argv = { pos[3] } end
  local hosts, path = pos[1], pos[2]
  for _, a in ipairs({ { "HOSTS", check.check_hosts, hosts },
      { "PATH", check.check_path, path } }) do
    local ok, err = pcall(a[2], a[3], 1, cmd)
    if not ok then
      usage_error("%s: bad %s: %s", cmd, a[1],
        tostring(err):match("%((.*)%)$") or tostring(err))
    end
  end
  return hosts, path, opts, argv
end

O.EX, O.USAGE, O.COMMANDS = EX, USAGE, COMMANDS
O.say, O.finish, O.usage_error, O.parse = say, finish, usage_error, parse

return O
