-- SASL sessions (docs/security.md) against a real ZooKeeper that requires
-- SASL DIGEST-MD5 of every session: the right credentials work, wrong
-- ones fail at once with no_auth and why, and ACLs by the SASL identity
-- keep another identity off a lock's nodes.
local H = require "spec.helpers"

local zklock = H.zklock

describe("SASL DIGEST-MD5", function()
  local srv
  local USERS = { alice = "alice-pw", bob = "bob-pw" }

  local function as(user, opts)
    opts = opts or {}
    opts.session_timeout = 5
    opts.sasl = { user = user, password = USERS[user] }
    return assert(zklock.connect(srv.connect_string, opts))
  end

  lazy_setup(function()
    srv = H.testing.server({ sasl = { users = USERS } })
  end)
  lazy_teardown(function()
    if srv then
      H.assert_no_orphans(srv) -- (as alice: the first user by name)
      srv:close()
    end
  end)

  it("this build has it; the testing server names its first user", function()
    assert.is_true(zklock.features.sasl)
    assert.same({ user = "alice", password = "alice-pw" }, srv.sasl)
  end)

  it("the right credentials: a mutex acquired and released", function()
    local zk = as("bob")
    local m = zk:mutex(H.path("sasl"))
    assert.truthy(m:acquire(5))
    assert.is_true(m:release())
    zk:close()
  end)

  it("a password from a file", function()
    local file = H.tmpname("pw")
    H.write(file, "bob-pw\n")
    local zk = assert(zklock.connect(srv.connect_string, {
      sasl = { user = "bob", password_file = file } }))
    assert.equal("connected", zk:state())
    zk:close()
    os.remove(file)
  end)

  it("a wrong password fails at once with no_auth", function()
    local t0 = H.now()
    local c, msg, code = zklock.connect(srv.connect_string, {
      connect_timeout = 20, sasl = { user = "bob", password = "nope" } })
    assert.is_nil(c)
    assert.equal("no_auth", code)
    assert.equal("SASL DIGEST-MD5 authentication as 'bob' refused by " ..
                 "the server: a wrong password or an unknown user (the " ..
                 "server does not say which; its log does)", msg)
    assert.is_true(H.now() - t0 < 20) -- (before its connect_timeout)
    -- a client not waited for (as zklock.ngx.connect opens it): its state
    -- says so, and what it is asked answers no_auth
    c = assert(require("zklock.rt.session").open(srv.connect_string,
      { sasl = { user = "bob", password = "nope" } }, "connect"))
    H.wait_until(function() return c:state() ~= "connecting" end, 20,
      "the SASL verdict")
    assert.equal("auth_failed", c:state())
    assert.same({ nil, msg, "no_auth" }, { c:mutex("/x"):acquire(1) })
    c:close()
  end)

  it("an unknown user: refused by the server too (DIGEST-MD5 does not " ..
     "tell it from a wrong password)", function()
    local c, msg, code = zklock.connect(srv.connect_string, {
      connect_timeout = 20, sasl = { user = "mallory", password = "x" } })
    assert.is_nil(c)
    assert.equal("no_auth", code)
    assert.matches("as 'mallory' refused by the server: a wrong password " ..
                   "or an unknown user", msg, 1, true)
  end)

  it("a server with no SASL at all: says so, not refused", function()
    local plain = H.testing.server()
    local t0 = H.now()
    local c, msg, code = zklock.connect(plain.connect_string, {
      connect_timeout = 20, sasl = { user = "bob", password = "bob-pw" } })
    plain:close()
    assert.is_nil(c)
    assert.equal("no_auth", code)
    assert.equal("SASL DIGEST-MD5 authentication as 'bob' failed: the " ..
                 "server sent no challenge, so it has no SASL set up (a " ..
                 "JAAS Server section: docs/security.md, \"The server\")",
                 msg)
    assert.is_true(H.now() - t0 < 20)
    -- another mechanism is not told apart (PLAIN asks for the password at
    -- its start, challenge or not): it does not claim to know
    local plain2 = H.testing.server()
    c, msg, code = zklock.connect(plain2.connect_string, {
      connect_timeout = 20, sasl = { mechanism = "PLAIN", user = "bob",
                                     password = "bob-pw" } })
    plain2:close()
    assert.is_nil(c)
    assert.equal("no_auth", code)
    assert.equal("SASL PLAIN authentication as 'bob' failed (refused by " ..
                 "the server, or the mechanism failed here: the C client's " ..
                 "log at error says which)", msg)
  end)

  it("no SASL on a server that requires it: requests fail with no_auth",
      function()
    local zk = assert(zklock.connect(srv.connect_string))
    local ok, msg, code = zk:mutex(H.path("nosasl")):acquire(5)
    assert.is_nil(ok)
    assert.equal("no_auth", code)
    assert.matches("required to do SASL authentication", msg, 1, true)
    zk:close()
  end)

  it("an ACL by SASL identity keeps another identity off the lock's nodes",
      function()
    local path = H.path("sasl-acl")
    local alice = as("alice", { acl = { { "sasl", "alice", "cdrwa" } } })
    local bob = as("bob")
    local m = alice:mutex(path)
    assert.truthy(m:acquire(5))
    -- bob can neither queue under it, nor read alice's node, nor ask her
    -- to let go (revoke writes her node)
    local ok, msg, code = bob:mutex(path):acquire(1)
    assert.is_nil(ok)
    assert.equal("no_auth", code)
    -- (bob is authenticated: the ACL does not allow him, and says so)
    assert.matches("ZNOAUTH: not allowed (the node's ACL does not grant " ..
                   "this to the session's identities)", msg, 1, true)
    local d, _, dcode = bob:get(m:node())
    assert.is_nil(d)
    assert.equal("no_auth", dcode)
    local r, _, rcode = zklock.revoke(bob, path)
    assert.is_nil(r)
    assert.equal("no_auth", rcode)
    assert.is_true(m:is_held())
    -- the "creator" preset is the session's own SASL identity
    local p2 = H.path("sasl-creator")
    local alice2 = as("alice", { acl = "creator" })
    local m2 = alice2:mutex(p2)
    assert.truthy(m2:acquire(5))
    local ok2, _, code2 = bob:mutex(p2):acquire(1)
    assert.is_nil(ok2)
    assert.equal("no_auth", code2)
    assert.is_true(m2:release())
    assert.is_true(m:release())
    -- alice (the teardown's identity) can still see and clean up
    alice2:close()
    alice:close()
    bob:close()
  end)

  it("a mechanism with no plug-in fails before connecting", function()
    local c, msg, code = zklock.connect(srv.connect_string, {
      sasl = { mechanism = "NO-SUCH-MECH", user = "bob",
               password = "bob-pw" } })
    assert.is_nil(c)
    assert.equal("no_auth", code)
    assert.matches("sasl: mechanism NO-SUCH-MECH cannot start here", msg, 1,
                   true)
    assert.matches("no Cyrus SASL plug-in for it", msg, 1, true)
  end)

  it("misuse raises: no password, both password and file, unknown keys",
      function()
    local hosts = srv.connect_string
    assert.has_error(function()
      zklock.connect(hosts, { sasl = { user = "bob" } })
    end, "bad argument #2 to 'connect' (sasl DIGEST-MD5 needs user and " ..
      "password (or password_file))")
    assert.has_error(function()
      zklock.connect(hosts, { sasl = { user = "b", password = "p",
                                        password_file = "/x" } })
    end, "bad argument #2 to 'connect' (sasl: password or password_file, " ..
      "not both)")
    assert.has_error(function()
      zklock.connect(hosts, { sasl = { user = "b", pasword = "p" } })
    end, "bad argument #2 to 'connect' (unknown option " ..
      "'sasl.pasword' (did you mean 'sasl.password'?))")
  end)

  it("a password_file that cannot be read returns nil, msg, no_auth, as " ..
     "a TLS file that cannot be read returns nil, msg, tls", function()
    local hosts = srv.connect_string
    assert.same({ nil, "sasl.password_file /nonexistent: No such file or " ..
                  "directory", "no_auth" },
      { zklock.connect(hosts, { sasl = { user = "b",
                                         password_file = "/nonexistent" } }) })
    local empty = H.tmpname("empty")
    H.write(empty, "\n")
    for _, file in ipairs({ empty, "/tmp" }) do
      assert.same({ nil, "sasl.password_file " .. file ..
                    ": no password on its first line", "no_auth" },
        { zklock.connect(hosts, { sasl = { user = "b",
                                           password_file = file } }) })
    end
    os.remove(empty)
    -- (what the arguments alone show is wrong still raises, before any
    -- file is read)
    assert.has_error(function()
      zklock.connect(hosts, { sasl = { password_file = "/nonexistent" } })
    end, "bad argument #2 to 'connect' (sasl DIGEST-MD5 needs user and " ..
      "password (or password_file))")
  end)
end)
