-- zklock.core's process functions (src/lua/lproc.c), which the command-line
-- tool bin/zklock runs its command with: spawn, wait, kill, signals.

local H = require "spec.helpers"
local core = H.core

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
  end)
end)
