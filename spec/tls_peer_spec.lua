-- TLS that checks whom it talks to, and TLS without a client certificate
-- (docs/security.md, "TLS"), against real TLS-only servers: the server's
-- certificate must name the host dialled (by IP address or DNS name); one
-- for another host fails at once with why, unless tls.verify_host =
-- false; a server with ssl.clientAuth=none takes a client that presents no
-- certificate, alone and with digest auth; a 3-member TLS ensemble keeps
-- a hold while its leader is killed, and its TLS clients do not follow
-- its configuration (docs/ensemble.md, "What it does not follow").
local H = require "spec.helpers"

local zklock = H.zklock

local TIMEOUT = 30

-- connect(hosts, opts) fails with code tls and a message holding `says`,
-- well before its connect timeout (H.fails_tls)
local function fails_tls(hosts, opts, says)
  opts.connect_timeout = TIMEOUT
  H.fails_tls(hosts, opts, says, TIMEOUT - 5)
end

local function with(t, k, v)
  local out = {}
  for a, b in pairs(t) do out[a] = b end
  out[k] = v
  return out
end

describe("TLS peers", function()
  -- open: ssl.clientAuth=none, a certificate for 127.0.0.1 and localhost;
  -- elsewhere: a certificate of the same authority for another host
  local certs, open, elsewhere

  lazy_setup(function()
    certs = H.testing.certificates()
    open = H.testing.server({ tls = certs, client_auth = "none" })
    elsewhere = H.testing.server({ tls = certs,
                                   tls_server = certs.elsewhere_server })
  end)
  lazy_teardown(function()
    if open then H.assert_no_orphans(open); open:close() end
    if elsewhere then elsewhere:close() end
  end)

  it("this build checks the host", function()
    assert.is_true(zklock.features.tls_verify_host)
  end)

  it("a certificate that names the host dialled: by IP address and by " ..
     "DNS name", function()
    for _, host in ipairs({ "127.0.0.1", "localhost" }) do
      local zk = assert(zklock.connect(host .. ":" .. open.port,
        { tls = certs.client, connect_timeout = TIMEOUT }))
      local m = zk:mutex(H.path("tls-host"))
      assert.equal(m, m:acquire(5))
      assert.is_true(m:release())
      zk:close()
    end
  end)

  it("a certificate for another host fails at once, with why; " ..
     "verify_host = false connects", function()
    fails_tls("127.0.0.1:" .. elsewhere.port, { tls = certs.client },
      "the server 127.0.0.1:" .. elsewhere.port .. " has a certificate " ..
      "for another host: it names DNS:zk.elsewhere.example, IP:127.0.0.2, " ..
      "not 127.0.0.1 (tls.verify_host = false turns the check off")
    fails_tls("localhost:" .. elsewhere.port, { tls = certs.client },
      "it names DNS:zk.elsewhere.example, IP:127.0.0.2, not localhost")
    -- (the contrast: the same server, the check off)
    local zk = assert(zklock.connect(elsewhere.connect_string,
      { tls = with(certs.client, "verify_host", false),
        connect_timeout = TIMEOUT }))
    local m = zk:mutex(H.path("tls-elsewhere"))
    assert.equal(m, m:acquire(5))
    assert.is_true(m:release())
    zk:close()
  end)

  it("no client certificate, against ssl.clientAuth=none: a mutex " ..
     "across clients, a barrier", function()
    local a = assert(zklock.connect(open.connect_string,
      { tls = certs.anonymous, connect_timeout = TIMEOUT }))
    local b = assert(zklock.connect(open.connect_string,
      { tls = certs.anonymous, connect_timeout = TIMEOUT }))
    local path = H.path("tls-anon")
    local ma, mb = a:mutex(path), b:mutex(path)
    assert.equal(ma, ma:acquire(5))
    local ok, _, code = mb:acquire(0.2)
    assert.is_nil(ok)
    assert.equal("timeout", code)
    assert.is_true(ma:release())
    assert.equal(mb, mb:acquire(5))
    assert.is_true(mb:release())
    local bpath = H.path("tls-anon-bar")
    local bar = a:barrier(bpath)
    assert.truthy(bar:set())
    ok, _, code = b:barrier(bpath):wait(0.2)
    assert.is_nil(ok)
    assert.equal("timeout", code)
    assert.truthy(bar:remove())
    assert.truthy(b:barrier(bpath):wait(5))
    a:close()
    b:close()
  end)

  it("no client certificate, with digest auth: the ACL holds", function()
    local path = H.path("tls-anon-acl")
    local u1 = assert(zklock.connect(open.connect_string,
      { tls = certs.anonymous, acl = "creator",
        auth = { "digest", "u1:secret1" }, connect_timeout = TIMEOUT }))
    local u2 = assert(zklock.connect(open.connect_string,
      { tls = certs.anonymous, acl = "open",
        auth = { "digest", "u2:secret2" }, connect_timeout = TIMEOUT }))
    local a = u1:mutex(path)
    assert.equal(a, a:acquire(5))
    local ok, _, code = u2:mutex(path):acquire(5)
    assert.is_nil(ok)
    assert.equal("no_auth", code)
    assert.is_true(a:release())
    u1:close()
    u2:close()
  end)

  it("no client certificate where the server requires one: fails with why",
     function()
    fails_tls(elsewhere.connect_string,
      { tls = with(certs.anonymous, "verify_host", false) },
      "the server " .. elsewhere.connect_string .. " requires a client " ..
      "certificate")
  end)

  it("misuse raises: cert without key, key_password without key, a " ..
     "verify_host that is no boolean", function()
    local hosts = open.connect_string
    assert.has_error(function()
      zklock.connect(hosts, { tls = { ca = certs.ca, cert = certs.ca } })
    end, "bad argument #2 to 'connect' (tls needs ca, and cert and key " ..
      "together (PEM files; without cert and key, no client certificate " ..
      "is presented))")
    assert.has_error(function()
      zklock.connect(hosts, { tls = { ca = certs.ca, key_password = "x" } })
    end, "bad argument #2 to 'connect' (tls.key_password without tls.key)")
    assert.has_error(function()
      zklock.connect(hosts, { tls = { ca = certs.ca, verify_host = "no" } })
    end, "bad argument #2 to 'connect' (tls.verify_host must be a boolean)")
  end)
end)

describe("a 3-member TLS ensemble", function()
  local cl

  -- (reconfig: each member has a plaintext client port too, which its
  -- configuration names: cl.plain_connect_string)
  lazy_setup(function()
    cl = H.testing.cluster(3, { tls = true, reconfig = true })
  end)
  lazy_teardown(function() H.end_cluster(cl) end)

  it("a hold lives through the leader's kill: the session reconnects " ..
     "over TLS to another member, a waiter gets the lock after it",
     function()
    local path = H.path("tls-ens")
    local opts = { tls = cl.tls, session_timeout = 10,
                   connect_timeout = TIMEOUT }
    local zk1 = assert(zklock.connect(cl.connect_string, opts))
    local zk2 = assert(zklock.connect(cl.connect_string, opts))
    local holder = zk1:mutex(path)
    assert.equal(holder, holder:acquire(10))
    local token, session = holder:token(), zk1:session_id()
    local old = assert(cl:leader())
    assert.equal(0, select(2, H.sh("kill -9 " .. old:pid())))
    local new = assert(cl:leader(60))
    assert.not_equal(old.id, new.id)
    H.wait_until(function()
      return zk1:state() == "connected" and zk2:state() == "connected"
    end, 30, "both clients connected again")
    assert.equal(session, zk1:session_id())
    assert.is_true(holder:is_held())
    assert.equal(token, holder:token())
    local waiter = zk2:mutex(path)
    local ok, _, code = waiter:acquire(0.5)
    assert.is_nil(ok)
    assert.equal("timeout", code)
    assert.is_true(holder:release())
    assert.equal(waiter, waiter:acquire(20))
    assert.is_true(waiter:token() > token)
    assert.is_true(waiter:release())
    assert(old:start())
    zk1:close()
    zk2:close()
  end)

  it("a TLS client does not follow the ensemble (its configuration names " ..
     "plaintext ports), where a plaintext client does: both go on",
     function()
    local path = H.path("tls-follow")
    local zk = assert(zklock.connect(cl.connect_string, { tls = cl.tls,
      session_timeout = 10, connect_timeout = TIMEOUT }))
    local plain = assert(zklock.connect(cl.plain_connect_string,
      { session_timeout = 10, connect_timeout = TIMEOUT }))
    local m, mp = zk:mutex(path), plain:mutex(path)
    assert.equal(m, m:acquire(10))
    assert.is_true(m:release())
    assert.equal(mp, mp:acquire(10))
    assert.is_true(mp:release())
    local before, session = zk:servers(), zk:session_id()
    assert(cl:add())
    H.wait_until(function()
      plain:dispatch()
      return select(2, plain:servers():gsub(",", "")) == 3
    end, 30, "the plaintext client following to four members")
    zk:dispatch()
    assert.equal(before, zk:servers())
    assert.equal(m, m:acquire(10))
    assert.is_true(m:release())
    assert.equal(session, zk:session_id())
    zk:close()
    plain:close()
  end)
end)
