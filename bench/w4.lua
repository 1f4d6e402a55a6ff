-- make bench, W4 (docs/performance.md): the nginx stock service of
-- examples/nginx under wrk, 100 connections, against one fresh ZooKeeper.
--   w4 ...           /buy on one instance with 2 workers: requests/s, p99,
--                    and the oversell count (must be 0)
--   w4.buy_plain ... /buy_plain, same load: the same purchase as acquire,
--                    get, set, release (/buy reads with the acquire and
--                    writes with the release)
--   w4.unlocked ...  /buy_unlocked, same load: the oversell the lock stops
--   w4.handoff.*     one worker, /buy_timed: the gap from one holder's
--                    release to the next holder's acquire returning, and
--                    (wake) from the C core seeing the change to the
--                    waiting request running; once with zklock.ngx's
--                    wake-up socket, once with a 10 ms polling waiter, the
--                    peer a plain yielding loop would give
--   w4.buy.per_request  /buy with lock cohorts off (ZK_LOCK_COHORT=off):
--                    each request its own node, as before issue 25
--   w4.fleet.*       3 instances of 2 workers, one wrk each at once, on
--                    one lock: purchases/s, and the server's write
--                    transactions per purchase (its zxid), with and
--                    without cohorts
--   w4.queue         one worker, 10,000 requests queued on one lock held
--                    by another request: the lock's nodes meanwhile,
--                    /ping times, then the drain (in a cohort; and
--                    w4.queue.per_request, each its own node)
--   w4.queue100k     the same with 100,000 requests, in a cohort, over
--                    HTTP/2 (h2load: 100 connections of 1000 streams, so
--                    that they fit the descriptors a process may have)
-- Run from the project root under LuaJIT or Lua 5.4 (it drives nginx and
-- wrk from outside).
package.path = "./?.lua;" .. package.path
local zklock = require "zklock"
local testing = require "zklock.testing"
local N = require "spec.nginx"
local core = require "zklock.core"
local tcore = require "zklock.testing.core"

local SECS = tonumber(os.getenv("BENCH_W4_SECS")) or 10
local H2_CONNS = 100 -- (w4.queue100k: HTTP/2 connections)
local CONNS = 100
local STOCK = tonumber(os.getenv("BENCH_W4_STOCK")) or 1500

local TIMED = [[
location = /buy_timed {
    content_by_lua_block {
        local core = require "zklock.core"
        local stock = require "stock"
        local lock = stock.lock()
        assert(lock:acquire(60))
        local t = core.now()
        if LAST_RELEASE and t - LAST_RELEASE < 1 then
            GAPS = GAPS or {}
            GAPS[#GAPS + 1] = t - LAST_RELEASE
        end
        LAST_RELEASE = nil
        local bought = stock.take_one()
        lock:release()
        LAST_RELEASE = core.now()
        if not bought then ngx.status = 409 end
        ngx.say(bought and "bought" or "sold out")
    }
}
location = /gaps {
    content_by_lua_block {
        local g = GAPS or {}
        table.sort(g)
        local function p(x) return g[math.max(1, math.ceil(#g * x))] or 0 end
        local s = require("zklock.ngx").stats(require("stock").client(), true)
        ngx.say(#g, " ", p(0.5), " ", p(0.99), " ", s.wakeups, " ",
                s.wake_p50 or 0, " ", s.wake_p99 or 0)
        GAPS = {}
    }
}
]]

local HOLD = [[
location = /hold {
    content_by_lua_block {
        local stock = require "stock"
        local zk, lock = stock.client(), stock.lock()
        assert(lock:acquire(30))
        ngx.say("held")
        ngx.flush(true)
        zk:barrier("/bench/release"):wait(120)
        lock:release()
    }
}
# /buy with room for a queue of 10,000 (every buy waits for the whole
# queue to form, then for its turn)
location = /buy_queued { content_by_lua_block { require("stock").buy(900) } }
# the requests queued in the worker's lock cohort (no node of their own)
location = /local_waiters {
    content_by_lua_block { ngx.say(require("stock").lock():local_waiters()) }
}
]]

-- the peer: zklock.ngx loaded, then its waiter replaced by 10 ms polling
local POLLING = [[
init_by_lua_block {
    require "zklock.ngx"
    require("zklock").set_waiter(function(_, _, timeout)
        ngx.sleep(math.min(timeout or 0.01, 0.01))
    end)
}
]]

-- the same service with lock cohorts off (examples/nginx/stock.lua)
local PER_REQUEST = { env = "ZK_LOCK_COHORT=off",
  main = "env ZK_LOCK_COHORT;" }

-- wrk's figures (wrk_bg(url, conns, threads) runs it in the background
-- and returns a function that reads them)
local function parse_wrk(out)
  local total = tonumber(out:match("(%d+) requests in"))
  local rps = tonumber(out:match("Requests/sec:%s*([%d.]+)"))
  local non2xx = tonumber(out:match("Non%-2xx or 3xx responses: (%d+)")) or 0
  local function ms(tag)
    local v, unit = out:match(tag .. "%s+([%d.]+)(%a+)")
    v = tonumber(v)
    if not v then return nil end
    return unit == "us" and v / 1000 or unit == "s" and v * 1000 or v
  end
  if not (total and rps) then error("wrk said:\n" .. out) end
  return { total = total, rps = rps, ok = total - non2xx, p50 = ms("50%%"),
    p99 = ms("99%%") }
end

local function wrk_bg(url, conns, threads)
  local fh = assert(io.popen(("wrk -t %d -c %d -d %ds --latency '%s' 2>&1")
    :format(threads or 2, conns or CONNS, SECS, url)))
  return function()
    local out = fh:read("*a")
    fh:close()
    return parse_wrk(out)
  end
end

local function wrk(url) return wrk_bg(url)() end

local srv = testing.server({ tick_time = 2000 })
local ok, err = pcall(function()
  local zk = assert(zklock.connect(srv.connect_string))
  local function stock()
    local d = assert(zk:get("/zklock-example/stock"))
    return tonumber(d)
  end
  -- the server's write transactions so far (its zxid, within an epoch)
  local function zxid()
    local hex = (srv:four_letter("srvr") or ""):match("Zxid: 0x(%x+)")
    return tonumber(hex, 16) or 0
  end
  -- requests wrk cut off at its end finish before the stock is read
  local function settle()
    local m = zk:mutex("/zklock-example/stock-lock", { cohort = false })
    assert(m:acquire(60)); m:release()
  end
  local function report(name, r, taken, writes)
    -- oversell: answered "bought" beyond what the stock lost; the other
    -- way round are buys wrk cut off at its end (done, never answered)
    print(("%s conns=%d secs=%d requests=%d req_per_s=%.1f p50_ms=%.1f " ..
      "p99_ms=%.1f bought=%d stock_taken=%d oversell=%d cut_off=%d " ..
      "writes_per_request=%.2f"):format(name, r.conns or CONNS, SECS,
      r.total, r.rps, r.p50 or -1, r.p99 or -1, r.ok, taken,
      math.max(0, r.ok - taken), math.max(0, taken - r.ok),
      writes / math.max(1, r.total)))
  end
  local function run(name, inst, path)
    assert(inst:get("/reset?n=" .. STOCK) == 200)
    local z0 = zxid()
    local r = wrk(inst:url(path))
    settle()
    report(name, r, STOCK - stock(), zxid() - z0)
    return r
  end

  -- a fleet: `n` instances of 2 workers, one wrk each, all at once
  local function fleet(name, n, opts)
    local insts = {}
    for i = 1, n do
      insts[i] = N.start { hosts = srv.connect_string, workers = 2,
        env = opts.env, main = opts.main }
    end
    assert(insts[1]:get("/reset?n=" .. 1000000) == 200)
    local z0 = zxid()
    local waits = {}
    for i, inst in ipairs(insts) do
      waits[i] = wrk_bg(inst:url("/buy"), math.floor(CONNS / n), 1)
    end
    local total, rps, okn = 0, 0, 0
    for _, w in ipairs(waits) do
      local r = w()
      total, rps, okn = total + r.total, rps + r.rps, okn + r.ok
    end
    settle()
    local writes = zxid() - z0
    local taken = 1000000 - stock()
    print(("%s instances=%d workers=%d conns=%d secs=%d req_per_s=%.1f " ..
      "purchases_per_s=%.1f writes_per_purchase=%.2f oversell=%d")
      :format(name, n, 2 * n, CONNS, SECS, rps, taken / SECS,
        writes / math.max(1, taken), math.max(0, okn - taken)))
    for _, inst in ipairs(insts) do inst:stop() end
    return taken / SECS
  end

  local only_queue = os.getenv("BENCH_W4_QUEUE_ONLY") -- (just w4.queue)
  if not only_queue then
    local a = N.start { hosts = srv.connect_string, workers = 2 }
    local buy = run("w4.buy", a, "/buy")
    local plain = run("w4.buy_plain", a, "/buy_plain")
    print(("ratio w4.buy/w4.buy_plain=%.2f (target >= 2)"):format(
      buy.rps / plain.rps))
    run("w4.buy_unlocked", a, "/buy_unlocked")
    a:stop()
    local pr = N.start { hosts = srv.connect_string, workers = 2,
      env = PER_REQUEST.env, main = PER_REQUEST.main }
    local buy_pr = run("w4.buy.per_request", pr, "/buy")
    pr:stop()
    print(("ratio w4.buy/w4.buy.per_request=%.2f (target >= 1.8)"):format(
      buy.rps / buy_pr.rps))

    local f_on = fleet("w4.fleet", 3, {})
    local f_off = fleet("w4.fleet.per_request", 3, PER_REQUEST)
    print(("ratio w4.fleet/w4.fleet.per_request=%.2f"):format(f_on / f_off))

    for _, variant in ipairs { { "socket", "" }, { "poll10ms", POLLING } } do
      local b = N.start { hosts = srv.connect_string, workers = 1,
        extra = TIMED, http = variant[2] }
      b:get("/gaps") -- reset
      local r = run("w4.handoff." .. variant[1] .. ".buy_timed", b,
        "/buy_timed")
      local _, body = b:get("/gaps")
      local n, g50, g99, wn, w50, w99 = body:match(
        "(%d+) (%S+) (%S+) (%d+) (%S+) (%S+)")
      print(("w4.handoff.%s gaps=%d gap_p50_ms=%.2f gap_p99_ms=%.2f " ..
        "wakeups=%d wake_p50_ms=%.3f wake_p99_ms=%.3f req_per_s=%.1f"):format(
        variant[1], n, g50 * 1e3, g99 * 1e3, wn, w50 * 1e3, w99 * 1e3, r.rps))
      b:stop()
    end
  end

  -- thousands of requests queued on one lock, in one worker, on one
  -- session, while /ping is timed
  local function queue(name, n, opts)
    local h2port = opts.h2 and tcore.free_port()
    local h2 = opts.h2 and ("listen 127.0.0.1:%d http2;\n" ..
      "http2_max_concurrent_streams %d;\n"):format(h2port,
      math.ceil(n / H2_CONNS)) or ""
    local fds = opts.h2 and 4 * H2_CONNS + 2000 or 2 * n + 2000
    local c = N.start { hosts = srv.connect_string, workers = 1,
      extra = HOLD .. h2, worker_connections = math.min(n, 18000) + 1000,
      env = opts.env,
      main = "worker_rlimit_nofile " .. fds .. ";\n" .. (opts.main or "") }
    local function worker_rss_kb()
      local fh = io.open("/proc/" .. c:workers()[1] .. "/status")
      local kb = fh and tonumber(fh:read("*a"):match("VmRSS:%s*(%d+)"))
      if fh then fh:close() end
      return kb or 0
    end
    assert(c:get("/reset?n=30") == 200)
    local release = zk:barrier("/bench/release")
    assert(release:set())
    local lock = zk:mutex("/zklock-example/stock-lock", { cohort = false })
    -- the lock's nodes, and the requests queued: each its own node, or in
    -- the worker's cohort (/local_waiters)
    local function nodes() return #assert(lock:participants(10)) end
    local function queued()
      local _, body = c:get("/local_waiters")
      return math.max(nodes() - 1, tonumber(body) or 0)
    end
    local holder = N.parallel_bg({ c:url("/hold") }, 150)
    local deadline = core.now() + 30
    while nodes() < 1 do
      assert(core.now() < deadline, "the hold never came"); tcore.sleep(0.05)
    end
    local rss0 = worker_rss_kb()
    local wait_all
    if opts.h2 then
      local wait_h2 = N.h2load_bg(("http://127.0.0.1:%d/buy_queued"):format(
        h2port), n, H2_CONNS, 1200)
      wait_all = function() return (wait_h2()) end
    else
      local batches = {}
      for i = 1, n, 250 do -- (curl runs at most 300 transfers at once)
        local urls = {}
        for _ = i, math.min(n, i + 249) do
          urls[#urls + 1] = c:url("/buy_queued")
        end
        batches[#batches + 1] = N.parallel_bg(urls, 600)
      end
      wait_all = function()
        local count = {}
        for _, wait_batch in ipairs(batches) do
          for code, k in pairs(wait_batch(600)) do
            count[code] = (count[code] or 0) + k
          end
        end
        return count
      end
    end
    deadline = core.now() + (opts.h2 and 600 or 90)
    local t_q = core.now()
    while queued() < n do
      assert(core.now() < deadline, "requests never all queued")
      tcore.sleep(0.1)
    end
    local queue_s = core.now() - t_q
    local lock_nodes = nodes() -- (the holder's too: in one cohort, one)
    local rss1 = worker_rss_kb()
    local pings = {}
    for i = 1, 100 do pings[i] = select(3, c:get("/ping")) end
    table.sort(pings)
    local t0 = core.now()
    assert(release:remove())
    local count = wait_all()
    local drained = core.now() - t0
    holder(150)
    local _, left = c:get("/stock")
    local other = {}
    for code, k in pairs(count) do
      if code ~= 200 and code ~= 409 then other[#other + 1] = code .. ":" .. k end
    end
    table.sort(other)
    print(("%s waiters=%d one_worker=1 lock_nodes=%d ping_p50_ms=%.1f " ..
      "ping_p99_ms=%.1f ping_max_ms=%.1f queued_s=%.1f drained_s=%.1f " ..
      "bought=%d sold_out=%d stock_left=%s other=%s " ..
      "worker_rss_growth_bytes_per_waiter=%.0f"):format(name, n, lock_nodes,
      pings[50] * 1e3, pings[99] * 1e3, pings[100] * 1e3, queue_s, drained,
      count[200] or 0, count[409] or 0, left,
      #other > 0 and table.concat(other, ",") or "none",
      (rss1 - rss0) * 1024 / n))
    c:stop()
  end
  local QUEUE = tonumber(os.getenv("BENCH_W4_QUEUE")) or 10000
  queue("w4.queue", QUEUE, {})
  if os.getenv("BENCH_W4_PER_REQUEST_QUEUE") ~= "0" then
    queue("w4.queue.per_request", QUEUE, PER_REQUEST)
  end
  local BIG = tonumber(os.getenv("BENCH_W4_QUEUE100K")) or 100000
  if BIG > 0 then queue("w4.queue100k", BIG, { h2 = true }) end
  zk:close()
end)
N.stop_all()
srv:close()
if not ok then error(err, 0) end
