-- The command-line tool, bin/zklock (issue 13, section 3; docs/cli.md):
-- `zklock run`, run as separate OS processes (`H.lua bin/zklock ...`)
-- against a real server.  The commands that `zklock run` runs are
-- spec/workers/cli_job.sh, which log "NAME start", "NAME end", "NAME
-- TERM"... to a file.  Every schedule goes by events (files, lock nodes,
-- watches), with deadlines.  Usage errors, holders, revoke and
-- wait-barrier: cli_commands_spec.lua; TLS and SASL: cli_secure_spec.lua;
-- what they share: spec/cli.lua.
local H = require "spec.helpers"
local C = require "spec.cli"
local core = H.core

local JOB = C.JOB
local LOST, TEMPFAIL = C.LOST, C.TEMPFAIL
local log_lines, has_line, finished = C.log_lines, C.has_line, C.finished

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

    -- issue 33, item 2: with --max-hold S the command asks for more time
    -- (docs/cli.md, "More time"): SIGUSR1 to the tool ($ZKLOCK_PID), or
    -- --heartbeat FILE touched.  The job (spec/workers/cli_ask.sh) asks
    -- every 0.5 s and logs each ask with its time; it has no trap for
    -- SIGUSR1, so a USR1 passed on to its group would end it.
    local unpack = table.unpack or unpack
    local S = 1.5
    local function has_event(log, e)
      for _, x in ipairs((C.ask_log(log))) do
        if x == e then return true end
      end
      return false
    end
    -- "NAME start", "NAME ask 1" .. "NAME ask n", then "NAME " .. each of
    -- ...
    local function asks(name, n, ...)
      local t = { name .. " start" }
      for i = 1, n do t[#t + 1] = ("%s ask %d"):format(name, i) end
      for _, e in ipairs({ ... }) do t[#t + 1] = name .. " " .. e end
      return t
    end
    -- the tool running cli_ask.sh, which asks `how` ("usr1" or
    -- "heartbeat"): the process, and the heartbeat file
    local function asking(how, path, log, name, count, rel, mode)
      local hb = H.tmpname("hb")
      local args = { "run", hosts, path, "--max-hold", S }
      if how == "heartbeat" then
        args[#args + 1], args[#args + 2] = "--heartbeat", hb
      end
      for _, a in ipairs({ "--", "sh", C.ASK, log, name,
          how == "usr1" and "usr1" or hb, count, rel, mode }) do
        args[#args + 1] = a
      end
      return start(unpack(args)), hb
    end

    for _, how in ipairs({ "usr1", "heartbeat" }) do
      it(("a command that asks for more time (%s) keeps the hold past " ..
          "its first limit, and ends normally: 0"):format(how), function()
        local path, log, rel = H.path("cli"), H.tmpname("log"),
          H.tmpname("rel")
        -- it asks every 0.5 s until rel exists (at most 120 times)
        local p, hb = asking(how, path, log, "A", 120, rel, "until")
        H.wait_until(function()
          return has_event(log, "A ask 6") or p:status()
        end, 30, "the job's 6th ask")
        assert.is_true(has_event(log, "A ask 6"), p:output())
        -- naps of 3 s since the job started, twice the first limit:
        -- still held, the command still running
        assert.equal(1, contenders(path))
        assert.is_nil(p:status(), p:output())
        H.write(rel, "")
        local rc, out = finished(p)
        assert.equal(0, rc, out)
        assert.equal("", out)
        local events = C.ask_log(log)
        assert.is_true(#events >= 8, table.concat(events, "\n"))
        assert.same(asks("A", #events - 2, "end"), events)
        assert.equal(0, contenders(path))
        os.remove(hb)
      end)

      it(("a command that stops asking (%s) is signalled S after its last " ..
          "ask, exit 79; an ask after the end does not revive the hold")
          :format(how), function()
        local path, log, rel = H.path("cli"), H.tmpname("log"),
          H.tmpname("rel")
        local log2, rel2 = H.tmpname("log"), H.tmpname("rel")
        -- 4 asks (2 s, past the first limit), then none; on SIGTERM, one
        -- more ask, and it runs on until rel exists
        local p, hb = asking(how, path, log, "B", 4, rel, "late")
        local refused = "zklock: run: lock " .. path .. ": asked for more " ..
          "time after the hold ended: refused\n"
        H.wait_until(function()
          return p:output():find(refused, 1, true) or p:status()
        end, 30, "the ask after the end to be refused")
        assert.is_nil(p:status(), p:output())
        local events, at = C.ask_log(log)
        assert.same(asks("B", 4, "TERM", "late-ask"), events)
        -- the hold ended S after the last ask (the job's clock: the ask's
        -- time taken before it, SIGTERM's after it came)
        local after = at["B TERM"] - at["B ask 4"]
        assert.is_true(after >= S - 0.05 and after < S + 10, after)
        -- not revived: the node is gone, and another takes the lock while
        -- the command still runs
        assert.equal(0, contenders(path))
        H.write(rel2, "")
        local rc, out = finished(start("run", hosts, path, "--timeout", 30,
          "--", "sh", JOB, log2, "C", rel2, 0))
        assert.equal(0, rc, out)
        assert.same({ "C start", "C end" }, log_lines(log2))
        assert.is_nil(p:status(), p:output())
        H.write(rel, "")
        rc, out = finished(p)
        assert.equal(LOST, rc, out)
        assert.matches("^zklock: run: lock " .. path:gsub("%p", "%%%0") ..
          " lost while the command ran %(its max hold of 1%.5s ran out " ..
          "after %d+ asks? for more time%); sending SIGTERM to process " ..
          "group %d+\n", out)
        -- (said once; the job's shell may say "Terminated" between)
        local _, n = out:gsub(refused:gsub("%p", "%%%0"), "")
        assert.equal(1, n, out)
        assert.same(asks("B", 4, "TERM", "late-ask", "end"),
          (C.ask_log(log)))
        assert.equal(0, contenders(path))
        os.remove(hb)
      end)
    end

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

    it("passes its own SIGTERM on to the command, not SIGUSR1", function()
      local path, log = H.path("cli"), H.tmpname("log")
      local never = H.tmpname("never")
      local p = start("run", hosts, path, "--", "sh", JOB, log, "F", never, 0)
      H.wait_until(function() return has_line(log, "F start") end, 30,
        "the command to start")
      -- (SIGUSR1, an ask for more time, is neither passed on nor fatal
      -- without --max-hold: the job has no trap for it)
      p:kill("USR1")
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

    it("--ttl with --id: the hold outlives the tool killed; a run with " ..
       "the same --id takes it back at once", function()
      local path, log, rel = H.path("cli"), H.tmpname("log"),
        H.tmpname("rel")
      local a = start("run", hosts, path, "--ttl", "60", "--id", "deploy 7",
        "--session-timeout", "2", "--", "sh", JOB, log, "A", rel, 0)
      H.wait_until(function() return has_line(log, "A start") end, 30,
        "A's command to start")
      a:kill("KILL")
      assert.is_not_nil(a:wait(30))
      -- its session (2 s) ends, and its hold with it would be an
      -- ephemeral node's: this one stays
      local m = zk:mutex(path)
      local ok, _, code = m:acquire(4)
      assert.is_nil(ok)
      assert.equal("timeout", code)
      H.write(rel, "") -- (A's command, left running, ends)
      local rc, out = finished(start("run", hosts, path, "--ttl", "60",
        "--id", "deploy 7", "--timeout", "5", "--", "sh", JOB, log, "B",
        rel, 0))
      assert.equal(0, rc, out)
      assert.is_true(has_line(log, "B start"))
      assert.equal(0, contenders(path))
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
end)
