-- The command-line tool, bin/zklock (issue 13, section 3; docs/cli.md):
-- run as separate OS processes (`H.lua bin/zklock ...`) against a real
-- server.  The commands that `zklock run` runs are spec/workers/cli_job.sh,
-- which log "NAME start", "NAME end", "NAME TERM"... to a file.  Every
-- schedule goes by events (files, lock nodes, watches), with deadlines.
local H = require "spec.helpers"
local core = H.core

local JOB = "spec/workers/cli_job.sh"
local LOST, TEMPFAIL, USAGE, UNAVAILABLE = 79, 75, 64, 69

-- the tool as a process: same handle as H.spawn (status, wait, output)
local function cli(...)
  return H.spawn("bin/zklock", ...)
end

-- the lines of a job log
local function log_lines(file)
  local t = {}
  for l in (H.read(file) or ""):gmatch("[^\n]+") do t[#t + 1] = l end
  return t
end

local function has_line(file, line)
  for _, l in ipairs(log_lines(file)) do
    if l == line then return true end
  end
  return false
end

-- wait for a tool process to end: status, output (after_each cleans up)
local function finished(p, timeout)
  local rc = p:wait(timeout or 60)
  return rc, p:output()
end

describe("zklock (command-line tool)", function()
  local srv, zk, hosts
  local procs = {}

  local function start(...)
    local p = cli(...)
    procs[#procs + 1] = p
    return p
  end

  lazy_setup(function()
    srv = H.testing.server()
    hosts = srv.connect_string
    zk = H.connect(srv)
  end)
  after_each(function()
    for _, p in ipairs(procs) do p:cleanup() end
    procs = {}
  end)
  lazy_teardown(function()
    if zk then zk:close() end
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  local function contenders(path)
    return #assert(zk:mutex(path):participants())
  end

  -- Two contenders at path, and the second waits: its session watches
  -- the first one's node (it listed, found itself behind, and sleeps).
  local function second_waits(path)
    local nodes = assert(zk:mutex(path):participants(nil, true))
    if #nodes ~= 2 then return false end
    for sid, paths in pairs(H.watches_by_session(srv)) do
      if sid ~= nodes[1].session then
        for _, p in ipairs(paths) do
          if p == nodes[1].node then return true end
        end
      end
    end
    return false
  end

  -- -------------------------------------------------------------------------
  describe("run", function()
    it("two racing on one path take turns: both run, never overlapping",
        function()
      local path, log = H.path("cli"), H.tmpname("log")
      local rel_a, rel_b = H.tmpname("rel"), H.tmpname("rel")
      local a = start("run", hosts, path, "--timeout", "inf", "--",
        "sh", JOB, log, "A", rel_a, 0)
      H.wait_until(function() return has_line(log, "A start") end, 30,
        "A's command to start")
      local b = start("run", hosts, path, "--timeout=Infinity", "--",
        "sh", JOB, log, "B", rel_b, 0)
      H.wait_until(function() return second_waits(path) end, 30,
        "B to wait behind A")
      -- B waits for the lock: its command has not started
      assert.is_nil(b:status(), b:output())
      assert.same({ "A start" }, log_lines(log))
      H.write(rel_b, "")
      H.write(rel_a, "")
      local rc_a, out_a = finished(a)
      local rc_b, out_b = finished(b)
      assert.equal(0, rc_a, out_a)
      assert.equal(0, rc_b, out_b)
      assert.same({ "A start", "A end", "B start", "B end" },
        log_lines(log))
      assert.equal(0, contenders(path))
    end)

    it("exits with the command's own status, 128+N for a signal N",
        function()
      local path, log, rel = H.path("cli"), H.tmpname("log"),
        H.tmpname("rel")
      H.write(rel, "")
      local rc, out = finished(start("run", hosts, path, "--", "sh", JOB,
        log, "X", rel, 3))
      assert.equal(3, rc, out)
      assert.equal("", out)
      rc, out = finished(start("run", hosts, path, "sh", JOB, log, "Y", rel,
        0, "selfkill"))
      assert.equal(128 + 9, rc, out)
      assert.same({ "X start", "X end", "Y start" }, log_lines(log))
      assert.equal(0, contenders(path))
    end)

    it("not acquired within --timeout: 75, a message, the command never ran",
        function()
      local path, log, rel = H.path("cli"), H.tmpname("log"),
        H.tmpname("rel")
      H.write(rel, "")
      local m = zk:mutex(path)
      assert(m:acquire(5))
      local t0 = core.now()
      local rc, out = finished(start("run", hosts, path, "--timeout", "0.5",
        "--", "sh", JOB, log, "T", rel, 0))
      assert.equal(TEMPFAIL, rc, out)
      assert.matches("^zklock: run: lock " .. path:gsub("%p", "%%%0") ..
        " not acquired within 0%.5s\n$", out)
      assert.is_true(core.now() - t0 >= 0.5)
      assert.is_nil(H.read(log))
      assert.equal(1, contenders(path)) -- its queued node is gone
      m:release()
    end)

    it("lost while the command runs (--max-hold): the command gets SIGTERM, " ..
        "exit 79", function()
      local path, log = H.path("cli"), H.tmpname("log")
      local never = H.tmpname("never")
      local t0 = core.now()
      local p = start("run", hosts, path, "--max-hold", 1, "--",
        "sh", JOB, log, "L", never, 0)
      local rc, out = finished(p)
      assert.equal(LOST, rc, out)
      assert.matches("zklock: run: lock " .. path:gsub("%p", "%%%0") ..
        " lost while the command ran %(its max hold of 1s ran out%); " ..
        "sending SIGTERM to process group %d+", out)
      assert.same({ "L start", "L TERM" }, log_lines(log))
      assert.is_true(core.now() - t0 < 40) -- (not the job's own give-up)
      assert.equal(0, contenders(path))
    end)

    -- (issue 24, item 8: it said "(the session is connecting)")
    it("lost when ZooKeeper is silent: says for how long, exit 79",
        function()
      local path, log = H.path("cli"), H.tmpname("log")
      local never = H.tmpname("never")
      local proxy = H.testing.proxy(srv)
      local p = start("run", proxy:connect_string(), path,
        "--session-timeout", 2, "--", "sh", JOB, log, "Q", never, 0)
      H.wait_until(function() return has_line(log, "Q start") end, 30,
        "the command to start")
      proxy:stall(true, true) -- silence, both ways
      H.wait_until(function() return has_line(log, "Q TERM") end, 30,
        "the hold to be lost")
      proxy:stall(false, false) -- (the session lives: its node goes now)
      local rc, out = finished(p)
      proxy:close()
      assert.equal(LOST, rc, out)
      local quiet = out:match("zklock: run: lock " .. path:gsub("%p", "%%%0")
        .. " lost while the command ran %(no contact with ZooKeeper for " ..
        "(%d+%.%d) s%); sending SIGTERM to process group %d+\n")
      assert(quiet, out)
      -- given up at about 0.65 of the 2 s session timeout
      assert.is_true(tonumber(quiet) >= 1 and tonumber(quiet) < 2, out)
      assert.same({ "Q start", "Q TERM" }, log_lines(log))
      H.wait_until(function() return contenders(path) == 0 end, 10,
        "its node to go")
    end)

    it("--signal and --kill-after: a command that ignores the signal is " ..
        "killed", function()
      local path, log = H.path("cli"), H.tmpname("log")
      local never = H.tmpname("never")
      local p = start("run", hosts, path, "--max-hold", 1, "--signal", "HUP",
        "--kill-after", "0.5", "--", "sh", JOB, log, "K", never, 0,
        "stubborn")
      local rc, out = finished(p)
      assert.equal(LOST, rc, out)
      assert.matches("sending SIGHUP", out)
      assert.matches("process group %d+ still runs 0%.5s after SIGHUP; " ..
        "sending SIGKILL", out)
      -- it heard HUP (logged within its 50 ms nap), did not end, was killed
      H.wait_until(function() return has_line(log, "K HUP") end, 10,
        "the job to log HUP")
      assert.same({ "K start", "K HUP" }, log_lines(log))
      assert.equal(0, contenders(path))
    end)

    it("--revocable: `zklock revoke` has the command signalled, then the " ..
        "lock released, exit 79", function()
      local path, log = H.path("cli"), H.tmpname("log")
      local never = H.tmpname("never")
      local p = start("run", hosts, path, "--revocable", "--", "sh", JOB, log,
        "R", never, 0)
      H.wait_until(function() return has_line(log, "R start") end, 30,
        "the command to start")
      local rc, out = finished(start("revoke", hosts, path))
      assert.equal(0, rc, out)
      assert.equal("asked 1 holder of " .. path .. " to release\n", out)
      rc, out = finished(p)
      assert.equal(LOST, rc, out)
      assert.matches("zklock: run: lock " .. path:gsub("%p", "%%%0") ..
        " revoked while the command ran %(revocation requested%); " ..
        "sending SIGTERM", out)
      assert.same({ "R start", "R TERM" }, log_lines(log))
      assert.equal(0, contenders(path))
    end)

    it("passes its own SIGTERM on to the command", function()
      local path, log = H.path("cli"), H.tmpname("log")
      local never = H.tmpname("never")
      local p = start("run", hosts, path, "--", "sh", JOB, log, "F", never, 0)
      H.wait_until(function() return has_line(log, "F start") end, 30,
        "the command to start")
      p:kill("TERM")
      local rc, out = finished(p)
      assert.equal(143, rc, out)
      assert.same({ "F start", "F TERM" }, log_lines(log))
      assert.equal(0, contenders(path))
    end)

    -- issue 22, item 10: the command's children outlived a SIGTERM, and
    -- the tool released while they still ran
    it("passes SIGTERM on to the command's whole process group, and holds " ..
        "the lock until the group is gone", function()
      local path, log, rel = H.path("cli"), H.tmpname("log"),
        H.tmpname("rel")
      -- the job runs in the background of a shell that dies of the TERM;
      -- the job logs it and goes on until rel exists
      local a = start("run", hosts, path, "--", "sh", JOB, log, "A", rel, 0,
        "group")
      H.wait_until(function() return has_line(log, "A start") end, 30,
        "A's job to start")
      a:kill("TERM")
      H.wait_until(function() return has_line(log, "A TERM") end, 30,
        "A's job (a child of the command) to get SIGTERM")
      local b = start("run", hosts, path, "--", "sh", JOB, log, "B", rel, 0)
      H.wait_until(function() return second_waits(path) end, 30,
        "B to wait behind A")
      -- the command (the group's leader) is dead; its job still runs, and
      -- the tool still holds the lock
      assert.is_nil(a:status(), a:output())
      assert.same({ "A start", "A TERM" }, log_lines(log))
      H.write(rel, "")
      local rc_a, out_a = finished(a)
      local rc_b, out_b = finished(b)
      assert.equal(143, rc_a, out_a) -- the command's own status
      assert.equal(0, rc_b, out_b)
      assert.same({ "A start", "A TERM", "A end", "B start", "B end" },
        log_lines(log))
      assert.equal(0, contenders(path))
    end)

    it("a command that leaves a child running: the lock is held until " ..
        "the child ends", function()
      local path, log, rel = H.path("cli"), H.tmpname("log"),
        H.tmpname("rel")
      -- the command exits 0 at once; its job goes on until rel exists
      local a = start("run", hosts, path, "--", "sh", JOB, log, "A", rel, 0,
        "leave")
      H.wait_until(function() return has_line(log, "A start") end, 30,
        "A's job to start")
      local b = start("run", hosts, path, "--", "sh", JOB, log, "B", rel, 0)
      H.wait_until(function() return second_waits(path) end, 30,
        "B to wait behind A")
      assert.is_nil(a:status(), a:output())
      H.write(rel, "")
      local rc_a, out_a = finished(a)
      local rc_b, out_b = finished(b)
      assert.equal(0, rc_a, out_a)
      assert.equal("", out_a)
      assert.equal(0, rc_b, out_b)
      assert.same({ "A start", "A end", "B start", "B end" }, log_lines(log))
      assert.equal(0, contenders(path))
    end)

    it("--kill-after also follows a signal passed on: the group is killed",
        function()
      local path, log = H.path("cli"), H.tmpname("log")
      local never = H.tmpname("never")
      local p = start("run", hosts, path, "--kill-after", "0.5", "--", "sh",
        JOB, log, "K", never, 0, "group")
      H.wait_until(function() return has_line(log, "K start") end, 30,
        "the job to start")
      p:kill("TERM")
      local rc, out = finished(p)
      assert.equal(143, rc, out)
      assert.matches("zklock: run: process group %d+ still runs 0%.5s " ..
        "after SIGTERM; sending SIGKILL", out)
      assert.same({ "K start", "K TERM" }, log_lines(log))
      assert.equal(0, contenders(path))
    end)

    -- issue 22, item 11: the default id held the whole command line
    it("the default id names the host, the pid and the program, not the " ..
        "arguments", function()
      local path, log, rel = H.path("cli"), H.tmpname("log"),
        H.tmpname("rel")
      local p = start("run", hosts, path, "--", "sh", JOB, log, "S", rel, 0,
        "", "--password=hunter2")
      H.wait_until(function() return has_line(log, "S start") end, 30,
        "the command to start")
      local h = assert(zk:mutex(path):holders())
      H.write(rel, "")
      local rc, out = finished(p)
      assert.equal(0, rc, out)
      assert.equal(1, #h)
      local host = H.read("/proc/sys/kernel/hostname"):match("[^\n]+")
      assert.matches("^zklock run " .. host:gsub("%p", "%%%0") ..
        " pid %d+: sh$", h[1].id)
    end)

    it("SIGTERM while it waits for the lock: its node goes at once, 143",
        function()
      local path, log, rel = H.path("cli"), H.tmpname("log"),
        H.tmpname("rel")
      local m = zk:mutex(path)
      assert(m:acquire(5))
      local p = start("run", hosts, path, "--session-timeout", 30, "--",
        "sh", JOB, log, "W", rel, 0)
      H.wait_until(function() return second_waits(path) end, 30,
        "the tool to wait behind us")
      p:kill("TERM")
      local rc, out = finished(p)
      assert.equal(143, rc, out)
      assert.matches("zklock: interrupted by SIGTERM", out)
      -- deleted by the tool, not by the expiry of its 30 s session
      assert.equal(1, contenders(path))
      assert.is_nil(H.read(log))
      m:release()
    end)

    it("a command that cannot run: 127 not found, 126 not executable",
        function()
      local path = H.path("cli")
      local rc, out = finished(start("run", hosts, path, "--",
        "zklock-spec-no-such-command"))
      assert.equal(127, rc, out)
      assert.matches("zklock: run: cannot run zklock%-spec%-no%-such%-command: " ..
        "No such file or directory", out)
      rc, out = finished(start("run", hosts, path, "--", "/etc/passwd"))
      assert.equal(126, rc, out)
      assert.matches("zklock: run: cannot run /etc/passwd: Permission denied",
        out)
      assert.equal(0, contenders(path))
    end)

    it("gives the command only the descriptors it was given", function()
      local path, out_file = H.path("cli"), H.tmpname("fds")
      -- the tool started with 0, 1 and 2 only (the spec process has more)
      local pid = assert(core.spawn({ "env",
        "LUA_PATH=./lua/?.lua;./lua/?/init.lua;;",
        "LUA_CPATH=" .. (os.getenv("LUA_CPATH") or package.cpath),
        H.lua, "bin/zklock", "run", hosts, path, "--", "sh", "-c",
        "ls /proc/self/fd > " .. out_file }, {}))
      local kind, rc
      H.wait_until(function()
        kind, rc = core.wait(pid, true)
        return kind ~= "running"
      end, 60, "the tool to finish")
      assert.same({ "exited", 0 }, { kind, rc })
      local fds = {}
      for fd in (H.read(out_file) or ""):gmatch("%d+") do
        fds[#fds + 1] = tonumber(fd)
      end
      table.sort(fds)
      -- 0, 1, 2, and the one ls reads the directory with
      assert.same({ 0, 1, 2, 3 }, fds)
      os.remove(out_file)
    end)
  end)

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
        { { "run", bad, "/p", "--bogus", "--", "true" },
          "run: unknown option --bogus" },
        { { "run", bad, "/p", "--timeout" }, "--timeout needs a value" },
        { { "run", bad, "/p", "--revocable=yes", "true" },
          "--revocable takes no value" },
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
        procs[#procs + 1] = ps[i]
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
