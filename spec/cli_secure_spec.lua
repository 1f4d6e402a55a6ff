-- The command-line tool, bin/zklock, over TLS and SASL (docs/cli.md):
-- run as separate OS processes against TLS-only and SASL servers.
-- Shared with the other cli specs: spec/cli.lua.
local H = require "spec.helpers"
local C = require "spec.cli"

local USAGE, UNAVAILABLE = C.USAGE, C.UNAVAILABLE
local finished = C.finished

-- TLS and SASL (docs/cli.md): options, or the environment; passwords only
-- from the environment or a file.  In the Lua 5.4 pass only: the tool's
-- TLS and SASL are zklock.connect's, run under LuaJIT by tls_spec.
if jit then return end
describe("zklock over TLS and SASL", function()
  local procs = {}
  -- the tool with environment variables ("NAME=value ..." as shell words)
  local function cli_env(env, ...)
    local p = H.spawn_lua(env .. " " .. H.lua,
      os.getenv("LUA_CPATH") or package.cpath, "bin/zklock", ...)
    procs[#procs + 1] = p
    return p
  end
  after_each(function()
    for _, p in ipairs(procs) do p:cleanup() end
    procs = {}
  end)

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
    -- half a TLS set-up is a usage error
    rc, out = finished(cli_env("", "holders", srv.connect_string,
      H.path("cli-tls"), "--tls-ca", t.ca))
    assert.equal(USAGE, rc)
    assert.matches("tls needs ca, cert and key", out, 1, true)
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
    assert.matches("SASL DIGEST-MD5 authentication as 'bob' failed", out, 1,
      true)
    rc, out = finished(cli_env("", "run", hosts, H.path("cli-sasl"),
      "--sasl-user", "bob", "--sasl-password", "bob-pw", "true"))
    assert.equal(USAGE, rc)
    assert.matches("unknown option --sasl-password", out, 1, true)
    H.assert_no_orphans(srv)
    srv:close()
  end)
end)
