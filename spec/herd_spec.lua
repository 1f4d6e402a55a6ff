-- Herd-free waiting: each waiter watches only its predecessor, so one
-- release wakes exactly one waiter.  (Every contender also watches its own
-- node, to notice a deletion it did not make: the holder's own release
-- notifies the holder itself, counted apart as `own_events`.)
local H = require "spec.helpers"

local N = 50

-- watches per path, from the server's own listing (wchc)
local function wakeups(zk)
  local s = zk:_stats()
  return s.watch_events - s.own_events
end

local function watches(srv)
  local per = {}
  local text = assert(srv:four_letter("wchc"))
  for p in text:gmatch("\n%s+(/[^\n]*)") do
    per[p] = (per[p] or 0) + 1
  end
  return per
end

describe("herd", function()
  local srv, zk, holder_zk

  lazy_setup(function()
    srv = H.testing.server()
    zk = H.connect(srv)
    holder_zk = H.connect(srv)
  end)
  lazy_teardown(function()
    if srv then H.assert_no_orphans(srv) end
    if zk then zk:close() end
    if holder_zk then holder_zk:close() end
    if srv then srv:close() end
  end)

  it(N .. " waiters: one watch per node, one wake-up per release", function()
    local path = H.path("herd")
    local holder = holder_zk:mutex(path)
    assert(holder:acquire(5))
    -- one object, N coroutines: N owners, each its own node (no cohort:
    -- this is the per-request form's herd; cohort_spec has the cohort's)
    local m = zk:mutex(path, { cohort = false })
    local order, fns = {}, {}
    local seen = {} -- watch events received when each waiter got the lock
    for i = 1, N do
      fns[i] = function()
        assert(m:acquire(60))
        order[#order + 1] = i
        seen[#seen + 1] = wakeups(zk)
        m:release()
      end
    end
    local phase = "queue"
    local before
    H.run(zk, fns, 120, function()
      if phase == "queue" and #holder:participants() == N + 1 then
        -- everyone queued: once each has set its watches (bounded wait),
        -- the server holds one watch per node for the waiters' session
        -- (its predecessor's, deduplicated with its own), and the holder's
        -- session watches its own node only
        local parts = holder:participants()
        table.sort(parts)
        local per, mine, theirs
        H.wait_until(function()
          per = H.watches_by_session(srv)
          mine, theirs = per[zk:session_id()] or {}, per[holder_zk:session_id()]
          return #mine >= N + 1 and theirs
        end, 20, "every waiter's watch")
        table.sort(mine)
        assert.same(parts, mine)
        assert.same({ holder:node() }, theirs)
        assert.is_nil(watches(srv)[path]) -- nobody watches the children list
        before = { watch_events = wakeups(zk), requests = zk:_stats().requests }
        phase = "release"
        holder:release()
      end
    end)
    assert.equal(N, #order)
    assert.same({ 1, 2, 3, 4, 5 }, { order[1], order[2], order[3], order[4],
      order[5] }) -- FIFO
    -- between two hand-offs exactly one waiter was woken
    local prev = before.watch_events
    for i = 1, N do
      assert.equal(1, seen[i] - prev, "hand-off " .. i)
      prev = seen[i]
    end
    -- every hand-off costs one watch event: N releases, N events
    local final = { watch_events = wakeups(zk), requests = zk:_stats().requests }
    assert.equal(N, final.watch_events - before.watch_events)
    -- and O(1) requests per hand-off: delete, listing, get-with-watch...
    local per_handoff = (final.requests - before.requests) / N
    assert.is_true(per_handoff <= 4, "requests per hand-off: " .. per_handoff)
    assert.same({}, H.lock_nodes(zk, path))
  end)
end)
