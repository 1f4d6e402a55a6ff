-- docs/security.md's "The server" run as written (issue 37): the key
-- store made by its command, ZooKeeper started by its zkServer.sh line
-- with its zoo.cfg lines (PEM, then PKCS12), a client connected over TLS;
-- the same server started with Debian's stock class path, and the words
-- zklock has for it; then its SASL set-up (JAAS file, zoo.cfg lines,
-- start line), with a login, a refusal and a session without SASL.
-- Only paths, ports and the listening address (127.0.0.1) are changed.
-- Once, in the Lua 5.4 pass: it starts four JVMs, and what it checks is
-- the page, not a runtime (tls_spec and sasl_spec run both).
local H = require "spec.helpers"

if jit then return end

local zklock = H.zklock
local sh, block, subst, quote = H.sh, H.doc_block, H.subst, H.shquote
local PAGE = "docs/security.md"
local TLS, SASL = "### TLS on the server", "### SASL on the server"

describe("docs/security.md's server section, as written", function()
  local dir, certs, pgid, n = nil, nil, nil, 0

  -- the page's paths made this run's
  local function paths(text, count)
    text = text:gsub("/etc/zookeeper/tls/", certs.dir .. "/")
    return subst(text, "/etc/zookeeper/conf/zoo.cfg", dir .. "/zoo.cfg",
                 count or 0)
  end

  -- zoo.cfg: what any server has (its data, no admin server), where it
  -- listens, and the page's lines; then the page's start line, in a
  -- process group of its own.  The port.
  local function start(start_line, lines, plaintext)
    n = n + 1
    local port = H.tcore.free_port()
    local cfg = ("tickTime=2000\ndataDir=%s/data-%d\n" ..
      "admin.enableServer=false\n"):format(dir, n)
    if plaintext then
      cfg = cfg .. ("clientPort=%d\nclientPortAddress=127.0.0.1\n")
        :format(port)
    else
      cfg = cfg .. "secureClientPortAddress=127.0.0.1\n"
    end
    cfg = cfg .. lines:gsub("secureClientPort=2281",
                            "secureClientPort=" .. port)
    H.write(dir .. "/zoo.cfg", cfg)
    local log = ("%s/server-%d.log"):format(dir, n)
    local p = assert(io.popen(("setsid sh -c %s >%s 2>&1 </dev/null & " ..
      "echo $!"):format(quote(paths(start_line, 1)), quote(log))))
    pgid = tonumber(p:read("*a"):match("%d+"))
    p:close()
    return port, log
  end

  local function stop()
    if not pgid then return end
    os.execute("kill -TERM -- -" .. pgid .. " 2>/dev/null")
    H.wait_until(function()
      return not os.execute("kill -0 -- -" .. pgid .. " 2>/dev/null")
    end, 15, "the server to stop")
    pgid = nil
  end

  lazy_setup(function()
    dir = H.tmpname("server-docs")
    assert(os.execute("mkdir -p " .. quote(dir)))
    certs = H.testing.certificates(dir .. "/tls")
  end)
  after_each(stop)
  lazy_teardown(function()
    stop()
    os.execute("rm -rf " .. quote(dir))
  end)

  local function tls_connect(port)
    return zklock.connect("127.0.0.1:" .. port,
      { tls = certs.client, connect_timeout = 30 })
  end

  local function works(zk)
    local m = zk:mutex(H.path("server-docs"))
    assert.truthy(m:acquire(30))
    assert.is_true(m:release())
    zk:close()
  end

  it("TLS with PEM stores: the key store, zoo.cfg, the class path",
      function()
    local out, rc = sh(paths(block(PAGE, TLS, "sh", 1)))
    assert.equal(0, rc, out)
    local port, log = start(block(PAGE, TLS, "sh", 3),
                            paths(block(PAGE, TLS, "properties", 1)))
    local zk, msg = tls_connect(port)
    assert(zk, (msg or "") .. "\n" .. (H.read(log) or ""))
    works(zk)
  end)

  it("TLS with a PKCS12 key store", function()
    local out, rc = sh(paths(block(PAGE, TLS, "sh", 2)))
    assert.equal(0, rc, out)
    local port, log = start(block(PAGE, TLS, "sh", 3),
      paths(block(PAGE, TLS, "properties", 1)) ..
      paths(block(PAGE, TLS, "properties", 2)))
    local zk, msg = tls_connect(port)
    assert(zk, (msg or "") .. "\n" .. (H.read(log) or ""))
    works(zk)
  end)

  it("Debian's stock class path: the server drops every handshake, and " ..
     "zklock names both causes", function()
    local line = block(PAGE, TLS, "sh", 3)
    -- (the page's start line without its SERVER_JVMFLAGS)
    local stock = assert(line:match("^SERVER_JVMFLAGS=%b\"\" (.*)$"))
    local port, log = start(stock, paths(block(PAGE, TLS, "properties", 1)))
    local zk, msg, code = tls_connect(port)
    assert.is_nil(zk)
    assert.equal("tls", code)
    assert.matches("the server 127.0.0.1:" .. port .. " closed the " ..
      "connection in the TLS handshake (unexpected eof while reading): a " ..
      "plaintext port (TLS is on its secureClientPort), or a server whose " ..
      "TLS is broken: look at its log", msg, 1, true)
    -- and its log says what the page says it says
    H.wait_until(function()
      return (H.read(log) or ""):find("NoClassDefFoundError: io/netty/" ..
        "handler/codec/ByteToMessageDecoder", 1, true)
    end, 10, "the server's log to name the missing class")
  end)

  it("SASL: the JAAS file, zoo.cfg, the JVM flag", function()
    H.write(dir .. "/jaas.conf", block(PAGE, SASL, ""))
    local line = subst(block(PAGE, SASL, "sh"), "/etc/zookeeper/jaas.conf",
                       dir .. "/jaas.conf")
    local port, log = start(line, block(PAGE, SASL, "properties"), true)
    local hosts = "127.0.0.1:" .. port
    local pw = dir .. "/bob.password"
    H.write(pw, "bob-secret\n")
    local zk, msg = zklock.connect(hosts, { connect_timeout = 30,
      sasl = { user = "bob", password_file = pw } })
    assert(zk, (msg or "") .. "\n" .. (H.read(log) or ""))
    works(zk)
    -- (bounds of 30 s: under valgrind, make memcheck, the login's answer
    -- took longer than connect's default)
    local c, _, code = zklock.connect(hosts, { connect_timeout = 30,
      sasl = { user = "bob", password = "wrong" } })
    assert.is_nil(c)
    assert.equal("no_auth", code)
    -- enforce.auth.enabled: a session without SASL gets nothing done
    local anon = assert(zklock.connect(hosts, { connect_timeout = 30 }))
    local ok, amsg, acode = anon:mutex(H.path("server-docs")):acquire(30)
    assert.is_nil(ok)
    assert.equal("no_auth", acode)
    assert.matches("required to do SASL authentication", amsg, 1, true)
    anon:close()
  end)
end)
