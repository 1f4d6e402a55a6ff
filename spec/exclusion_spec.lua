-- Mutual exclusion across separate OS processes, with a checker that is
-- first shown to catch a lock that does not exclude.
local H = require "spec.helpers"

local WORKERS, CYCLES = 4, 200

-- Run the counter workers (mode: one for all, or a list, one per worker);
-- return the final count and the number of overlapping pairs among all
-- logged intervals.
local function run_checker(srv, mode)
  local path = H.path("excl")
  local file = H.tmpname("counter")
  H.write(file, "0")
  local gate = H.tmpname("gate")
  local procs, logs = {}, {}
  for i = 1, WORKERS do
    logs[i] = H.tmpname("log")
    procs[i] = H.spawn("spec/workers/counter.lua", srv.connect_string, path,
      file, logs[i], CYCLES, type(mode) == "table" and mode[i] or mode, gate)
  end
  H.write(gate, "go")
  for i, p in ipairs(procs) do
    local status = p:wait(180)
    assert(status == 0, "worker " .. i .. " failed: " .. p:output())
    p:cleanup()
  end
  local intervals = H.intervals(logs)
  for _, log in ipairs(logs) do os.remove(log) end
  table.sort(intervals, function(x, y) return x[1] < y[1] end)
  local overlaps, reach = 0, -math.huge
  for _, iv in ipairs(intervals) do
    if iv[1] < reach then overlaps = overlaps + 1 end
    if iv[2] > reach then reach = iv[2] end
  end
  local count = tonumber(H.read(file))
  os.remove(file)
  os.remove(gate)
  return count, overlaps, #intervals
end

describe("mutual exclusion across processes", function()
  local srv

  lazy_setup(function() srv = H.testing.server() end)
  lazy_teardown(function()
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  it("the checker catches workers that bypass the lock", function()
    local count, overlaps, n = run_checker(srv, "bypass")
    assert.equal(WORKERS * CYCLES, n)
    -- the checker's verdict is the overlap; lost updates usually follow
    -- but need the windows to interleave just so, so they are not required
    assert.is_true(overlaps > 0, "no overlap seen without the lock")
    assert.is_true(count <= WORKERS * CYCLES)
  end)

  it(("%d processes x %d cycles under the mutex: exact count, no overlap")
      :format(WORKERS, CYCLES), function()
    local count, overlaps, n = run_checker(srv, "lock")
    assert.equal(WORKERS * CYCLES, n)
    assert.equal(0, overlaps)
    assert.equal(WORKERS * CYCLES, count)
    local zk = H.connect(srv)
    assert.same({}, H.lock_nodes(zk, "/zklock-spec"))
    zk:close()
  end)

  it(("%d processes x %d cycles, two whose released nodes linger (lock " ..
      "caching) and two plain: exact count, no overlap")
      :format(WORKERS, CYCLES), function()
    local count, overlaps, n = run_checker(srv,
      { "linger", "lock", "linger", "lock" })
    assert.equal(WORKERS * CYCLES, n)
    assert.equal(0, overlaps)
    assert.equal(WORKERS * CYCLES, count)
    local zk = H.connect(srv) -- (the lingering nodes went with their close)
    assert.same({}, H.lock_nodes(zk, "/zklock-spec"))
    zk:close()
  end)
end)
