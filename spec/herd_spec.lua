-- Herd-free waiting: each waiter watches only its predecessor, so one
-- release wakes exactly one waiter.
local H = require "spec.helpers"

local N = 50

-- watches per path, from the server's own listing (wchc)
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
    local m = zk:mutex(path) -- one object, N coroutines: N owners
    local order, fns = {}, {}
    local seen = {} -- watch events received when each waiter got the lock
    for i = 1, N do
      fns[i] = function()
        assert(m:acquire(60))
        order[#order + 1] = i
        seen[#seen + 1] = zk:_stats().watch_events
        m:release()
      end
    end
    local phase = "queue"
    local before
    H.run(zk, fns, 120, function()
      if phase == "queue" and #holder:participants() == N + 1 then
        -- everyone queued: once each has set its watch (bounded wait), the
        -- server holds exactly one watch per predecessor
        local per, on_path, max
        H.wait_until(function()
          per, on_path, max = watches(srv), 0, 0
          for p, n in pairs(per) do
            if p:sub(1, #path) == path then
              on_path = on_path + 1
              if n > max then max = n end
            end
          end
          return on_path >= N
        end, 20, "every waiter's watch")
        assert.equal(N, on_path) -- N waiters, N distinct watched nodes
        assert.equal(1, max)
        assert.is_nil(per[path]) -- nobody watches the children list
        before = zk:_stats()
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
    local final = zk:_stats()
    assert.equal(N, final.watch_events - before.watch_events)
    -- and O(1) requests per hand-off: delete, listing, get-with-watch...
    local per_handoff = (final.requests - before.requests) / N
    assert.is_true(per_handoff <= 4, "requests per hand-off: " .. per_handoff)
    assert.same({}, H.lock_nodes(zk, path))
  end)
end)
