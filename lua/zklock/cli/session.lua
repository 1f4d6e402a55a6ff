-- The zklock command's session (bin/zklock, docs/cli.md): connecting,
-- with TLS and SASL from the options or the environment, and a failed
-- request's exit; and the signals that end a wait.  Loading this module
-- sets zklock's waiter (zklock.set_waiter): only the command loads it.
local core = require "zklock.core"
local zklock = require "zklock"
local options = require "zklock.cli.options"
local guard = require "zklock.rt.guard"

local S = {}

local EX, say, finish = options.EX, options.say, options.finish
local usage_error = options.usage_error

-- ---------------------------------------------------------------------------
-- signals: while the tool waits (to connect, for the lock), TERM, INT and
-- HUP end the wait (a queued lock node is deleted at once); while the
-- command runs, they are passed on to its process group.

local FORWARDED = { "TERM", "INT", "HUP" }
local interruptible = true
local Interrupted = {}

-- false while the command runs (zklock.cli.run): signals are then
-- passed on to its process group, not raised in a wait
function S.set_interruptible(on) interruptible = on end

zklock.set_waiter(function(client, gen, timeout)
  client:_wait(gen, (timeout == nil or timeout > 0.1) and 0.1 or timeout)
  if interruptible then
    local sig = core.caught()[1]
    if sig then error(setmetatable({ signal = sig }, Interrupted), 0) end
  end
end)

-- Run fn(...) under the interruptible waiter: its results, or exit
-- 128+N on signal N.
local unpack = table.unpack or unpack
local function pack(...) return { n = select("#", ...), ... } end

local protect = guard.protect

local function interruptible_call(zk, fn, ...)
  -- (a string error comes back with its frames: an internal error's
  -- traceback then shows where it was raised)
  local res = pack(protect(fn, ...))
  if res[1] then return unpack(res, 2, res.n) end
  local err = res[2]
  if getmetatable(err) == Interrupted then
    if zk then zk:close() end
    say("interrupted by SIG%s", err.signal)
    finish(128 + core.signum(err.signal))
  end
  error(err, 0)
end

-- TLS and SASL from the options, else the environment (docs/cli.md);
-- passwords only ever from the environment or a file.
local function env(var)
  local v = os.getenv(var)
  if v ~= "" then return v end
end

local function from_env(opts, key, var)
  local v = opts[key]
  if v == nil then return env(var) end
  if v ~= "" then return v end
end

local function secure_opts(opts)
  local tls, sasl
  local ca, cert = from_env(opts, "tls_ca", "ZKLOCK_TLS_CA"),
    from_env(opts, "tls_cert", "ZKLOCK_TLS_CERT")
  local key = from_env(opts, "tls_key", "ZKLOCK_TLS_KEY")
  if ca or cert or key then
    tls = { ca = ca, cert = cert, key = key,
            key_password = env("ZKLOCK_TLS_KEY_PASSWORD") }
  end
  local user = from_env(opts, "sasl_user", "ZKLOCK_SASL_USER")
  local mech = from_env(opts, "sasl_mechanism", "ZKLOCK_SASL_MECHANISM")
  local pfile = from_env(opts, "sasl_password_file",
                         "ZKLOCK_SASL_PASSWORD_FILE")
  if user or mech or pfile then
    sasl = { user = user, mechanism = mech, password_file = pfile }
    if not pfile then
      sasl.password = env("ZKLOCK_SASL_PASSWORD")
    end
  end
  return tls, sasl
end

local function connect(cmd, hosts, opts, id)
  local tls, sasl = secure_opts(opts)
  local ok, zk, msg, code = pcall(interruptible_call, nil, zklock.connect,
    hosts, {
    session_timeout = opts.session_timeout or 10,
    connect_timeout = opts.connect_timeout or 10, id = id,
    tls = tls, sasl = sasl,
  })
  if not ok then -- (the TLS and SASL settings: checked by connect)
    local why = tostring(zk):match("^[^\n]*") -- (not its traceback)
      :match("^bad argument #2 to '[^']*' %((.*)%)$")
    if not why then error(zk, 0) end
    usage_error("%s: %s", cmd, why)
  end
  if not zk then
    say("%s: cannot connect to %s: %s", cmd, hosts, msg)
    finish(code == "unknown_host" and EX.nohost or EX.unavailable)
  end
  return zk
end

local function zk_failed(zk, cmd, path, msg)
  say("%s %s: %s", cmd, path, msg)
  zk:close()
  finish(EX.unavailable)
end

S.FORWARDED = FORWARDED
S.interruptible_call, S.connect, S.zk_failed = interruptible_call, connect,
  zk_failed

return S
