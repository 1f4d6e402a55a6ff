-- TLS and SASL for zklock.testing's servers: throwaway certificates
-- (`certificates`, made with openssl), and the zoo.cfg lines and JVM
-- options of a TLS-only or a SASL server (docs/security.md, "Servers").
-- (The doc comments below are on zklock.testing's page of the reference:
-- config.ld.)

--- @module zklock.testing
local P = require "zklock.testing.process"

local M = {}

local HOST = P.HOST
local quote, run, slurp, spit, mktemp = P.quote, P.run, P.slurp, P.spit,
  P.mktemp

--- Makes a throwaway certificate authority and certificates (PEM, EC
-- P-256) for TLS specs, with `openssl`.
-- @tparam[opt] string dir a directory (default: a new one under
-- `$ZKLOCK_TEST_TMP` or `/tmp`)
-- @return a table: `dir`, `ca` (the CA's certificate), and ready-made
-- `tls` options for `zklock.connect`: `client` (good), `encrypted` (its
-- key under `key_password`), `expired` (an expired certificate),
-- `stranger` (signed by another CA, which the server does not trust),
-- `wrong_ca` (a good certificate, but a CA that does not verify the
-- server), `anonymous` (the CA alone: no client certificate, for a
-- server with `client_auth = "none"`); `server` ({ cert, key }: names
-- 127.0.0.1 and localhost), `expired_server` (expired), `elsewhere_server`
-- (good, but for another host: zk.elsewhere.example and 127.0.0.2)
function M.certificates(dir)
  dir = dir or mktemp("zklock-tls-")
  if not run("mkdir -p " .. quote(dir)) then
    error("zklock.testing: cannot make " .. dir, 0)
  end
  local function ossl(args)
    if not run("cd " .. quote(dir) .. " && openssl " .. args
               .. " >>openssl.log 2>&1") then
      error("zklock.testing: openssl " .. args .. " failed (" .. dir
            .. "/openssl.log)", 0)
    end
  end
  local newkey = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
  for _, ca in ipairs({ "ca", "other-ca" }) do
    ossl(("req -x509 %s -keyout %s.key -out %s.pem -days 3650 -subj "
          .. "'/CN=zklock test %s'"):format(newkey, ca, ca, ca))
  end
  spit(dir .. "/server.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
  spit(dir .. "/elsewhere.ext",
       "subjectAltName=DNS:zk.elsewhere.example,IP:127.0.0.2\n")
  local function leaf(name, cn, ca, days, csr, ext)
    if not csr then
      ossl(("req %s -keyout %s.key -out %s.csr -subj '/CN=%s'")
           :format(newkey, name, name, cn))
    end
    ossl(("x509 -req -in %s.csr -CA %s.pem -CAkey %s.key -CAcreateserial "
          .. "-out %s.pem -days %d%s"):format(csr or name, ca, ca, name, days,
          ext and " -extfile " .. ext or ""))
  end
  leaf("server", "localhost", "ca", 3650, nil, "server.ext")
  leaf("expired-server", "localhost", "ca", -1, "server", "server.ext")
  leaf("elsewhere-server", "zk.elsewhere.example", "ca", 3650, nil,
       "elsewhere.ext")
  leaf("client", "zklock-client", "ca", 3650)
  leaf("expired", "zklock-client", "ca", -1, "client")
  leaf("stranger", "zklock-stranger", "other-ca", 3650)
  ossl("pkey -in client.key -out client-encrypted.key -aes256 "
       .. "-passout pass:zklock-key")
  local function p(name) return dir .. "/" .. name end
  local ca = p("ca.pem")
  return {
    dir = dir, ca = ca,
    client = { ca = ca, cert = p("client.pem"), key = p("client.key") },
    encrypted = { ca = ca, cert = p("client.pem"),
                  key = p("client-encrypted.key"),
                  key_password = "zklock-key" },
    expired = { ca = ca, cert = p("expired.pem"), key = p("client.key") },
    stranger = { ca = ca, cert = p("stranger.pem"),
                 key = p("stranger.key") },
    wrong_ca = { ca = p("other-ca.pem"), cert = p("client.pem"),
                 key = p("client.key") },
    anonymous = { ca = ca },
    server = { cert = p("server.pem"), key = p("server.key") },
    expired_server = { cert = p("expired-server.pem"),
                       key = p("server.key") },
    elsewhere_server = { cert = p("elsewhere-server.pem"),
                         key = p("elsewhere-server.key") },
  }
end

-- zoo.cfg lines and JVM options of a TLS-only server (client certificate
-- required, unless opts.client_auth says "none" or "want") and of a SASL
-- server (docs/security.md, "Servers").
function M.config(st, opts, cfg)
  if opts.tls then
    local certs = type(opts.tls) == "table" and opts.tls
      or M.certificates(st.dir .. "/tls")
    local srv = opts.tls_server or certs.server
    local bundle = st.dir .. "/server-bundle.pem"
    spit(bundle, (slurp(srv.key) or "") .. (slurp(srv.cert) or ""))
    st.tls, st.certificates = certs.client, certs
    cfg[#cfg + 1] = table.concat({
      "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
      "secureClientPort=" .. st.port, "secureClientPortAddress=" .. HOST,
      "ssl.keyStore.location=" .. bundle, "ssl.keyStore.type=PEM",
      "ssl.trustStore.location=" .. certs.ca, "ssl.trustStore.type=PEM",
      "ssl.clientAuth=" .. (opts.client_auth or "need") }, "\n")
  else
    cfg[#cfg + 1] = "clientPort=" .. st.port .. "\nclientPortAddress=" .. HOST
  end
  if opts.sasl then
    local users = type(opts.sasl) == "table" and opts.sasl.users
      or { zklock = "zklock-secret" }
    local lines, first = {}, nil
    for user, pass in pairs(users) do
      lines[#lines + 1] = ('  user_%s="%s"'):format(user, pass)
      if not first or user < first then first = user end
    end
    table.sort(lines)
    spit(st.dir .. "/jaas.conf", "Server {\n  org.apache.zookeeper.server."
      .. "auth.DigestLoginModule required\n" .. table.concat(lines, "\n")
      .. ";\n};\n")
    st.jvm_opts = " -Djava.security.auth.login.config="
      .. quote(st.dir .. "/jaas.conf")
    st.sasl = { user = first, password = users[first] }
    cfg[#cfg + 1] = "authProvider.1=org.apache.zookeeper.server.auth."
      .. "SASLAuthenticationProvider"
    if not (type(opts.sasl) == "table" and opts.sasl.required == false) then
      cfg[#cfg + 1] = "enforce.auth.enabled=true\nenforce.auth.schemes=sasl"
    end
  end
end

return M
