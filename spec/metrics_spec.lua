-- Metrics (zk:stats().kinds, zklock.metrics()) and logging
-- (zklock.set_logger, zklock.set_log_level): the histogram's quantiles
-- against exact ones, the counts of a real server's acquires, timeouts,
-- releases and losses, the Prometheus text read by the reference parser,
-- and the C client's log reaching a Lua logger.  Under nginx:
-- spec/nginx_spec.lua ("metrics").
local H = require "spec.helpers"
local metrics = require "zklock.metrics"
local zklock = H.zklock

describe("metrics: the histogram", function()
  it("reads quantiles within 5% of the exact ones", function()
    local d, xs = metrics.dist(), {}
    -- 1000 times spread over four decades (0.1 ms .. 1 s), not in order
    for i = 1, 1000 do
      local x = 1e-4 * 10 ^ (((i * 7919) % 1000) / 250)
      xs[i] = x
      metrics.observe(d, x)
    end
    table.sort(xs)
    for _, q in ipairs { 0.5, 0.9, 0.99 } do
      local exact = xs[math.ceil(q * #xs)]
      local got = metrics.quantile(d, q)
      assert.is_true(math.abs(got - exact) / exact <= 0.05,
        ("p%g: %g, exact %g"):format(q * 100, got, exact))
    end
    assert.equal(1000, d.n)
    assert.equal(xs[#xs], d.max)
    assert.is_nil(metrics.quantile(metrics.dist(), 0.5))
  end)

  it("adds up merged and serialized figures", function()
    local a, b = metrics.new_kind(), metrics.new_kind()
    a.acquires, b.acquires, b.losses = 3, 4, 1
    metrics.observe(a.wait, 0.001)
    metrics.observe(b.wait, 0.5)
    metrics.observe(b.hold, 2)
    local merged = {}
    assert.is_true(metrics.merge_text(merged,
      metrics.serialize { mutex = a }))
    assert.is_true(metrics.merge_text(merged,
      metrics.serialize { mutex = b, semaphore = a }))
    local m = merged.mutex
    assert.equal(7, m.acquires)
    assert.equal(1, m.losses)
    assert.equal(2, m.wait.n)
    assert.equal(0.5, m.wait.max)
    assert.near(0.501, m.wait.sum, 1e-12)
    assert.equal(1, m.hold.n)
    assert.equal(3, merged.semaphore.acquires)
    assert.is_false(metrics.merge_text({}, "mutex 1 2"))
  end)
end)

describe("metrics and logging against a server", function()
  local srv, zk, zk2

  lazy_setup(function()
    srv = H.testing.server()
    zk = H.connect(srv)
    zk2 = H.connect(srv)
  end)
  lazy_teardown(function()
    if zk then zk:close() end
    if zk2 then zk2:close() end
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  it("counts acquires, releases, timeouts and losses per kind", function()
    local path = H.path("metrics")
    local before = zk:stats().kinds.mutex
    assert.is_nil(before) -- a fresh client: nothing yet
    local m = zk:mutex(path)
    -- the acquires that hold, timed from outside
    local outside = 0
    local function acquire(lock)
      local t0 = H.now()
      assert(lock:acquire(5))
      outside = outside + (H.now() - t0)
    end
    for _ = 1, 3 do
      acquire(m)
      assert(m:release())
    end
    -- reentry is one hold, not two
    acquire(m); assert(m:acquire(5))
    assert(m:release()); assert(m:release())
    -- a timeout: the other client holds
    local other = zk2:mutex(path)
    assert(other:acquire(5))
    local t0 = H.now()
    local r, _, code = m:acquire(0.2)
    assert.is_true(H.now() - t0 >= 0.2)
    assert.is_nil(r)
    assert.equal("timeout", code)
    -- a wait that ends in a hold, measured from outside too
    local w = zk:mutex(path)
    local s = zk2:semaphore(path .. "-sem", 1)
    local lease = assert(s:acquire(5))
    assert(other:release())
    acquire(w)
    -- a loss: our node deleted by someone else, seen at release
    local del = assert(zk2:_delete(w:node()))
    assert.equal("done", H.await(zk2, del, H.now() + 10))
    H.wait_until(function() return not w:is_held() end, 30, "the loss")
    local ok, _, lcode = w:release()
    assert.is_nil(ok)
    assert.equal("lock_lost", lcode)
    assert(lease:release())

    local k = zk:stats().kinds.mutex
    assert.equal(5, k.acquires)
    assert.equal(4, k.releases)
    assert.equal(1, k.timeouts)
    assert.equal(1, k.losses)
    assert.equal(0, k.errors)
    assert.equal(5, k.wait.count)
    assert.equal(4, k.hold.count)
    -- (measured inside what was measured outside; the timed-out acquire
    -- is not among the waits)
    assert.is_true(k.wait.sum <= outside, "waits longer than measured")
    assert.is_true(k.wait.p50 <= k.wait.p99 and k.wait.p99 <= k.wait.max)
    -- the other client's figures are its own
    local k2 = zk2:stats().kinds
    assert.equal(1, k2.mutex.acquires)
    assert.equal(1, k2.mutex.releases)
    assert.equal(1, k2.semaphore.acquires)
    assert.equal(1, k2.semaphore.releases)
  end)

  it("writes the process's figures in the Prometheus text format",
      function()
    local path = H.path("metrics-prom")
    local before = H.parse_prometheus(zklock.metrics())
    local function count(samples, name)
      local s = samples[name]
      return s and s.value or 0
    end
    local rw = zk:rwlock(path)
    assert(rw.read:acquire(5))
    assert(rw.read:release())
    local samples = H.parse_prometheus(zklock.metrics())
    local key = 'zklock_acquires_total{kind=rwlock.read}'
    assert.equal(count(before, key) + 1, count(samples, key))
    assert.equal("counter", samples[key].type)
    local q = samples['zklock_wait_seconds{kind=rwlock.read,quantile=0.99}']
    assert.equal("summary", q.type)
    assert.is_true(q.value > 0)
    assert.equal(count(before, 'zklock_hold_seconds_count{kind=rwlock.read}')
      + 1, count(samples, 'zklock_hold_seconds_count{kind=rwlock.read}'))
  end)

  it("sends the C client's log and failing callbacks to the logger",
      function()
    local got = {}
    zklock.set_logger(function(level, msg)
      got[#got + 1] = level .. " " .. msg
    end)
    zklock.set_log_level("info")
    local ok, err = pcall(function()
      local c = H.connect(srv)
      local m = c:mutex(H.path("metrics-log"))
      m:on_lost(function() error("listener broke") end)
      assert(m:acquire(5))
      local del = assert(zk:_delete(m:node()))
      assert.equal("done", H.await(zk, del, H.now() + 10))
      H.wait_until(function() c:dispatch(); return not m:is_held() end, 30,
        "the loss")
      c:dispatch()
      m:release()
      c:close()
      zk:dispatch() -- the queued C log goes out here
    end)
    zklock.set_log_level("none")
    zklock.set_logger(nil)
    assert(ok, err)
    local info, failed = false, false
    for _, line in ipairs(got) do
      if line:match("^info .*ZOO_INFO@") then info = true end
      if line:match("^error on_lost callback failed: .*listener broke") then
        failed = true
      end
    end
    assert.is_true(info, "no C client INFO line reached the logger")
    assert.is_true(failed, "the failing listener was not reported")
    assert.has_error(function() zklock.set_logger(42) end,
      "bad argument #1 to 'set_logger' (function expected, got number)")
    assert.has_error(function() zklock.set_log_level("loud") end)
  end)
end)
