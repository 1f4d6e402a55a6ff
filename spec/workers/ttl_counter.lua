-- The exclusion checker's worker on TTL holds (spec/ttl_spec.lua):
-- `ttl_counter.lua hosts path file log cycles id ttl gate kill_at
--  markfile [resume_t0]`.
-- Cycles 1..`cycles`: take the mutex at `path` on a TTL node, as
-- participant `id`; bump the counter in `file`; release; log the interval
-- "<start> <end>" spent holding.  At cycle `kill_at` (0: none), once it
-- holds, it writes "<start> <token>" to `markfile` and waits (bounded) to
-- be SIGKILLed there.  Started again with `resume_t0` (that start), it
-- begins at cycle `kill_at`: its first acquire must find its own node
-- (the same token, held at once), and that hold's interval runs from
-- `resume_t0`, the killed process's start, so that anyone who entered in
-- between overlaps it.
local W = dofile("spec/workers/common.lua")
local core = require "zklock.core"
local tcore = require "zklock.testing.core"

local hosts, path, file, logfile, cycles, id, ttl, gate, kill_at, markfile,
  resume_t0 = ...
cycles, ttl, kill_at = tonumber(cycles), tonumber(ttl), tonumber(kill_at)
resume_t0 = tonumber(resume_t0)

local zk = assert(W.connect(hosts, { session_timeout = 2, id = id }))
local m = zk:mutex(path, { ttl = ttl })
local log = assert(io.open(logfile, resume_t0 and "a" or "w"))
log:setvbuf("line")
if not resume_t0 then W.wait_gate(gate) end
for cycle = resume_t0 and kill_at or 1, cycles do
  assert(m:acquire(60))
  local t0 = core.now()
  if resume_t0 and cycle == kill_at then
    local fh = assert(io.open(markfile))
    local was = fh:read("*a"):match("%S+ (%S+)")
    fh:close()
    assert(m:token("string") == was, "not resumed: " ..
      tostring(m:token("string")) .. " after " .. tostring(was))
    t0 = resume_t0
  elseif cycle == kill_at then
    local fh = assert(io.open(markfile .. ".tmp", "w"))
    fh:write(("%.6f %s\n"):format(t0, m:token("string")))
    fh:close()
    assert(os.rename(markfile .. ".tmp", markfile))
    local deadline = core.now() + 60
    while core.now() < deadline do tcore.sleep(0.05) end
    error("never killed")
  end
  local _, t1 = W.bump(file, function() W.spin(0.001) end)
  assert(m:release())
  log:write(("%.6f %.6f\n"):format(t0, t1))
end
log:close()
zk:close()
