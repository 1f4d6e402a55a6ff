-- Opening a session: zklock.connect's options checked (ACL, TLS, SASL:
-- docs/acl.md, docs/security.md), the session opened in C, then its first
-- connection awaited; and what each client was opened with that its
-- recipes read later (whether it renews expired sessions, the participant
-- id of its nodes, its locks' cohort defaults).  Owns those per-client
-- tables.  Not a public interface.
local core = require "zklock.core"
local check = require "zklock.rt.check"
local wait = require "zklock.rt.wait"
check.internal_file()

local M = {}

local now = core.now
local argerror = check.argerror
local type, ipairs, pairs, setmetatable = type, ipairs, pairs, setmetatable
local floor = math.floor
local WEAK_KEYS = { __mode = "k" }

local ACLS = { open = 0, creator = 1, read = 2 }
local DEFAULT_MAX_DATA = 1024 * 1024 - 8192

-- opts.acl: a preset name or a list { { scheme, id, perms }, ... }
local function check_acl(acl, auth, fname)
  if acl == nil then return 0 end
  if type(acl) == "table" then
    if #acl == 0 then argerror(2, fname, "acl list must not be empty") end
    for i, e in ipairs(acl) do
      if type(e) ~= "table" or type(e[1]) ~= "string" or
          type(e[2]) ~= "string" or type(e[3]) ~= "string" or
          not e[3]:find("^[cdrwa]+$") then
        argerror(2, fname, ("acl entry %d must be { scheme, id, perms } " ..
          "with perms made of 'cdrwa'"):format(i))
      end
    end
    return acl
  end
  local preset = ACLS[acl]
  if not preset then
    argerror(2, fname, "acl must be 'open', 'creator', 'read' or a list")
  end
  if preset ~= 0 and not auth then
    argerror(2, fname, "acl '" .. acl .. "' needs auth or sasl: it " ..
      "names the identities the session authenticates as")
  end
  return preset
end

-- opts.tls and opts.sasl (docs/security.md) as one flat table for C, or
-- nil; or false, msg, code.  A password comes from `password` or the
-- first line of `password_file`.  One rule for files (docs/security.md,
-- "Files"): what the arguments alone show is wrong raises (a partial tls,
-- a ',' the C client cannot take); a file that cannot be read, or reads
-- wrong, is the world's: false, msg, "tls" (in C, src/core/session/
-- secure.c) or "no_auth" (password_file, here).
local TLS_KEYS = { ca = true, cert = true, key = true, key_password = true,
  verify_host = true }
local SASL_KEYS = { mechanism = true, user = true, password = true,
  password_file = true, realm = true, service = true, server = true }
local function check_secure(opts, fname)
  local tls, sasl = opts.tls, opts.sasl
  if tls == nil and sasl == nil then return nil end
  local out = {}
  for _, part in ipairs({ { "tls", tls, TLS_KEYS },
                          { "sasl", sasl, SASL_KEYS } }) do
    local name, t, keys = part[1], part[2], part[3]
    if t ~= nil and type(t) ~= "table" then
      argerror(2, fname, name .. " must be a table")
    end
    check.check_options(t or {}, keys, 2, fname, name .. ".")
    for k, v in pairs(t or {}) do
      if k == "verify_host" then -- (the one that is no string)
        if type(v) ~= "boolean" then
          argerror(2, fname, "tls.verify_host must be a boolean")
        end
        k, v = "no_host_check", not v
      elseif type(v) ~= "string" or v == "" or v:find("\0", 1, true) then
        argerror(2, fname, ("%s.%s must be a non-empty string"):format(name,
          k))
      end
      out[k] = v
    end
  end
  -- (cert and key: the client's certificate, which a server with
  -- ssl.clientAuth=none does not ask for)
  if tls and not (tls.ca and (tls.cert == nil) == (tls.key == nil)) then
    argerror(2, fname, "tls needs ca, and cert and key together (PEM " ..
      "files; without cert and key, no client certificate is presented)")
  end
  if tls and tls.key_password and not tls.key then
    argerror(2, fname, "tls.key_password without tls.key")
  end
  -- zookeeper_init_ssl takes "ca,cert,key,key_password" as one string
  local SPLIT = ", which the ZooKeeper C client cannot take (it joins " ..
    "the three files and the password into one string split at commas): "
  for _, k in ipairs({ "ca", "cert", "key" }) do
    if tls and tls[k] and tls[k]:find(",", 1, true) then
      argerror(2, fname, ("tls.%s %s: a file name with ','%srename the " ..
        "file, or link it under a name without one"):format(k, tls[k], SPLIT))
    end
  end
  if tls and tls.key_password and tls.key_password:find(",", 1, true) then
    argerror(2, fname, "tls.key_password contains ','" .. SPLIT ..
      "re-encrypt tls.key under a password without one")
  end
  if sasl then
    out.mechanism = sasl.mechanism or "DIGEST-MD5"
    if sasl.password and sasl.password_file then
      argerror(2, fname, "sasl: password or password_file, not both")
    end
    if out.mechanism == "DIGEST-MD5" and not (out.user and
        (out.password or out.password_file)) then
      argerror(2, fname, "sasl DIGEST-MD5 needs user and password " ..
        "(or password_file)")
    end
    if sasl.password_file then
      local f, why = io.open(sasl.password_file, "rb")
      if not f then
        return false, "sasl.password_file " .. why, "no_auth"
      end
      local line = f:read("*l") -- (nil for a directory)
      f:close()
      out.password = line and line:gsub("\r$", "") or ""
      if out.password == "" then
        return false, "sasl.password_file " .. sasl.password_file ..
          ": no password on its first line", "no_auth"
      end
      out.password_file = nil
    end
  end
  return out
end

-- ---------------------------------------------------------------------------
-- what a client was opened with

local renews = setmetatable({}, WEAK_KEYS) -- clients that renew sessions
-- client -> the participant id written into its lock and lease nodes
local ids = setmetatable({}, WEAK_KEYS)
-- client -> { on = whether its locks queue in cohorts, pass_limit }: the
-- default of every lock it makes (docs/api.md, "Cohorts")
local cohort_defaults = setmetatable({}, WEAK_KEYS)

--- Does `client` open a new session after an expiry (renew_session)?
function M.renews(client) return renews[client] == true end

--- The participant id `client` writes into its nodes (nil: C's default).
function M.id_of(client) return ids[client] end

--- `client`'s cohort defaults: { on =, pass_limit = } (either may be nil:
-- the library's, COHORT_DEFAULT and PASS_LIMIT_DEFAULT), or nil.
function M.cohort_defaults(client) return cohort_defaults[client] end

M.COHORT_DEFAULT, M.PASS_LIMIT_DEFAULT = true, 8

--- A cohort option (`cohort`, `pass_limit`) of table opts, argument n of
-- fname: checked; returns them (nil when absent).
function M.check_cohort(opts, n, fname)
  local on, limit = opts.cohort, opts.pass_limit
  if on ~= nil and type(on) ~= "boolean" then
    argerror(n, fname, "cohort must be a boolean")
  end
  if limit ~= nil and (type(limit) ~= "number" or limit ~= floor(limit) or
      limit < 0 or limit > 2 ^ 31 - 1) then
    argerror(n, fname, "pass_limit must be an integer >= 0")
  end
  return on, limit
end

-- ---------------------------------------------------------------------------
-- opening

--- zklock.connect's options (zklock.ngx.connect adds its own)
M.CONNECT_OPTIONS = check.options({ "session_timeout", "connect_timeout",
  "acl", "max_data", "auth", "renew_session", "id", "tls", "sasl", "cohort",
  "pass_limit", "self_watch_delay", "follow_ensemble" })

--- What `await` polls while the session is in state `passing` (connecting
-- at first, expired while a new session opens): "pending" until it
-- leaves.
local function session_leaving(client, passing)
  return { poll = function()
    local s, gen = client:_poll()
    return s == passing and "pending" or s, gen
  end }
end
M.session_leaving = session_leaving

--- Checks the arguments and opens the session without waiting for it.
-- `allowed`: the option names (default CONNECT_OPTIONS).
-- @return client, connect_timeout | nil, msg, code
function M.open(hosts, opts, fname, allowed)
  check.check_hosts(hosts, 1, fname)
  if opts ~= nil and type(opts) ~= "table" then
    argerror(2, fname, "table expected, got " .. type(opts))
  end
  opts = check.check_options(opts or {}, allowed or M.CONNECT_OPTIONS, 2,
    fname)
  local st = opts.session_timeout or 10
  if type(st) ~= "number" or not (st > 0 and st < 1e6) then
    argerror(2, fname, "session_timeout must be a positive number")
  end
  local ct = opts.connect_timeout or 10
  if type(ct) ~= "number" or not (ct >= 0) then
    argerror(2, fname, "connect_timeout must be a number >= 0")
  end
  local auth = opts.auth
  if auth ~= nil and (type(auth) ~= "table" or type(auth[1]) ~= "string"
      or type(auth[2]) ~= "string") then
    argerror(2, fname, "auth must be { scheme, credential }")
  end
  local acl = check_acl(opts.acl, auth or opts.sasl, fname)
  local md = opts.max_data
  if md ~= nil and (type(md) ~= "number" or md ~= floor(md) or md < 0 or
      md > 2 ^ 31 - 1) then
    argerror(2, fname, "max_data must be an integer from 0 to 2^31-1")
  end
  local renew = opts.renew_session
  if renew ~= nil and type(renew) ~= "boolean" then
    argerror(2, fname, "renew_session must be a boolean")
  end
  local id = opts.id
  if id ~= nil and (type(id) ~= "string" or #id > (md or DEFAULT_MAX_DATA))
      then
    argerror(2, fname, "id must be a string no longer than max_data")
  end
  local swd = opts.self_watch_delay
  if swd ~= nil and (type(swd) ~= "number" or not (swd >= 0 and swd < 1e9))
      then
    argerror(2, fname, "self_watch_delay must be a number of seconds >= 0")
  end
  local follow = opts.follow_ensemble
  if follow ~= nil and type(follow) ~= "boolean" then
    argerror(2, fname, "follow_ensemble must be a boolean")
  end
  local secure, smsg, scode = check_secure(opts, fname)
  local cohort, pass_limit = M.check_cohort(opts, 2, fname)
  if secure == false then return nil, smsg, scode end
  local c, msg, code = core.connect(hosts, floor(st * 1000), acl,
    renew ~= false, md, secure)
  if not c then return nil, msg, code end
  if swd then c:_self_delay(swd) end
  if follow == false then c:_follow(false) end
  ids[c] = id
  cohort_defaults[c] = { on = cohort, pass_limit = pass_limit }
  if renew ~= false then renews[c] = true end
  if auth then
    local ok, amsg, acode = c:_add_auth(auth[1], auth[2])
    if not ok then c:close(); return nil, amsg, acode end
  end
  return c, ct
end

--- Wait up to ct seconds for the first connection of client c (opened by
-- open with `hosts`); c, or nil, message, code with c closed.
function M.finish_connect(c, hosts, ct)
  local state = wait.await(c, session_leaving(c, "connecting"), now() + ct)
  if state == "connected" then return c end
  local msg, code = c:_failure() -- (expired, auth failed, no chroot: C says why)
  -- what the diagnosis found (every server refused; a plaintext client,
  -- servers that speak TLS): said at the timeout (src/core/session/probe.c)
  local hint, hcode = c:_hint()
  c:close()
  if state == "timeout" then
    return nil, ("could not connect to %s within %gs%s"):format(hosts, ct,
      hint and ": " .. hint or ""), hint and hcode or "connection_loss"
  end
  return nil, msg or "session " .. state, code or "closed"
end

return M
