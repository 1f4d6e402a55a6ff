-- The command-line tool, bin/zklock (docs/cli.md), but for `zklock run`'s
-- hold (cli_spec.lua): usage errors and the exit statuses met before or
-- at connecting (and the examples' usage lines), then `holders`,
-- `revoke` and `wait-barrier`, run as separate OS processes against a
-- real server.  What the cli specs share: spec/cli.lua.
local H = require "spec.helpers"
local C = require "spec.cli"

local TEMPFAIL, USAGE, UNAVAILABLE = C.TEMPFAIL, C.USAGE, C.UNAVAILABLE
local finished = C.finished

describe("zklock (command-line tool)", function()
  local srv, zk, hosts
  local fx = C.fixture(function(s, z, h) srv, zk, hosts = s, z, h end)
  local start = fx.start
  lazy_setup(fx.setup)
  after_each(fx.clean)
  lazy_teardown(fx.teardown)

  local function contenders(path) return C.contenders(zk, path) end
  local function second_waits(path) return C.second_waits(srv, zk, path) end

  -- -------------------------------------------------------------------------
  describe("usage", function()
    it("a usage error: 64 and a one-line message, before connecting",
        function()
      local bad = "127.0.0.1:1" -- (never connected to)
      local cases = {
        { {}, "no command given" },
        { { "frobnicate" }, "unknown command 'frobnicate'" },
        { { "run", bad }, "run: expected HOSTS and PATH" },
        { { "run", bad, "/p" }, "run: no command given" },
        { { "run", bad, "/p", "--" }, "run: no command given" },
        { { "run", bad, "p", "--", "true" }, "run: bad PATH: path must " ..
          "start with '/': p" },
        { { "run", bad, "/p", "--timeout", "soon", "--", "true" },
          "--timeout: expected a number of seconds >= 0, got 'soon'" },
        { { "run", bad, "/p", "--timeout=-1", "--", "true" },
          "--timeout: expected a number of seconds >= 0, got '-1'" },
        { { "run", bad, "/p", "--max-hold", "0", "--", "true" },
          "--max-hold: expected a number of seconds > 0, got '0'" },
        { { "run", bad, "/p", "--signal", "BOOM", "--", "true" },
          "--signal: unknown signal 'BOOM' (HUP, INT, QUIT, KILL, USR1, " ..
          "USR2, ALRM, TERM, CONT, STOP, TSTP, PIPE)" },
        { { "run", bad, "/p", "--heartbeat", "/tmp/hb", "--", "true" },
          "run: --heartbeat needs --max-hold" },
        { { "run", bad, "/p", "--ttl", "5", "--", "true" },
          "run: --ttl needs --id (the id that takes the hold back)" },
        { { "run", bad, "/p", "--ttl", "5", "--id", "x", "--revocable",
            "true" }, "run: --ttl and --revocable do not go together (a " ..
          "hold on a TTL node is not revocable)" },
        { { "run", bad, "/p", "--ttl", "0", "--id", "x", "true" },
          "--ttl: expected a number of seconds > 0, got '0'" },
        { { "run", bad, "/p", "--max-hold", "1", "--heartbeat=", "true" },
          "--heartbeat: expected a file name" },
        { { "run", bad, "/p", "--bogus", "--", "true" },
          "run: unknown option --bogus" },
        { { "run", bad, "/p", "--timeout" }, "--timeout needs a value" },
        { { "run", bad, "/p", "--revocable=yes", "true" },
          "--revocable takes no value" },
        { { "holders", bad, "/p", "--no-follow=yes" },
          "--no-follow takes no value" },
        { { "holders", bad, "/p", "/q" }, "holders: unexpected argument '/q'" },
        { { "revoke", bad, "/p", "--leases", "1.5" },
          "--leases: expected a positive integer, got '1.5'" },
        { { "wait-barrier", bad, "/p", "--max-hold", "1" },
          "wait-barrier: unknown option --max-hold" },
        { { "holders", "localhost", "/p" }, "holders: bad HOSTS: host " ..
          "'localhost' has no port (host:port expected): localhost" },
        { { "run", ",", "/p", "true" }, "run: bad HOSTS: empty host in " ..
          "the connect string (host:port expected between commas): ," },
        { { "wait-barrier", bad, "/p\xff" }, "wait-barrier: bad PATH: " ..
          "path is not valid UTF-8 (at byte 3): /p\xff" },
        { { "check-token", bad, "/p" }, "check-token: expected HOSTS, " ..
          "PATH and TOKEN" },
        { { "check-token", bad, "/p", "12", "13" },
          "check-token: unexpected argument '13'" },
        { { "check-token", bad, "/p", "0x12" }, "check-token: bad TOKEN: " ..
          "not a token: \"0x12\" (CZXID.PASS, 16 hex digits each, as " ..
          "lock:token(\"string\") gives it)" },
        { { "check-token", bad, "/p", "0" }, "check-token: bad TOKEN: a " ..
          "token (a positive integer czxid, or its string form) expected, " ..
          "got 0" },
      }
      local ps = {}
      for i, c in ipairs(cases) do ps[i] = start(table.unpack(c[1])) end
      for i, c in ipairs(cases) do
        local rc, out = finished(ps[i])
        assert.equal(USAGE, rc, table.concat(c[1], " ") .. ": " .. out)
        local first = out:match("^[^\n]*")
        assert.equal("zklock: " .. c[2], first)
        assert.matches("Try 'zklock %-%-help'", out)
      end
    end)

    -- (issue 24, item 8: they failed an assert, with its traceback)
    it("the examples: a usage line on stderr and 64 on bad or missing " ..
       "arguments", function()
      local cases = {
        { "barrier.lua", "-", "many" },
        { "connection_pool.lua", "-", "10", "0" },
        { "double_barrier.lua", "-", "2.5" },
        { "token_resource.lua" },
        { "order_numbers.lua" },
        { "rwlock_config.lua", "-", "locked" },
        { "stock.lua" },
        { "with_server.lua" },
      }
      local ps = {}
      for i, c in ipairs(cases) do
        -- (without $ZK_HOSTS, the examples' fallback for HOSTS)
        ps[i] = H.spawn_lua("env -u ZK_HOSTS " .. H.lua,
          os.getenv("LUA_CPATH") or package.cpath, "examples/" .. c[1],
          table.unpack(c, 2))
        fx.track(ps[i])
      end
      for i, c in ipairs(cases) do
        local rc, out = finished(ps[i])
        assert.equal(USAGE, rc, c[1] .. ": " .. out)
        assert.matches("^" .. c[1]:gsub("%p", "%%%0") .. ": [^\n]+\n" ..
          "usage: lua5%.4 examples/" .. c[1]:gsub("%p", "%%%0") ..
          " [^\n]+\n$", out)
      end
    end)

    it("--help: the usage on stdout, 0", function()
      local rc, out = finished(start("--help"))
      assert.equal(0, rc, out)
      assert.matches("zklock run HOSTS PATH", out)
      assert.matches("Exit status", out)
    end)

    it("cannot connect: 69", function()
      local port = H.tcore.free_port()
      local rc, out = finished(start("holders", "127.0.0.1:" .. port, "/p",
        "--connect-timeout", "0.5"))
      assert.equal(UNAVAILABLE, rc, out)
      assert.matches("^zklock: holders: cannot connect to 127%.0%.0%.1:%d+", out)
    end)

    it("a host name that does not resolve: 68", function()
      local rc, out = finished(start("holders", "no-such-host.invalid:2181",
        "/p"))
      assert.equal(68, rc, out)
      assert.matches("cannot resolve the servers of", out, 1, true)
    end)
  end)

  -- -------------------------------------------------------------------------
  describe("holders", function()
    it("prints the holder: node, session, token, id; 1 when free",
        function()
      local path = H.path("cli")
      local named = H.connect(srv, { id = "cli-spec holder 7" })
      local m = named:mutex(path)
      local rc, out = finished(start("holders", hosts, path))
      assert.equal(1, rc, out)
      assert.equal("", out)
      assert(m:acquire(5))
      -- a waiter behind it is not a holder
      local w = start("run", hosts, path, "--", "true")
      H.wait_until(function() return second_waits(path) end, 30,
        "the waiter to wait")
      rc, out = finished(start("holders", hosts, path))
      assert.equal(0, rc, out)
      assert.equal(("%s\t%s\t%.0f\tcli-spec holder 7\n"):format(m:node(),
        named:session_id(), m:token()), out)
      -- (--no-follow: the same, keeping to HOSTS: docs/cli.md)
      rc, out = finished(start("holders", "--no-follow", hosts, path))
      assert.equal(0, rc, out)
      assert.matches(m:node(), out, 1, true)
      m:release()
      assert.equal(0, finished(w))
      named:close()
    end)

    it("read/write lock readers, and a semaphore's leases with --leases",
        function()
      local path = H.path("cli")
      local zk2 = H.connect(srv)
      local rw, rw2 = zk:rwlock(path), zk2:rwlock(path)
      assert(rw.read:acquire(5))
      assert(rw2.read:acquire(5))
      local rc, out = finished(start("holders", hosts, path))
      assert.equal(0, rc, out)
      local nodes = {}
      for node in out:gmatch("([^\t\n]+)\t[^\n]*\n") do
        nodes[#nodes + 1] = node
      end
      assert.same({ rw.read:node(), rw2.read:node() }, nodes)
      rw.read:release()
      rw2.read:release()
      zk2:close()

      local spath = H.path("cli")
      local sem = zk:semaphore(spath, 2)
      local a, b = assert(sem:acquire(5)), assert(sem:acquire(5))
      rc, out = finished(start("holders", hosts, spath, "--leases", 2))
      assert.equal(0, rc, out)
      nodes = {}
      for node in out:gmatch("([^\t\n]+)\t[^\n]*\n") do
        nodes[#nodes + 1] = node
      end
      assert.same({ a:node(), b:node() }, nodes)
      a:release()
      b:release()
    end)
  end)

  -- -------------------------------------------------------------------------
  describe("check-token", function()
    it("0 and current for the holder's token (decimal or string form), " ..
       "1 and why for another; a semaphore's with --leases", function()
      local path = H.path("cli")
      local m = zk:mutex(path)
      local rc, out = finished(start("check-token", hosts, path, "5"))
      assert.equal(1, rc, out)
      assert.equal("not held: nobody holds " .. path .. "\n", out)
      assert(m:acquire(5))
      rc, out = finished(start("check-token", hosts, path,
        ("%.0f"):format(m:token())))
      assert.equal(0, rc, out)
      assert.equal("current\n", out)
      rc, out = finished(start("check-token", hosts, path, m:token("string")))
      assert.equal(0, rc, out)
      rc, out = finished(start("check-token", hosts, path,
        ("%.0f"):format(m:token() - 1)))
      assert.equal(1, rc, out)
      assert.equal("not held: held by " .. m:token("string") .. "\n", out)
      m:release()
      local spath = H.path("cli")
      local sem = zk:semaphore(spath, 2)
      local a, b = assert(sem:acquire(5)), assert(sem:acquire(5))
      rc, out = finished(start("check-token", hosts, spath,
        ("%.0f"):format(b:token()), "--leases", 2))
      assert.equal(0, rc, out)
      rc, out = finished(start("check-token", hosts, spath,
        ("%.0f"):format(b:token())))
      assert.equal(1, rc, out)
      a:release()
      b:release()
    end)
  end)

  describe("revoke", function()
    it("a revocable holder releases; 1 when nobody holds it", function()
      local path = H.path("cli")
      local rc, out = finished(start("revoke", hosts, path))
      assert.equal(1, rc, out)
      assert.equal("nobody holds " .. path .. "\n", out)
      local m = zk:mutex(path)
      local revoked = 0
      m:on_revoke(function(l)
        revoked = revoked + 1
        assert.is_true(l:release())
      end)
      assert(m:acquire(5))
      rc, out = finished(start("revoke", hosts, path))
      assert.equal(0, rc, out)
      assert.equal("asked 1 holder of " .. path .. " to release\n", out)
      H.wait_until(function()
        zk:dispatch(0.1)
        return revoked > 0
      end, 10, "the revocation to arrive")
      assert.equal(1, revoked)
      assert.is_false(m:is_held())
      assert.equal(0, contenders(path))
    end)
  end)

  -- -------------------------------------------------------------------------
  describe("wait-barrier", function()
    -- is a session watching the node at path?
    local function watched(path)
      for _, paths in pairs(H.watches_by_session(srv)) do
        for _, p in ipairs(paths) do
          if p == path then return true end
        end
      end
      return false
    end

    it("returns 0 once the barrier is removed", function()
      local path = H.path("cli-barrier")
      local b = zk:barrier(path)
      assert.is_true(b:set())
      local p = start("wait-barrier", hosts, path, "--timeout", "inf")
      H.wait_until(function() return watched(path) end, 30,
        "the tool to watch the barrier")
      assert.is_nil(p:status())
      assert.is_true(b:remove())
      local rc, out = finished(p)
      assert.equal(0, rc, out)
      assert.equal("", out)
      -- no barrier: at once
      rc, out = finished(start("wait-barrier", hosts, path))
      assert.equal(0, rc, out)
    end)

    -- (issue 22, item 12: it exited 0, so a deploy gate passed)
    it("under a chroot that does not exist: 69 and a message naming it, " ..
       "never 0", function()
      local rc, out = finished(start("wait-barrier", hosts .. "/no/such",
        "/gate"))
      assert.equal(UNAVAILABLE, rc, out)
      assert.equal("zklock: wait-barrier: cannot connect to " .. hosts ..
        "/no/such: the chroot /no/such of the connect string does not " ..
        "exist: create it, or connect without it\n", out)
    end)

    it("times out: 75 and a message", function()
      local path = H.path("cli-barrier")
      local b = zk:barrier(path)
      assert.is_true(b:set())
      local rc, out = finished(start("wait-barrier", hosts, path,
        "--timeout", "0.5"))
      assert.equal(TEMPFAIL, rc, out)
      assert.equal("zklock: wait-barrier: barrier " .. path ..
        " still up after 0.5s\n", out)
      assert.is_true(b:remove())
    end)
  end)
end)
