-- A place in the queue (docs/api.md, "A place in the queue"; issue 36):
-- acquire's on_queued(position) is called once, when the acquire is
-- queued (or holds at once: 0), with the holds ahead of it, counted from
-- the listing the acquire makes anyway (no request more): a mutex's nodes
-- ahead, a reader's writers ahead, a semaphore's leases over its count;
-- in a lock cohort, the local hold or the cohort node's place and the
-- local waiters ahead.
local H = require "spec.helpers"

describe("on_queued", function()
  local srv, zk
  lazy_setup(function()
    srv = H.testing.server()
    zk = H.connect(srv)
  end)
  lazy_teardown(function()
    if zk then zk:close() end
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  -- Acquires in coroutines on client c (each of `makers` returns one:
  -- fn(told) -> what to release), started one at a time, each once the
  -- one before was told its place; once all were, the holds go in order.
  -- Returns the places told, by acquire.
  local function queue_up(c, makers)
    local places, go, cos = {}, false, {}
    for i, make in ipairs(makers) do
      cos[i] = coroutine.create(function()
        local held = assert(make(function(p)
          assert.is_nil(places[i], "told twice")
          places[i] = p
        end))
        assert.is_number(places[i], "held, never told")
        while not go do coroutine.yield() end
        assert.is_true(held:release())
      end)
    end
    local started = 0
    H.run(c, { function()
      while true do
        if started < #cos and (started == 0 or places[started] ~= nil) then
          started = started + 1
        end
        local live = 0
        for k = 1, started do
          local co = cos[k]
          if coroutine.status(co) == "suspended" then
            local ok, err = coroutine.resume(co)
            if not ok then error(debug.traceback(co, err), 0) end
          end
          if coroutine.status(co) ~= "dead" then live = live + 1 end
        end
        if started == #cos and places[#cos] ~= nil then go = true end
        if started == #cos and live == 0 then return end
        coroutine.yield()
      end
    end }, 60)
    return places
  end

  local function mutex(c, path, opts)
    return function(told)
      return c:mutex(path, opts):acquire(10, { on_queued = told })
    end
  end

  it("a mutex: 0 for the holder, then the nodes ahead of each waiter",
     function()
    local path = H.path("queued")
    local own = { cohort = false }
    assert.same({ 0, 1, 2 }, queue_up(zk, { mutex(zk, path, own),
      mutex(zk, path, own), mutex(zk, path, own) }))
  end)

  it("a lock cohort: the local hold, then the local waiters ahead; " ..
     "behind a remote holder, its node's place too", function()
    local path = H.path("queued")
    assert.same({ 0, 1, 2 }, queue_up(zk, { mutex(zk, path),
      mutex(zk, path), mutex(zk, path) }))
    -- another client holds: our cohort's node is second, its waiter
    -- first of ours, the next behind it
    local other = H.connect(srv)
    local path2 = H.path("queued")
    assert.same({ 0, 1, 2, 3 }, queue_up(zk, { mutex(other, path2),
      mutex(zk, path2), mutex(zk, path2), mutex(zk, path2) }))
    other:close()
  end)

  it("read/write locks: readers hold together; a reader counts the " ..
     "writers ahead, a writer every node ahead", function()
    local path = H.path("queued")
    local function read(told)
      local rw = zk:rwlock(path, { cohort = false })
      return rw.read:acquire(10, { on_queued = told })
    end
    local function write(told)
      local rw = zk:rwlock(path, { cohort = false })
      return rw.write:acquire(10, { on_queued = told })
    end
    assert.same({ 0, 0, 2, 1 }, queue_up(zk, { read, read, write, read }))
  end)

  it("a semaphore: the leases over its count; a semaphore mutex",
     function()
    local path = H.path("queued")
    local function lease(told)
      return zk:semaphore(path, 2):acquire(10, { on_queued = told })
    end
    assert.same({ 0, 0, 1 }, queue_up(zk, { lease, lease, lease }))
    local spath = H.path("queued")
    local function sm(told)
      return zk:semaphore_mutex(spath):acquire(10, { on_queued = told })
    end
    assert.same({ 0, 1 }, queue_up(zk, { sm, sm }))
  end)

  it("a cached node taken again: 0; a reentrant acquire is not told",
     function()
    local path = H.path("queued")
    local m = zk:mutex(path, { linger = 30 })
    assert(m:acquire(5))
    assert(m:release())
    local told = {}
    local function tell(p) told[#told + 1] = p end
    assert(m:acquire(5, { on_queued = tell }))
    assert(m:acquire(5, { on_queued = tell }))
    assert.same({ 0 }, told)
    assert(m:release())
    assert(m:release())
    zk:close()
    zk = H.connect(srv)
  end)

  it("an error in on_queued ends the acquire: raised, the node gone",
     function()
    local path = H.path("queued")
    local other = H.connect(srv)
    local held = other:mutex(path)
    assert(held:acquire(5))
    local m = zk:mutex(path, { cohort = false })
    assert.has_error(function()
      m:acquire(10, { on_queued = function() error("too far back") end })
    end, "too far back")
    H.wait_until(function() return #held:participants(5) == 1 end, 10,
      "the raising waiter's node to go")
    assert.is_false(m:is_held())
    assert(held:release())
    -- held at once, then raised: the hold given back
    assert.has_error(function()
      m:acquire(10, { on_queued = function() error("no") end })
    end, "no")
    H.wait_until(function() return #held:participants(5) == 0 end, 10,
      "the raising holder's node to go")
    other:close()
  end)

  it("bad input: not a function names the option; a multilock has none",
     function()
    local m = zk:mutex(H.path("queued"))
    assert.has_error(function() m:acquire(1, { on_queued = 3 }) end,
      "bad argument #2 to 'acquire' (on_queued must be a function, got " ..
      "number)")
    assert.has_error(function()
      zk:semaphore(H.path("queued"), 2):acquire(1, { on_queued = "x" })
    end, "bad argument #2 to 'acquire' (on_queued must be a function, got " ..
      "string)")
    local ml = zk:multilock({ zk:mutex(H.path("queued")) })
    assert.has_error(function()
      ml:acquire(1, { on_queued = function() end })
    end)
  end)
end)
