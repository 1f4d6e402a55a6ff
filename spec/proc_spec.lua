-- zklock.core's process functions (src/lua/lproc.c), which the command-line
-- tool bin/zklock runs its command with: spawn, wait, kill, signals.

local H = require "spec.helpers"
local core = H.core

-- The descriptors a child of core.spawn starts with, ascending: the child
-- (a shell) has ls list its own /proc/PID/fd, so the descriptor ls reads
-- the directory with is not among them (and `exec >file` saves no copy of
-- stdout, as a redirection of one command does: dash keeps it at 10).
local function child_fds(keep)
  local out = H.tmpname("fds")
  local pid = assert(core.spawn({ "sh", "-c",
    'exec >"$0"; ls /proc/$$/fd; exit 0', out }, keep))
  local kind, st
  H.wait_until(function()
    kind, st = core.wait(pid, true)
    return kind ~= "running"
  end, 10, "the child to exit")
  assert.same({ "exited", 0 }, { kind, st })
  local fds = {}
  for fd in (H.read(out) or ""):gmatch("%d+") do fds[#fds + 1] = tonumber(fd) end
  os.remove(out)
  table.sort(fds)
  return fds
end

-- process group and parent of a live process, from /proc/PID/stat
local function pgrp_ppid(pid)
  local s = H.read("/proc/" .. pid .. "/stat")
  if not s then return nil end
  local ppid, pgrp = s:match("%) %S+ (%d+) (%d+)")
  return tonumber(pgrp), tonumber(ppid)
end

describe("zklock.core process functions (the tool's)", function()
  it("spawn, wait, kill", function()
    local pid = assert(core.spawn({ "sh", "-c", "exit 7" }, core.open_fds()))
    local kind, st
    H.wait_until(function()
      kind, st = core.wait(pid, true)
      return kind ~= "running"
    end, 10, "the child to exit")
    assert.same({ "exited", 7 }, { kind, st })
    pid = assert(core.spawn({ "sleep", "30" }))
    assert.equal("running", core.wait(pid, true))
    assert.is_true(core.kill(pid, "SIGKILL"))
    assert.same({ "signaled", 9, "KILL" }, { core.wait(pid) })
    assert.is_nil((core.wait(pid, true))) -- reaped already
    local ok, msg, code = core.spawn({ "zklock-spec-no-such-command" })
    assert.same({ nil, "not_found" }, { ok, code })
    assert.matches("No such file", msg)
    assert.equal(15, core.signum("TERM"))
    assert.is_nil(core.signum("NOPE"))
  end)

  -- issue 22, item 13: without `keep`, libzookeeper's socket and pipes
  -- (no close-on-exec) went to the child
  describe("the descriptors a child gets", function()
    local srv, zk
    lazy_setup(function()
      srv = H.testing.server()
      zk = H.connect(srv)
    end)
    lazy_teardown(function()
      if zk then zk:close() end
      if srv then srv:close() end
    end)

    it("without keep: 0, 1 and 2 only, not a ZooKeeper client's socket " ..
        "and pipes", function()
      assert.equal("connected", zk:state())
      assert.is_true(#core.open_fds() > 3) -- (this process has more)
      assert.same({ 0, 1, 2 }, child_fds())
      assert.same({ 0, 1, 2 }, child_fds({}))
    end)

    it("with keep: the ones kept as well, at their numbers", function()
      local before = {}
      for _, fd in ipairs(core.open_fds()) do before[fd] = true end
      local file = H.tmpname("kept")
      local fh = assert(io.open(file, "w")) -- (no close-on-exec)
      local kept
      for _, fd in ipairs(core.open_fds()) do
        if not before[fd] then kept = fd end
      end
      assert.is_number(kept)
      assert.same({ 0, 1, 2, kept }, child_fds({ kept }))
      -- a kept number that is not open, and one listed twice
      assert.same({ 0, 1, 2, kept }, child_fds({ kept, 1000, kept }))
      assert.same({ 0, 1, 2 }, child_fds({ 1000 }))
      fh:close()
      os.remove(file)
    end)

    -- (#busythread: under valgrind, which runs one thread at a time, the
    -- churning thread stalls each spawn for seconds; make memcheck leaves
    -- it out, make asan runs it)
    it("closes in the child what another thread opens meanwhile (as a " ..
        "reconnect does) #busythread", function()
      -- a thread opens and closes a socket without close-on-exec, over and
      -- over: no child may find it open, whichever moment it is made at
      local churn = H.tcore.fd_churn()
      finally(function() churn:stop() end) -- (stopping twice is harmless)
      local leaked = {}
      for i = 1, 60 do
        local fds = child_fds(i % 2 == 0 and {} or nil)
        if #fds ~= 3 then leaked[#leaked + 1] = table.concat(fds, ",") end
      end
      assert.is_true(churn:stop() > 0)
      assert.same({}, leaked)
    end)
  end)

  it("spawn(argv, keep, true): the child leads its own process group; " ..
      "killpg and group_alive", function()
    local out = H.tmpname("job")
    -- a shell whose job (a child in its group) outlives it
    local pid = assert(core.spawn({ "sh", "-c",
      'sleep 60 & echo $! >"$0.tmp"; mv "$0.tmp" "$0"; wait', out }, nil,
      true))
    local job = H.wait_until(function()
      return tonumber((H.read(out) or ""):match("%d+"))
    end, 10, "the job to start")
    assert.equal(pid, (pgrp_ppid(pid)))
    assert.equal(pid, (pgrp_ppid(job)))
    assert.are_not.equal(pid, (pgrp_ppid(core.pid())))
    -- the leader goes, its job stays: the group is alive
    assert.is_true(core.kill(pid, "KILL"))
    assert.same({ "signaled", 9, "KILL" }, { core.wait(pid) })
    assert.is_true(core.group_alive(pid))
    assert.equal(pid, (pgrp_ppid(job)))
    assert.is_true(core.killpg(pid, "TERM"))
    H.wait_until(function() return not core.group_alive(pid) end, 10,
      "the group to be gone")
    local ok, msg = core.killpg(pid, "TERM")
    assert.is_nil(ok)
    assert.matches("No such process", msg)
    -- without the flag, the child stays in ours
    pid = assert(core.spawn({ "sleep", "30" }))
    assert.equal(pgrp_ppid(core.pid()), (pgrp_ppid(pid)))
    assert.is_true(core.kill(pid, "KILL"))
    assert.same({ "signaled", 9, "KILL" }, { core.wait(pid) })
    os.remove(out)
  end)

  -- issue 33, item 2: zklock run gives its command ZKLOCK_PID, and reads
  -- a heartbeat file's time
  it("spawn's env: set or removed in the child, not in the caller; mtime",
      function()
    local out = H.tmpname("env")
    local pid = assert(core.spawn({ "sh", "-c", 'env >"$0"', out }, nil,
      false, { ZKLOCK_SPEC_A = "1=%s", PATH = false, ZKLOCK_SPEC_B = "" }))
    H.wait_until(function() return core.wait(pid, true) ~= "running" end,
      10, "the child to exit")
    local env = "\n" .. (H.read(out) or "")
    assert.matches("\nZKLOCK_SPEC_A=1=%%s\n", env)
    assert.matches("\nZKLOCK_SPEC_B=\n", env)
    assert.is_nil(env:find("\nPATH=", 1, true))
    if os.getenv("HOME") then -- (the rest as it was)
      assert.matches("\nHOME=" .. os.getenv("HOME"):gsub("%p", "%%%0") ..
        "\n", env)
    end
    assert.is_nil(os.getenv("ZKLOCK_SPEC_A"))
    assert.is_string(os.getenv("PATH"))
    local sec, nsec = core.mtime(out)
    assert.is_true(math.abs(sec - os.time()) < 60 and nsec >= 0 and
      nsec < 1e9)
    local r = os.execute(("touch -d @981173106.5 '%s'"):format(out))
    assert.is_true(r == true or r == 0) -- (5.4, LuaJIT)
    assert.same({ 981173106, 500000000 }, { core.mtime(out) })
    os.remove(out)
    local ok, msg, code = core.mtime(out)
    assert.same({ nil, "not_found" }, { ok, code })
    assert.matches("No such file", msg)
    for _, bad in ipairs({ { [1] = "x" }, { [""] = "x" }, { ["A=B"] = "x" },
        { A = true }, { A = 1 }, { A = "a\0b" } }) do
      ok, msg = pcall(core.spawn, { "true" }, nil, false, bad)
      assert.is_false(ok)
      assert.matches("bad argument #4 .*env", msg)
    end
  end)

  it("refuses bad arguments with a clear error", function()
    local bad = {
      { core.spawn, {}, "argv must hold 1 to 65536 strings" },
      { core.spawn, "sh", "table expected" },
      { core.spawn, { "sh", {} }, "argv%[2%] is not a string" },
      { core.spawn, { "sh", "a\0b" }, "argv%[2%] contains a NUL byte" },
      { core.spawn, { "" }, "the command%) is empty" },
      { core.wait, 1, "pid must be an integer from 2" },
      { core.wait, 2.5, "pid must be an integer from 2" },
      { core.kill, 0, "pid must be an integer from 2" },
      { core.kill, -1, "pid must be an integer from 2" },
      { core.kill, 12345, "unknown signal name 'BOOM'", "BOOM" },
      { core.kill, 12345, "string expected" },
      { core.killpg, 1, "pid must be an integer from 2" },
      { core.killpg, 12345, "unknown signal name 'BOOM'", "BOOM" },
      { core.group_alive, 0, "pid must be an integer from 2" },
      { core.catch_signals, { "KILL" }, "not a signal name that can be caught" },
      { core.catch_signals, { 5 }, "not a signal name that can be caught" },
      { core.catch_signals, nil, "table expected" },
      { core.signum, nil, "string expected" },
    }
    for _, c in ipairs(bad) do
      local ok, err = pcall(c[1], c[2], c[4])
      assert.is_false(ok)
      assert.matches("bad argument", err)
      assert.matches(c[3], err)
    end
    local ok, err = pcall(core.spawn, { "true" }, 5)
    assert.is_false(ok)
    assert.matches("table expected", err)
    ok, err = pcall(core.spawn, { "true" }, { 3, "x" })
    assert.is_false(ok)
    assert.matches("bad argument #2 .*keep%[2%] is not a descriptor", err)
    ok, err = pcall(core.spawn, { "true" }, { -1 })
    assert.is_false(ok)
    assert.matches("keep%[1%] is not a descriptor", err)
  end)
end)
