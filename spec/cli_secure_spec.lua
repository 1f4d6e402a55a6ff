-- The command-line tool, bin/zklock, over TLS and SASL (docs/cli.md):
-- run as separate OS processes against TLS-only and SASL servers.
-- Shared with the other cli specs: spec/cli.lua.
local H = require "spec.helpers"
local C = require "spec.cli"

local USAGE, UNAVAILABLE = C.USAGE, C.UNAVAILABLE
local finished = C.finished

local procs = {}
-- the tool with environment variables ("NAME=value ..." as shell words)
local function cli_env(env, ...)
  local p = H.spawn_lua(env .. " " .. H.lua,
    os.getenv("LUA_CPATH") or package.cpath, "bin/zklock", ...)
  procs[#procs + 1] = p
  return p
end
local function cleanup()
  for _, p in ipairs(procs) do p:cleanup() end
  procs = {}
end

-- The tool's own words (issue 37): what is wrong with a TLS or SASL
-- set-up is said with the flags and variables that set it, never
-- zklock.connect's option names; a ',' the C client cannot take is a
-- usage error (64), not an internal one (70).  No server: every case
-- fails before connecting.  Under both runtimes.
describe("zklock's words for TLS and SASL", function()
  local certs
  local HOSTS = "127.0.0.1:1" -- (never reached)
  lazy_setup(function() certs = H.testing.certificates() end)
  after_each(cleanup)

  local function fails(rc, env, ...)
    local got, out = finished(cli_env(env, "holders", HOSTS, "/x", ...))
    assert.equal(rc, got, out)
    assert.not_matches("internal error", out, 1, true)
    assert.not_matches("%f[%w_./]tls%.%a", out) -- (connect's words)
    return out
  end

  it("a ',' in a file name or the key's password: 64, naming the flag " ..
     "or variable", function()
    local c = certs.client
    local out = fails(USAGE, "", "--tls-ca", c.ca, "--tls-cert", c.cert,
      "--tls-key", "/a,b/client.key")
    assert.matches("holders: --tls-key /a,b/client.key: a file name with " ..
      "',', which the ZooKeeper C client cannot take", out, 1, true)
    out = fails(USAGE, "ZKLOCK_TLS_CERT=/x,y", "--tls-ca", c.ca,
      "--tls-key", c.key)
    assert.matches("holders: ZKLOCK_TLS_CERT /x,y: a file name with ','",
      out, 1, true)
    out = fails(USAGE, "ZKLOCK_TLS_KEY_PASSWORD=a,b", "--tls-ca", c.ca,
      "--tls-cert", c.cert, "--tls-key", c.key)
    assert.matches("holders: ZKLOCK_TLS_KEY_PASSWORD contains ','", out, 1,
      true)
    assert.matches("re-encrypt --tls-key under a password without one",
      out, 1, true)
  end)

  it("half a TLS set-up, an encrypted key without its password, a file " ..
     "that does not load", function()
    local c, e = certs.client, certs.encrypted
    local out = fails(USAGE, "ZKLOCK_TLS_CERT=" .. c.cert, "--tls-ca", c.ca)
    assert.matches("holders: --tls-ca, --tls-cert and --tls-key (or " ..
      "ZKLOCK_TLS_CA, ZKLOCK_TLS_CERT and ZKLOCK_TLS_KEY) go together " ..
      "(--tls-ca alone: no client certificate): --tls-key missing", out, 1,
      true)
    out = fails(UNAVAILABLE, "", "--tls-ca", e.ca, "--tls-cert", e.cert,
      "--tls-key", e.key)
    assert.matches("--tls-key " .. e.key .. ": not a readable PEM private " ..
      "key (an encrypted key needs ZKLOCK_TLS_KEY_PASSWORD)", out, 1, true)
    out = fails(UNAVAILABLE, "ZKLOCK_TLS_KEY_PASSWORD=wrong", "--tls-ca",
      e.ca, "--tls-cert", e.cert, "--tls-key", e.key)
    assert.matches("or the wrong ZKLOCK_TLS_KEY_PASSWORD", out, 1, true)
    -- a file whose own name looks like an option keeps its name
    local odd = certs.dir .. "/tls.ca"
    out = fails(UNAVAILABLE, "ZKLOCK_TLS_CA=" .. odd, "--tls-cert", c.cert,
      "--tls-key", c.key)
    assert.matches("ZKLOCK_TLS_CA " .. odd .. ": not a readable PEM file",
      out, 1, true)
  end)

  it("SASL: no password, a password file that cannot be read", function()
    local out = fails(USAGE, "", "--sasl-user", "bob")
    assert.matches("holders: SASL DIGEST-MD5 needs --sasl-user (or " ..
      "ZKLOCK_SASL_USER) and a password: ZKLOCK_SASL_PASSWORD, or " ..
      "--sasl-password-file (or ZKLOCK_SASL_PASSWORD_FILE)", out, 1, true)
    out = fails(UNAVAILABLE, "ZKLOCK_SASL_USER=bob",
      "--sasl-password-file", "/nonexistent")
    assert.matches("--sasl-password-file /nonexistent: No such file", out,
      1, true)
    out = fails(UNAVAILABLE, "ZKLOCK_SASL_PASSWORD_FILE=/nonexistent",
      "--sasl-user", "bob")
    assert.matches("ZKLOCK_SASL_PASSWORD_FILE /nonexistent: No such file",
      out, 1, true)
  end)
end)

-- TLS and SASL (docs/cli.md): options, or the environment; passwords only
-- from the environment or a file.  In the Lua 5.4 pass only: the tool's
-- TLS and SASL are zklock.connect's, run under LuaJIT by tls_spec.
if jit then return end
describe("zklock over TLS and SASL", function()
  after_each(cleanup)

  it("run and holders on a TLS-only server, by options and by the " ..
     "environment", function()
    local srv = H.testing.server({ tls = true })
    local t = srv.tls
    local rc, out = finished(cli_env("", "run", srv.connect_string,
      H.path("cli-tls"), "--tls-ca", t.ca, "--tls-cert", t.cert,
      "--tls-key", t.key, "--", "sh", "-c", "exit 7"))
    assert.equal(7, rc, out)
    local env = ("ZKLOCK_TLS_CA='%s' ZKLOCK_TLS_CERT='%s' ZKLOCK_TLS_KEY='%s'")
      :format(t.ca, t.cert, t.key)
    rc, out = finished(cli_env(env, "run", srv.connect_string,
      H.path("cli-tls"), "sh", "-c", "exit 5"))
    assert.equal(5, rc, out)
    rc, out = finished(cli_env(env, "holders", srv.connect_string,
      H.path("cli-tls")))
    assert.equal(1, rc, out) -- nobody holds it: but it connected
    -- no certificate: the server speaks TLS, says the tool (at its
    -- connect timeout)
    rc, out = finished(cli_env("", "holders", srv.connect_string,
      H.path("cli-tls"), "--connect-timeout", "2"))
    assert.equal(UNAVAILABLE, rc)
    assert.matches("speaks TLS", out, 1, true)
    -- the CA alone: no client certificate, which this server wants
    rc, out = finished(cli_env("", "holders", srv.connect_string,
      H.path("cli-tls"), "--tls-ca", t.ca))
    assert.equal(UNAVAILABLE, rc)
    assert.matches("requires a client certificate", out, 1, true)
    H.assert_no_orphans(srv)
    srv:close()
  end)

  it("run with SASL: the password from the environment or a file, never " ..
     "an argument", function()
    local srv = H.testing.server({ sasl = { users = { bob = "bob-pw" } } })
    local hosts = srv.connect_string
    local rc, out = finished(cli_env("ZKLOCK_SASL_PASSWORD=bob-pw", "run",
      hosts, H.path("cli-sasl"), "--sasl-user", "bob", "sh", "-c",
      "exit 6"))
    assert.equal(6, rc, out)
    local file = H.tmpname("pw")
    H.write(file, "bob-pw\n")
    rc, out = finished(cli_env("ZKLOCK_SASL_USER=bob", "run", hosts,
      H.path("cli-sasl"), "--sasl-password-file", file, "sh", "-c",
      "exit 4"))
    assert.equal(4, rc, out)
    os.remove(file)
    rc, out = finished(cli_env("ZKLOCK_SASL_PASSWORD=wrong", "run", hosts,
      H.path("cli-sasl"), "--sasl-user", "bob", "true"))
    assert.equal(UNAVAILABLE, rc)
    assert.matches("SASL DIGEST-MD5 authentication as 'bob' refused by " ..
      "the server", out, 1, true)
    rc, out = finished(cli_env("", "run", hosts, H.path("cli-sasl"),
      "--sasl-user", "bob", "--sasl-password", "bob-pw", "true"))
    assert.equal(USAGE, rc)
    assert.matches("unknown option --sasl-password", out, 1, true)
    H.assert_no_orphans(srv)
    srv:close()
  end)
end)
