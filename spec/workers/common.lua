-- Shared by the worker processes (loaded with dofile from the project root):
-- the start gate and the syscall-free pause.
local core = require "zklock.core"
local tcore = require "zklock.testing.core"

local W = {}

--- Wait (bounded) until the parent opens the gate file, so that all the
-- workers start together.
function W.wait_gate(gate, timeout)
  local deadline = core.now() + (timeout or 150)
  while true do
    local fh = io.open(gate)
    if fh then fh:close(); return end
    assert(core.now() < deadline, "gate never opened")
    tcore.sleep(0.01)
  end
end

--- zklock.connect(hosts, opts) for a worker, where `hosts` may carry TLS
-- settings as "tls=CA|CERT|KEY@HOSTS" (spec/tls_spec.lua).
function W.connect(hosts, opts)
  local ca, cert, key, rest = hosts:match("^tls=([^|]+)|([^|]+)|([^@]+)@(.*)$")
  if ca then
    opts = opts or {}
    opts.tls, hosts = { ca = ca, cert = cert, key = key }, rest
  end
  return require("zklock").connect(hosts, opts)
end

--- Busy-wait `s` seconds: widens a window without giving up the CPU.
function W.spin(s)
  local t = core.now() + s
  while core.now() < t do end
end

--- The exclusion checker's critical section: read the counter in `file`,
-- pause (pause(), which widens the window), write it back plus one.
-- Returns when it began and ended (monotonic, system-wide).
function W.bump(file, pause)
  local t0 = core.now()
  local fh = assert(io.open(file))
  local n = tonumber(fh:read("*a")) or 0
  fh:close()
  pause()
  fh = assert(io.open(file, "w"))
  fh:write(tostring(n + 1))
  fh:close()
  return t0, core.now()
end

--- Wait (bounded) until `file` holds `n` lines. False on timeout.
function W.wait_lines(file, n, timeout)
  local deadline = core.now() + (timeout or 30)
  while true do
    local lines = 0
    local fh = io.open(file)
    if fh then
      for _ in fh:lines() do lines = lines + 1 end
      fh:close()
    end
    if lines >= n then return true end
    if core.now() >= deadline then return false end
    tcore.sleep(0.005)
  end
end

--- Wait (bounded) until `n` workers have called `meet` on the same file:
-- each appends one line, then waits until the file holds `n` lines. A
-- worker that calls it while holding a lease, and leaves only afterwards,
-- makes `n` holders at once certain instead of a matter of timing. Those
-- that arrive after the n-th pass straight through. False on timeout.
function W.meet(file, n, timeout)
  local fh = assert(io.open(file, "a"))
  fh:write("in\n"); fh:close()
  return W.wait_lines(file, n, timeout)
end

return W
