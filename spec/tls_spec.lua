-- TLS sessions (docs/security.md) against a real TLS-only ZooKeeper
-- (secureClientPort only, a client certificate required): the recipes
-- across processes over TLS, and every way a TLS set-up fails, each with
-- its own message and the code "tls", well before the connect timeout.
-- The specs of C paths alone (the failures, the handshake bound, the
-- system build, renewal) run in the Lua 5.4 pass only (`c_only`): the
-- same C runs under LuaJIT, and make test stays under 10 minutes.
local H = require "spec.helpers"

local zklock = H.zklock
local unpack = table.unpack or unpack

-- (a failed connect and its time, and a TLS failure's code, message and
-- time: H.failing_connect, H.fails_tls; the connect timeout is 30 s)
local TIMEOUT = 30
local failing, fails_tls = H.failing_connect, H.fails_tls

describe("TLS", function()
  local srv, certs, zk
  local c_only = jit and function() end or it
  local c_only_describe = jit and function() end or describe

  lazy_setup(function()
    srv = H.testing.server({ tls = true })
    certs = srv.certificates
    zk = H.connect(srv, { tls = srv.tls, session_timeout = 5 })
  end)
  lazy_teardown(function()
    if zk then zk:close() end
    if srv then
      H.assert_no_orphans(srv)
      srv:close()
    end
  end)

  it("this build has it", function()
    assert.is_true(zklock.features.tls)
  end)

  it("the server is TLS-only, and a session over it works", function()
    assert.matches("secureClientPort=" .. srv.port,
                   srv:four_letter("conf"), 1, true)
    assert.not_matches("\nclientPort=", srv:four_letter("conf"), 1, true)
    local path = H.path("tls")
    local m = zk:mutex(path)
    assert.truthy(m:acquire(5))
    assert.is_true(m:is_held())
    assert.is_true(m:release())
  end)

  it("a mutex excludes across processes over TLS", function()
    local path, file = H.path("tls-excl"), H.tmpname("counter")
    H.write(file, "0")
    local hosts = ("tls=%s|%s|%s@%s"):format(srv.tls.ca, srv.tls.cert,
                                              srv.tls.key,
                                              srv.connect_string)
    local jobs = {}
    for i = 1, 3 do
      jobs[i] = { "spec/workers/counter.lua", hosts, path, file, "$LOG", 40,
                  "lock", "$GATE" }
    end
    local intervals = {}
    for _, text in ipairs(H.run_workers(jobs, 120)) do
      for a, b in text:gmatch("(%S+) (%S+)") do
        intervals[#intervals + 1] = { tonumber(a), tonumber(b) }
      end
    end
    assert.equal(120, #intervals)
    assert.equal(1, H.max_overlap(intervals))
    assert.equal("120", H.read(file))
    os.remove(file)
  end)

  it("a double barrier of 3 processes, and a barrier, over TLS", function()
    local path = H.path("tls-dbar")
    local hosts = ("tls=%s|%s|%s@%s"):format(srv.tls.ca, srv.tls.cert,
                                              srv.tls.key,
                                              srv.connect_string)
    local jobs = {}
    for i = 1, 3 do
      jobs[i] = { "spec/workers/dbarrier.lua", hosts, path, 3, "$LOG",
                  "$GATE", (i - 1) * 0.2, 0 }
    end
    local t = { arrive = {}, entered = {}, leave = {}, left = {} }
    for _, text in ipairs(H.run_workers(jobs, 60)) do
      for what, at in text:gmatch("(%a+) (%S+)") do
        t[what][#t[what] + 1] = tonumber(at)
      end
    end
    assert.equal(3, #t.entered)
    assert.is_true(math.min(unpack(t.entered)) >= math.max(unpack(t.arrive)))
    assert.same({}, H.children(zk, path))
    -- the plain barrier: up, a wait that times out, down, a wait that passes
    local b = zk:barrier(H.path("tls-bar"))
    assert.truthy(b:set())
    local ok, _, code = b:wait(0.2)
    assert.is_nil(ok)
    assert.equal("timeout", code)
    assert.truthy(b:remove())
    assert.truthy(b:wait(5))
  end)

  it("the C client's threads block SIGPIPE: its SSL_write to a socket " ..
     "the server closed fails, and does not kill the process", function()
    -- (before, a certificate refused just after the handshake killed the
    -- whole busted run now and then, status 141)
    local p = H.spawn("spec/workers/sigmask.lua", srv.connect_string,
                      srv.tls.ca, srv.tls.cert, srv.tls.key)
    assert.equal(0, p:wait(30), p:output())
    local threads = 0
    for _, kind, blk in p:output():gmatch("(%d+)\t(%a+)\t(%x+)") do
      -- (SIGPIPE is bit 12; the last 4 digits only: a double holds 53 bits)
      local blocked = math.floor(tonumber(blk:sub(-4), 16) / 0x1000) % 2 == 1
      if kind == "main" then
        assert.is_false(blocked) -- the process's own mask is left alone
      else
        assert.is_true(blocked, "a thread takes SIGPIPE:\n" .. p:output())
        threads = threads + 1
      end
    end
    assert.is_true(threads >= 3, p:output()) -- timer, IO, completion
    p:cleanup()
  end)

  c_only("a build against Debian's libzookeeper_mt has no TLS nor SASL, and " ..
     "says how to get them", function()
    local dir = H.tmpname("sysbuild")
    local inc = jit and "/usr/include/luajit-2.1" or "/usr/include/lua5.4"
    local ok = os.execute(("mkdir -p %s/zklock && cc -O0 -DTHREADED " ..
      "-D_GNU_SOURCE -std=gnu99 -fPIC -fvisibility=hidden -I%s -shared " ..
      "-o %s/zklock/core.so src/core/*/*.c src/lua/*.c -lzookeeper_mt " ..
      "-lpthread"):format(dir, inc, dir))
    assert.is_true(ok == true or ok == 0, "the system build failed")
    local script = dir .. "/try.lua"
    H.write(script, [[
      local zklock = require "zklock"
      local hosts, ca, cert, key = ...
      print("tls=" .. tostring(zklock.features.tls) .. " sasl=" ..
            tostring(zklock.features.sasl))
      print(select(3, zklock.connect(hosts, { tls = { ca = ca, cert = cert,
        key = key } })), (select(2, zklock.connect(hosts, { tls = {
        ca = ca, cert = cert, key = key } }))))
      print((select(2, zklock.connect(hosts, { sasl = { user = "u",
        password = "p" } }))))
    ]])
    local p = H.spawn_lua(H.lua, dir .. "/?.so", script, srv.connect_string,
                          srv.tls.ca, srv.tls.cert, srv.tls.key)
    assert.equal(0, p:wait(30), p:output())
    local out = p:output()
    p:cleanup()
    os.execute("rm -rf '" .. dir .. "'")
    assert.matches("tls=false sasl=false", out, 1, true)
    -- (naming the file: with LUA_CPATH or a rock tree first, it may not
    -- be the build one made)
    assert.matches("tls\tthe zklock loaded, " .. dir .. "/zklock/core.so, " ..
      "was built without TLS (its ZooKeeper C client has none): build " ..
      "zklock with `make`", out, 1, true)
    assert.matches("the zklock loaded, " .. dir .. "/zklock/core.so, was " ..
      "built without SASL", out, 1, true)
  end)

  c_only("a client closed while its TLS handshake waits on a frozen server " ..
     "closes at once", function()
    -- (the C client's handshake loop had no end: zookeeper_close waited
    -- for the server; tools/zkclient-tls-handshake.patch)
    local proxy = H.testing.proxy(srv)
    local ready, go = H.tmpname("ready"), H.tmpname("go")
    local p = H.spawn("spec/workers/tls_close.lua", proxy:connect_string(),
                      srv.tls.ca, srv.tls.cert, srv.tls.key, ready, go)
    local ok, err = pcall(function()
      H.wait_until(function() return H.read(ready) end, 30, "connected")
      srv:pause()
      proxy:cut()
      H.write(go, "go")
      assert.equal(0, p:wait(60), p:output())
    end)
    srv:resume()
    local out = p:output()
    p:cleanup()
    proxy:close()
    os.remove(ready); os.remove(go)
    assert(ok, err)
    local took = tonumber(out:match("closed in (%S+)"))
    assert.is_truthy(took, out)
    assert.is_true(took < 3, out)
  end)

  it("an encrypted key with its key_password", function()
    local c = assert(zklock.connect(srv.connect_string,
                                    { tls = certs.encrypted }))
    assert.equal("connected", c:state())
    c:close()
  end)

  c_only_describe("fails at once, with code tls and why", function()
    it("a CA that does not verify the server", function()
      fails_tls(srv.connect_string, { tls = certs.wrong_ca },
        "has a certificate that tls.ca " .. certs.wrong_ca.ca ..
        " does not verify", TIMEOUT)
    end)

    it("a client certificate the server does not trust", function()
      fails_tls(srv.connect_string, { tls = certs.stranger },
        "refused the client certificate " .. certs.stranger.cert, TIMEOUT)
      -- a client not waited for (as zklock.ngx.connect opens it): its
      -- state says so, and what it is asked answers tls
      local c = assert(require("zklock.rt.session").open(srv.connect_string,
        { tls = certs.stranger }, "connect"))
      H.wait_until(function() return c:state() ~= "connecting" end,
        TIMEOUT, "the TLS verdict")
      assert.equal("tls_failed", c:state())
      local ok, msg, code = c:mutex("/x"):acquire(1)
      c:close()
      assert.is_nil(ok)
      assert.equal("tls", code)
      assert.matches("refused the client certificate", msg, 1, true)
    end)

    it("an expired client certificate, before connecting", function()
      fails_tls(srv.connect_string, { tls = certs.expired },
        "tls.cert " .. certs.expired.cert .. " has expired", 5)
    end)

    it("a plaintext client on the TLS port: at its connect timeout (a " ..
       "server may take both on one port), with why", function()
      local c, msg, code = failing(srv.connect_string,
                                   { connect_timeout = 2 })
      assert.is_nil(c)
      assert.equal("tls", code)
      assert.matches("could not connect to " .. srv.connect_string ..
        " within 2s: the server " .. srv.connect_string .. " speaks TLS: " ..
        "connect with tls", msg, 1, true)
    end)

    it("a TLS client on a plaintext port", function()
      local plain = H.testing.server()
      local ok, err = pcall(fails_tls, plain.connect_string,
        { tls = srv.tls }, "closed the connection in the TLS handshake " ..
        "(unexpected eof while reading): a plaintext port (TLS is on its " ..
        "secureClientPort), or a server whose TLS is broken: look at its " ..
        "log", TIMEOUT)
      plain:close()
      assert(ok, err)
    end)

    it("a server whose certificate expired", function()
      local old = H.testing.server({ tls = certs,
                                     tls_server = certs.expired_server })
      local ok, err = pcall(fails_tls, old.connect_string,
        { tls = certs.client }, "does not verify: certificate has expired",
        TIMEOUT)
      old:close()
      assert(ok, err)
    end)

    it("files that do not load, a key of another certificate, a wrong " ..
       "key_password", function()
      local cases = {
        { { ca = certs.dir .. "/none.pem", cert = certs.client.cert,
            key = certs.client.key }, "tls.ca " .. certs.dir .. "/none.pem" },
        { { ca = certs.ca, cert = certs.client.key, key = certs.client.key },
          "tls.cert " .. certs.client.key .. ": not a readable PEM" },
        { { ca = certs.ca, cert = certs.client.cert,
            key = certs.stranger.key },
          "tls.key " .. certs.stranger.key .. " is not the key of" },
        { { ca = certs.ca, cert = certs.client.cert,
            key = certs.encrypted.key, key_password = "wrong" },
          "or the wrong key_password" },
        { { ca = certs.ca, cert = certs.client.cert,
            key = certs.encrypted.key },
          "an encrypted key needs key_password" },
      }
      for _, case in ipairs(cases) do
        fails_tls(srv.connect_string, { tls = case[1] }, case[2], 5)
      end
    end)
  end)

  it("misuse raises: a partial tls, unknown keys, ',' in a file name, " ..
     "tls with sasl", function()
    local hosts = srv.connect_string
    assert.has_error(function()
      zklock.connect(hosts, { tls = { cert = certs.ca, key = certs.ca } })
    end, "bad argument #2 to 'connect' (tls needs ca, and cert and key " ..
      "together (PEM files; without cert and key, no client certificate " ..
      "is presented))")
    assert.has_error(function()
      zklock.connect(hosts, { tls = { ca = certs.ca, cert = certs.ca,
                                       key = certs.ca, kee = "x" } })
    end, "bad argument #2 to 'connect' (unknown option " ..
      "'tls.kee' (did you mean 'tls.key'?))")
    assert.has_error(function()
      zklock.connect(hosts, { tls = "yes" })
    end, "bad argument #2 to 'connect' (tls must be a table)")
    -- a ',' is checked with the other options (not by core.connect, as
    -- its argument #6), in the words of the TLS set-up's messages
    assert.has_error(function()
      zklock.connect(hosts, { tls = { ca = certs.ca, cert = certs.ca,
                                       key = "/a,b" } })
    end, "bad argument #2 to 'connect' (tls.key /a,b: a file name with " ..
      "',', which the ZooKeeper C client cannot take (it joins the " ..
      "three files and the password into one string split at commas): " ..
      "rename the file, or link it under a name without one)")
    assert.has_error(function()
      zklock.connect(hosts, { tls = { ca = certs.ca, cert = certs.ca,
                                       key = certs.ca, key_password = "a,b" } })
    end, "bad argument #2 to 'connect' (tls.key_password contains ','" ..
      ", which the ZooKeeper C client cannot take (it joins the three " ..
      "files and the password into one string split at commas): " ..
      "re-encrypt tls.key under a password without one)")
    local c, msg, code = zklock.connect(hosts, { tls = srv.tls,
      sasl = { user = "u", password = "p" } })
    assert.is_nil(c)
    assert.equal("tls", code)
    assert.matches("tls and sasl together", msg, 1, true)
  end)

  c_only("a renewed session is over TLS too", function()
    local proxy = H.testing.proxy(srv)
    local c = H.connect(proxy:connect_string(), { tls = srv.tls,
                                                 session_timeout = 2 })
    local first, got = c:session_id(), {}
    c:on_state(function(new) got[#got + 1] = new end)
    proxy:stall(true, true) -- silence: the server expires the session
    local ok, err = pcall(H.dispatch_until, c, function()
      return got[#got] == "lost"
    end, "lost")
    proxy:cut()
    proxy:stall(false, false)
    assert(ok, err)
    H.dispatch_until(c, function() return got[#got] == "renewed" end,
                     "renewed")
    assert.not_equal(first, c:session_id())
    local m = c:mutex(H.path("tls-renew"))
    assert.truthy(m:acquire(5))
    assert.is_true(m:release())
    c:close()
    proxy:close()
  end)
end)
