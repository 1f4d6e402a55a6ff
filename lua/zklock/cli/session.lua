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

-- opts[key], else the variable var: the value, and what the tool's words
-- call it (the flag, or the variable)
local function from_env(opts, key, var)
  local v = opts[key]
  if v == nil then
    v = env(var)
    return v, v and var
  end
  if v ~= "" then return v, "--" .. key:gsub("_", "-") end
end

-- the tls and sasl options, and names: what each of their keys is called
-- here ("tls.ca" -> "--tls-ca" or "ZKLOCK_TLS_CA")
local function secure_opts(opts)
  local tls, sasl, names = nil, nil, {}
  local function get(lua_name, key, var)
    local v, name = from_env(opts, key, var)
    names[lua_name] = name or "--" .. key:gsub("_", "-") -- (if missing)
    return v
  end
  local ca = get("tls.ca", "tls_ca", "ZKLOCK_TLS_CA")
  local cert = get("tls.cert", "tls_cert", "ZKLOCK_TLS_CERT")
  local key = get("tls.key", "tls_key", "ZKLOCK_TLS_KEY")
  -- (--tls-no-verify-host alone is half a TLS set-up: a usage error)
  if ca or cert or key or opts.tls_no_verify_host then
    tls = { ca = ca, cert = cert, key = key,
            key_password = key and env("ZKLOCK_TLS_KEY_PASSWORD") or nil }
    if opts.tls_no_verify_host then tls.verify_host = false end
  end
  local user = get("sasl.user", "sasl_user", "ZKLOCK_SASL_USER")
  local mech = get("sasl.mechanism", "sasl_mechanism",
                   "ZKLOCK_SASL_MECHANISM")
  local pfile = get("sasl.password_file", "sasl_password_file",
                    "ZKLOCK_SASL_PASSWORD_FILE")
  if user or mech or pfile then
    sasl = { user = user, mechanism = mech, password_file = pfile }
    if not pfile then
      sasl.password = env("ZKLOCK_SASL_PASSWORD")
    end
  end
  return tls, sasl, names
end

-- zklock.connect's words for its tls and sasl options (docs/security.md)
-- in the tool's: flags and variables (docs/cli.md).  Whole sentences
-- first, then each option's name; the file names themselves (which may
-- well be "tls.key") are kept out of it.
local TLS_FLAGS = "--tls-ca, --tls-cert and --tls-key (or ZKLOCK_TLS_CA, " ..
  "ZKLOCK_TLS_CERT and ZKLOCK_TLS_KEY)"
local SENTENCES = {
  { "^tls needs ca, and cert and key together %(PEM files; (.*)%)$",
    function(tls, why)
    local missing = {}
    for _, k in ipairs({ "ca", "cert", "key" }) do
      if not tls[k] and (k == "ca" or tls.cert or tls.key) then
        missing[#missing + 1] = "--tls-" .. k
      end
    end
    return TLS_FLAGS .. " go together (--tls-ca alone: no client " ..
      "certificate): " .. table.concat(missing, ", ") .. " missing (PEM " ..
      "files; " .. why .. ")"
  end },
  { "^sasl DIGEST%-MD5 needs user and password %(or password_file%)$",
    function()
      return "SASL DIGEST-MD5 needs --sasl-user (or ZKLOCK_SASL_USER) and " ..
        "a password: ZKLOCK_SASL_PASSWORD, or --sasl-password-file (or " ..
        "ZKLOCK_SASL_PASSWORD_FILE)"
    end },
  { "connect with tls = { ca = %.%.%., cert = %.%.%., key = %.%.%. } " ..
    "%(docs/security%.md%)", function()
      return "give " .. TLS_FLAGS .. " (docs/cli.md)"
    end },
  { "^tls and sasl together", function()
      return "TLS (--tls-*) and SASL (--sasl-*) together"
    end },
}
local OPTION_NAMES = { "tls.ca", "tls.cert", "tls.key", "sasl.password_file" }

local function plain(s) return (s:gsub("%p", "%%%0")) end
local function literal(s) return (s:gsub("%%", "%%%%")) end

local function cli_words(msg, tls, sasl, names)
  -- the file names out of the way: \1n\1
  local files = {}
  for _, v in ipairs({ tls and tls.ca, tls and tls.cert, tls and tls.key,
                       sasl and sasl.password_file }) do
    if v then
      files[#files + 1] = v
      msg = msg:gsub(plain(v), "\1" .. #files .. "\1")
    end
  end
  for _, sentence in ipairs(SENTENCES) do
    msg = msg:gsub(sentence[1], function(...)
      return sentence[2](tls or {}, ...)
    end)
  end
  msg = msg:gsub("%f[%w_.]tls%.key_password%f[^%w_]",
                 "ZKLOCK_TLS_KEY_PASSWORD")
  for _, k in ipairs(OPTION_NAMES) do
    msg = msg:gsub("%f[%w_.]" .. plain(k) .. "%f[^%w_]", literal(names[k]))
  end
  msg = msg:gsub("%f[%w_]key_password%f[^%w_]", "ZKLOCK_TLS_KEY_PASSWORD")
  return (msg:gsub("\1(%d+)\1", function(i) return files[tonumber(i)] end))
end

local function connect(cmd, hosts, opts, id)
  local tls, sasl, names = secure_opts(opts)
  local ok, zk, msg, code = pcall(interruptible_call, nil, zklock.connect,
    hosts, {
    session_timeout = opts.session_timeout or 10,
    connect_timeout = opts.connect_timeout or 10, id = id,
    tls = tls, sasl = sasl, follow_ensemble = not opts.no_follow,
  })
  if not ok then -- (the TLS and SASL settings: checked by connect)
    local why = tostring(zk):match("^[^\n]*") -- (not its traceback)
      :match("^bad argument #2 to '[^']*' %((.*)%)$")
    if not why then error(zk, 0) end
    usage_error("%s: %s", cmd, cli_words(why, tls, sasl, names))
  end
  if not zk then
    say("%s: cannot connect to %s: %s", cmd, hosts,
        cli_words(msg, tls, sasl, names))
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
