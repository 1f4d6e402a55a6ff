-- Shared by the worker processes (loaded with dofile from the project root):
-- the start gate and the syscall-free pause.
local core = require "zklock.core"
local tcore = require "zklock.testing.core"

local W = {}

--- Wait (bounded) until the parent opens the gate file, so that all the
-- workers start together.
function W.wait_gate(gate, timeout)
  local deadline = core.now() + (timeout or 60)
  while true do
    local fh = io.open(gate)
    if fh then fh:close(); return end
    assert(core.now() < deadline, "gate never opened")
    tcore.sleep(0.01)
  end
end

--- Busy-wait `s` seconds: widens a window without giving up the CPU.
function W.spin(s)
  local t = core.now() + s
  while core.now() < t do end
end

return W
