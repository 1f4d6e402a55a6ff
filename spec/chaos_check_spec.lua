-- The chaos run's checkers and generator on made-up logs (no server): each
-- checker catches what it is for, and lets pass what api.md allows.
local K = dofile("spec/chaos/check.lua")
local G = dofile("spec/chaos/gen.lua")

local PLAN = { targets = {
  m1 = { name = "m1", kind = "mutex", path = "/c/m1" },
  s1 = { name = "s1", kind = "sem", path = "/c/s1", n = 2 },
  rw1 = { name = "rw1", kind = "rw", path = "/c/rw1" },
  db1 = { name = "db1", kind = "dbarrier", path = "/c/db1",
    members = { 1, 2 } },
} }

-- H kind target task ts t0 t1 lost flip token mh rel_t rel_e rel pass node
-- [cl id]
local function hold(kind, target, task, t0, t1, o)
  o = o or {}
  return ("H %s %s %s %s %s %s %s %s %s %s %s %s %s %s %s"):format(kind,
    target, task, o.ts or -1, t0, t1, o.lost or -1, o.flip or 0,
    o.token or 1, o.mh or 0, o.rel_t or t1, o.rel_e or t1, o.rel or "ok",
    o.pass or 0, o.node or ("/c/" .. target .. "/n-" .. task)) ..
    ((o.cl or o.id) and (" " .. (o.cl or "-") .. " " .. (o.id or "-")) or "")
end

local function logs(lines) return K.parse(table.concat(lines, "\n")) end

describe("chaos checkers", function()
  it("parse: fields by line kind, numbers as numbers, the last field " ..
     "keeps its spaces", function()
    local l = logs({ "E 1.0 g1/1.0 3.5 release bad argument #1 to 'x'",
      hold("mutex", "m1", "g1/1.0", 1.5, 2) })
    assert.equal("bad argument #1 to 'x'", l.E[1].msg)
    assert.equal(1.5, l.H[1].t0)
    assert.equal("/c/m1/n-g1/1.0", l.H[1].node)
  end)

  it("exclusion: overlapping mutex holds are caught; touching ones, " ..
     "two readers and a downgrade are not", function()
    assert.equal(1, #K.exclusion(logs({ hold("mutex", "m1", "a/1.0", 1, 2),
      hold("mutex", "m1", "b/2.0", 1.5, 3) }), PLAN))
    assert.equal(0, #K.exclusion(logs({ hold("mutex", "m1", "a/1.0", 1, 2),
      hold("mutex", "m1", "b/2.0", 2, 3) }), PLAN))
    assert.equal(0, #K.exclusion(logs({ hold("read", "rw1", "a/1.0", 1, 2),
      hold("read", "rw1", "b/2.0", 1.5, 3) }), PLAN))
    assert.equal(0, #K.exclusion(logs({ hold("write", "rw1", "a/1.0", 1, 2),
      hold("read", "rw1", "a/1.0", 1.5, 3) }), PLAN))
    assert.equal(1, #K.exclusion(logs({ hold("write", "rw1", "a/1.0", 1, 2),
      hold("read", "rw1", "b/2.0", 1.5, 3) }), PLAN))
    -- a hold is_held() never confirmed (t1 = -1) was never believed
    assert.equal(0, #K.exclusion(logs({ hold("mutex", "m1", "a/1.0", 1, 2),
      hold("mutex", "m1", "b/2.0", 1.5, -1) }), PLAN))
  end)

  it("exclusion: a hold whose node the chaos actor deleted is excused " ..
     "from then on", function()
    local l = logs({ hold("mutex", "m1", "a/1.0", 1, 2, { node = "/c/m1/x" }),
      hold("mutex", "m1", "b/2.0", 1.5, 3), "X 1.2 /c/m1/x" })
    assert.equal(0, #K.exclusion(l, PLAN))
    l = logs({ hold("mutex", "m1", "a/1.0", 1, 2, { node = "/c/m1/x" }),
      hold("mutex", "m1", "b/2.0", 1.5, 3), "X 1.7 /c/m1/x" })
    assert.equal(1, #K.exclusion(l, PLAN))
  end)

  it("exclusion: a semaphore's leases never exceed its count", function()
    local two = { hold("lease", "s1", "a/1.0", 1, 3),
      hold("lease", "s1", "b/2.0", 1.5, 3) }
    assert.equal(0, #K.exclusion(logs(two), PLAN))
    two[3] = hold("lease", "s1", "c/3.0", 2, 4)
    assert.equal(1, #K.exclusion(logs(two), PLAN))
  end)

  it("fencing: a token going back in zxid order, and lost or extra " ..
     "updates", function()
    local l = logs({ "W m1 5 100 1 0 ok", "W m1 7 110 2 0 ok",
      "W m1 5 120 3 0 ok" })
    assert.equal(1, #K.fencing(l, { m1 = 3 }))
    l = logs({ "W m1 5 100 1 0 ok", "W m1 7 110 2 0 ok" })
    assert.equal(0, #K.fencing(l, { m1 = 2 }))
    assert.equal(1, #K.fencing(l, { m1 = 1 })) -- one lost
    assert.equal(1, #K.fencing(l, { m1 = 3 })) -- one too many
    -- a write of unknown outcome, or sent and never answered, may count
    l = logs({ "P m1 5 1", "W m1 5 100 1 0 ok", "P m1 7 2",
      "W m1 7 0 2 0 unknown", "P m1 8 3" })
    assert.equal(0, #K.fencing(l, { m1 = 3 }))
    assert.equal(1, #K.fencing(l, { m1 = 4 }))
    -- a lock cohort's passes share the node's token: (token, pass) pairs
    l = logs({ "W m1 5 100 1 0 ok", "W m1 5 110 2 1 ok", "W m1 7 120 3 0 ok" })
    assert.equal(0, #K.fencing(l, { m1 = 3 }))
    l = logs({ "W m1 5 100 1 1 ok", "W m1 5 110 2 0 ok" })
    assert.equal(1, #K.fencing(l, { m1 = 2 }))
  end)

  it("rw: a reader that held through its reads and saw an update half " ..
     "done, unless the writer's second write was refused", function()
    local l = logs({ "V rw1 5 a 10 x ok", "V rw1 5 b 11 x ok",
      "R rw1 r/1.0 1 1 x y" })
    assert.equal(1, #K.rw(l))
    l = logs({ "V rw1 5 a 10 x ok", "V rw1 5 b 0 x lost",
      "R rw1 r/1.0 1 1 x y" })
    assert.equal(0, #K.rw(l))
    l = logs({ "V rw1 5 a 10 x ok", "V rw1 5 b 11 x ok",
      "R rw1 r/1.0 1 0 x y" }) -- (not believed held: no claim)
    assert.equal(0, #K.rw(l))
  end)

  it("contract: an error, is_held() true on another node, believed or " ..
     "released ok past max_hold; not false then true again", function()
    assert.equal(1, #K.contract(logs({ "E 1.0 g1/1.0 2 release boom" })))
    assert.equal(0, #K.contract(logs({ hold("mutex", "m1", "a/1.0", 1, 2,
      { lost = 1.5, rel_t = 3 }) })))
    assert.equal(1, #K.contract(logs({ hold("mutex", "m1", "a/1.0", 1, 2,
      { flip = 1 }) })))
    assert.equal(1, #K.contract(logs({ hold("mutex", "m1", "a/1.0", 1, 2,
      { mh = 0.5, rel_t = 2, rel = "lock_lost" }) })))
    assert.equal(1, #K.contract(logs({ hold("mutex", "m1", "a/1.0", 1, 1.2,
      { mh = 0.5, rel_t = 2 }) })))
    assert.equal(0, #K.contract(logs({ hold("mutex", "m1", "a/1.0", 1, 1.2,
      { mh = 0.5, rel_t = 1.3 }) })))
  end)

  -- A kind target task t_s t_q t_e res code timeout cl e0 e1
  local function answer(code, o)
    o = o or {}
    return ("A mutex m1 g1/1.0 %s -1 %s fail %s %s %s %s %s"):format(
      o.t_s or 1, o.t_e or 2, code, o.timeout or 5, o.cl or "1.0/0",
      o.e0 or 0, o.e1 or 0)
  end
  local function answers(lines) return #K.answers(logs(lines)) end

  it("answers: closed only from a client closed before the answer",
     function()
    assert.equal(1, answers({ answer("closed") })) -- never closed
    assert.equal(1, answers({ answer("closed"), "C 1.0/0 2.5" })) -- later
    assert.equal(1, answers({ answer("closed", { cl = "1.0/2" }),
      "C 1.0/3 1.5" })) -- another client closed
    assert.equal(0, answers({ answer("closed", { cl = "1.0/2" }),
      "C 1.0/2 1.5" }))
    -- a release that answered closed (H's last field: its client)
    local rel = hold("mutex", "m1", "g1/1.0", 1, 2,
      { rel = "closed", rel_t = 3, rel_e = 3.1, cl = "1.0/2" })
    assert.equal(1, answers({ rel }))
    assert.equal(0, answers({ rel, "C 1.0/2 2.9" }))
    -- a barrier wait and a double barrier on the process's shared client
    assert.equal(1, answers({ "BW b1 g1/1.0 1 2 closed 5 0 0" }))
    assert.equal(0, answers({ "BW b1 g1/1.0 1 2 closed 5 0 0",
      "C 1.0/0 1.5" }))
    -- the finding names the client's last state
    local v = K.answers(logs({ answer("closed"), "Z 1.0/0 renewed 1.5" }))
    assert.matches("never closed %(its last state: renewed at 1.500%)",
      v[1].text)
  end)

  it("answers: session_expired only after an expiry the client saw " ..
     "during the call", function()
    assert.equal(1, answers({ answer("session_expired") }))
    assert.equal(1, answers({ answer("session_expired",
      { e0 = 1, e1 = 1 }) })) -- (renewed before the call began)
    assert.equal(0, answers({ answer("session_expired", { e1 = 1 }) }))
    assert.equal(0, answers({ answer("session_expired",
      { e0 = 1, e1 = 2 }) }))
    -- (-1: the client was closed by then; no claim to check)
    assert.equal(0, answers({ answer("session_expired", { e1 = -1 }) }))
    assert.equal(1, answers({ "DE db1 1 2.0 1 2 session_expired 1.6 0 0" }))
    assert.equal(0, answers({ "DL db1 1 2.0 1 2 session_expired 1.6 0 1" }))
  end)

  it("answers: timeout only once the deadline passed", function()
    assert.equal(1, answers({ answer("timeout",
      { t_s = 1, t_e = 2.5, timeout = 2 }) }))
    assert.equal(0, answers({ answer("timeout",
      { t_s = 1, t_e = 3.2, timeout = 2 }) }))
    assert.equal(0, answers({ answer("timeout",
      { t_s = 1, t_e = 2.9995, timeout = 2 }) })) -- (the logs' rounding)
    assert.equal(0, answers({ answer("timeout",
      { t_s = 1, t_e = 1.01, timeout = 0 }) })) -- a try-lock
    assert.equal(1, answers({ "BW b1 g1/1.0 1 1.2 timeout 0.5 0 0" }))
    assert.equal(1, answers({ "DE db1 1 2.0 1 2 timeout 1.6 0 0" }))
    assert.equal(0, answers({ "DE db1 1 2.0 1 2.7 timeout 1.6 0 0" }))
  end)

  it("answers: lock_lost from a write only if what it wrote was never " ..
     "read", function()
    local lost = { "P m1 5 3 1.0:7", "W m1 5 0 3 1 lost 1.0:7 release" }
    assert.equal(0, answers(lost))
    lost[3] = "G m1 1.0:6 4 read" -- (the value before it)
    assert.equal(0, answers(lost))
    lost[4] = "G m1 1.0:7 4.5 read" -- read by the next holder
    assert.equal(1, answers(lost))
    local v = K.answers(logs(lost))
    assert.matches("m1: the write with the release 1.0:7 .*answered " ..
      "lock_lost, nothing written; it was written: read with a later " ..
      "acquire at 4.500", v[1].text)
    -- found by the driver's final look, after a with_lock update
    assert.equal(1, answers({ "W m1 5 0 3 0 lost 1.0:8 update",
      "G m1 1.0:8 9 final" }))
    -- a write that landed and said so, or may have landed
    assert.equal(0, answers({ "W m1 5 100 3 0 ok 1.0:9 fenced",
      "W m1 6 0 4 0 unknown 1.0:10 release", "G m1 1.0:9 5 get",
      "G m1 1.0:10 6 get" }))
    -- a read/write lock's fenced write (the value names the update)
    local rw = { "V rw1 5 a 10 x ok", "V rw1 5 b 0 x lost",
      "R rw1 r/2.0 1 1 x y" }
    assert.equal(0, answers(rw))
    rw[3] = "R rw1 r/2.0 1 1 x x"
    assert.equal(1, answers(rw))
  end)

  it("check: an untrue answer counts under contract", function()
    local s = K.check(logs({ answer("closed") }), { plan = PLAN })
    assert.equal(1, s.counts.contract)
    assert.matches("^untrue answer: mutex acquire of m1 by g1/1.0 " ..
      "answered closed", s.first.contract.text)
  end)

  it("waits: past the timeout plus the bound, unless its process was " ..
     "stopped meanwhile", function()
    local a = "A mutex m1 g1/3.0 10 -1 30 fail timeout 5"
    assert.equal(1, #K.waits(logs({ a }), 10))
    assert.equal(0, #K.waits(logs({ a, "F stop 12 16 3" }), 10))
    assert.equal(1, #K.waits(logs({ a, "F stop 12 16 2" }), 10))
    assert.equal(0, #K.waits(logs({ "A mutex m1 g1/3.0 10 -1 14 ok - 5" }),
      10))
  end)

  it("fifo: an acquire started after a contender queued holds first; " ..
     "not when a deletion or fault fell in between", function()
    local lines = { "A mutex m1 c/1.0 1 1.2 5 ok - 5",
      hold("mutex", "m1", "x/2.0", 2, 3, { ts = 2 }) }
    assert.equal(1, #K.fifo(logs(lines), PLAN))
    lines[3] = "X 1.5 /c/m1/n1"
    assert.equal(0, #K.fifo(logs(lines), PLAN))
    lines[3] = "F cut 1.5 1.6 all"
    assert.equal(0, #K.fifo(logs(lines), PLAN))
    -- started before the contender queued: its turn came first
    assert.equal(0, #K.fifo(logs({ "A mutex m1 c/1.0 1 1.2 5 ok - 5",
      hold("mutex", "m1", "x/2.0", 2, 3, { ts = 1.1 }) }), PLAN))
  end)

  it("fifo in a lock cohort: the order of the nodes; a pass may go " ..
     "ahead of a contender queued earlier", function()
    local plan = { targets = { m1 = { name = "m1", kind = "mutex",
      path = "/c/m1", cohort = true, pass_limit = 3 } } }
    -- passes of node 5, then node 7's holder, then node 9's
    local ok = { "A mutex m1 c/1.0 1 1.2 5 ok - 5",
      hold("mutex", "m1", "a/1.0", 1, 1.5, { token = 5 }),
      hold("mutex", "m1", "x/2.0", 2, 3, { ts = 2, token = 5, pass = 1 }),
      hold("mutex", "m1", "c/1.0", 3, 4, { token = 7 }),
      hold("mutex", "m1", "y/2.0", 4, 5, { token = 9 }) }
    assert.equal(0, #K.fifo(logs(ok), plan))
    -- held on an older node after a newer one held: out of order
    local bad = { hold("mutex", "m1", "c/1.0", 1, 2, { token = 7 }),
      hold("mutex", "m1", "x/2.0", 3, 4, { token = 5, pass = 2 }) }
    assert.equal(1, #K.fifo(logs(bad), plan))
    -- and a pass going back on its node
    bad = { hold("mutex", "m1", "c/1.0", 1, 2, { token = 5, pass = 2 }),
      hold("mutex", "m1", "x/2.0", 3, 4, { token = 5, pass = 1 }) }
    assert.equal(1, #K.fifo(logs(bad), plan))
    -- unless a fault fell in between
    bad[3] = "F cut 2.5 2.6 all"
    assert.equal(0, #K.fifo(logs(bad), plan))
  end)

  it("wedges: a wait that timed out while nobody held the lock", function()
    local a = "A mutex m1 c/1.0 10 10.1 15 fail timeout 5"
    assert.equal(1, #K.wedges(logs({ a }), PLAN, 2))
    assert.equal(0, #K.wedges(logs({ a, hold("mutex", "m1", "x/2.0", 9, 14) }),
      PLAN, 2))
    assert.equal(0, #K.wedges(logs({ a, "F kill 11 11 2" }), PLAN, 2, 4))
    -- a hold dropped for garbage collection may hold until the next hold
    -- begins (the collector is not bounded); one released is not
    local dropped = hold("mutex", "m1", "x/2.0", 8, 9,
      { rel_t = -1, rel_e = -1, rel = "none" })
    assert.equal(0, #K.wedges(logs({ a, dropped,
      hold("mutex", "m1", "y/3.0", 16, 17) }), PLAN, 2))
    assert.equal(1, #K.wedges(logs({ a, hold("mutex", "m1", "x/2.0", 8, 9),
      hold("mutex", "m1", "y/3.0", 16, 17) }), PLAN, 2))
  end)

  it("barrier: a wait that returned while the barrier stood", function()
    local l = { "BS b1 1", "BR b1 5", "BW b1 w/1.0 2 3 ok 5" }
    assert.equal(1, #K.barrier(logs(l)))
    l[3] = "BW b1 w/1.0 2 5.1 ok 5"
    assert.equal(0, #K.barrier(logs(l)))
  end)

  it("dbarrier: entered before all arrived, left before all began to " ..
     "leave, left behind", function()
    local ok = { "DE db1 1 1.0 1 2 ok", "DE db1 1 2.0 1.5 2 ok",
      "DL db1 1 1.0 3 4 ok", "DL db1 1 2.0 3.5 4 ok" }
    assert.equal(0, #K.dbarrier(logs(ok), PLAN))
    local early = { "DE db1 1 1.0 1 1.2 ok", "DE db1 1 2.0 1.5 2 ok",
      "DL db1 1 1.0 3 4 ok", "DL db1 1 2.0 3.5 4 ok" }
    assert.equal(1, #K.dbarrier(logs(early), PLAN))
    local left = { "DE db1 1 1.0 1 2 ok", "DE db1 1 2.0 1.5 2 ok",
      "DL db1 1 1.0 3 3.2 ok", "DL db1 1 2.0 3.5 4 ok" }
    assert.equal(1, #K.dbarrier(logs(left), PLAN))
    local behind = { "DE db1 1 1.0 1 2 ok", "DE db1 1 2.0 1.5 2 ok",
      "DL db1 1 1.0 3 4 ok", "DL db1 1 2.0 3.5 6 timeout" }
    assert.equal(1, #K.dbarrier(logs(behind), PLAN))
    behind[5] = "F kill 3 3 2"
    assert.equal(0, #K.dbarrier(logs(behind), PLAN, 4))
  end)

  -- issue 33: holds' limits moved by extend, how holds end, callbacks.
  -- XT id target task x_s x_e secs res t1b after; CB id what t target
  -- task rel
  local function xt(id, x_s, secs, res, t1b, after)
    return ("XT %s m1 a/1.0 %s %s %s %s %s %s"):format(id, x_s, x_s + 0.001,
      secs, res or "ok", t1b or x_s, after or 1)
  end
  local function ends(lines) return #K.ends(logs(lines)) end
  local function ext_hold(t1, o)
    o = o or {}
    o.mh, o.ts, o.id, o.cl = o.mh or 0.5, o.ts or 0.9, "1.0#1", "1.0/0"
    -- (released late, as lost, unless told)
    o.rel, o.rel_t = o.rel or "lock_lost", o.rel_t or 9
    o.rel_e = o.rel_e or o.rel_t
    return hold("mutex", "m1", "a/1.0", 1, t1, o)
  end

  it("contract: an extended hold believed until its new limit, not after; " ..
     "an extend that answered lock_lost moves nothing", function()
    local function n(lines) return #K.contract(logs(lines)) end
    -- max_hold 0.5 from 1, extended at 1.3 by 1 s: held until 2.3
    assert.equal(0, n({ ext_hold(2.2), xt("1.0#1", 1.3, 1) }))
    assert.equal(1, n({ ext_hold(2.7), xt("1.0#1", 1.3, 1) }))
    assert.equal(1, n({ ext_hold(2.2), xt("1.0#1", 1.3, 1, "lock_lost") }))
    assert.equal(0, n({ ext_hold(9, { rel_t = 9 }), xt("1.0#1", 1.3, -1) }))
    -- believed past the first limit before the extend came
    assert.equal(1, n({ ext_hold(2.2), xt("1.0#1", 1.9, 1, "ok", 1.8) }))
    -- released ok past the new limit
    assert.equal(1, n({ ext_hold(2.2, { rel = "ok", rel_t = 2.7 }),
      xt("1.0#1", 1.3, 1) }))
  end)

  it("ends: an ended hold stays ended: no extend ok, no write landed, " ..
     "is_held() false, release not ok", function()
    -- past its limit (1.5 + margin): an extend, a fenced write
    assert.equal(1, ends({ ext_hold(1.4), xt("1.0#1", 1.9, 1) }))
    assert.equal(0, ends({ ext_hold(1.4), xt("1.0#1", 1.6, 1),
      xt("1.0#1", 2.4, 1) }))
    local w = "W m1 5 100 1 0 ok 1.0:1 fenced 1.0#1 "
    assert.equal(1, ends({ ext_hold(1.4), w .. "1.9" }))
    assert.equal(0, ends({ ext_hold(1.4), w .. "1.4" }))
    -- its on_lost told at 1.2 (its node deleted at 1.1)
    local lost = { ext_hold(1.15, { node = "/c/m1/x", mh = 0 }),
      "X 1.1 /c/m1/x", "CB 1.0#1 lost 1.2 m1 a/1.0 kept" }
    assert.equal(0, ends(lost))
    lost[1] = ext_hold(1.3, { node = "/c/m1/x", mh = 0 })
    assert.equal(1, ends(lost))
    -- released in its on_revoke: its owner's release says lock_lost
    local rev = { ext_hold(1.15, { rel = "lock_lost", rel_t = 1.4, mh = 0 }),
      "Y 1.05 m1", "CB 1.0#1 revoke 1.2 m1 a/1.0 released" }
    assert.equal(0, ends(rev))
    rev[1] = ext_hold(1.15, { rel = "ok", rel_t = 1.4, mh = 0 })
    assert.equal(1, ends(rev))
    -- (over by the callback's end: a multilock's members go one by one)
    rev = { ext_hold(1.25, { mh = 0 }), "Y 1.05 m1",
      "CB 1.0#1 mrevoke 1.2 m1 a/1.0 released 1.3" }
    assert.equal(0, ends(rev))
    rev[1] = ext_hold(1.35, { mh = 0 })
    assert.equal(1, ends(rev))
  end)

  it("ends: callbacks name the worker's holds, told once, before the " ..
     "release, and only when true", function()
    local h = ext_hold(1.15, { mh = 0, node = "/c/m1/x" })
    assert.equal(1, ends({ "CB - lost 1.2 s1 - kept" }))
    assert.equal(1, ends({ "CB ? mlost 1.2 m1 - kept" }))
    -- on_lost: its node deleted, a fault, its client's state, its limit
    assert.equal(1, ends({ h, "CB 1.0#1 lost 1.2 m1 a/1.0 kept" }))
    assert.equal(0, ends({ h, "X 1.1 /c/m1/x", "CB 1.0#1 lost 1.2 m1 " ..
      "a/1.0 kept" }))
    assert.equal(0, ends({ h, "F cut 1.05 1.06 all", "CB 1.0#1 lost 1.2 " ..
      "m1 a/1.0 kept" }))
    assert.equal(0, ends({ h, "Z 1.0/0 suspended 1.1", "CB 1.0#1 mlost " ..
      "1.2 m1 a/1.0 kept" }))
    assert.equal(0, ends({ ext_hold(1.15), "CB 1.0#1 lost 1.41 m1 a/1.0 " ..
      "kept" })) -- (max_hold 0.5 from the acquire's start, 0.9)
    assert.equal(1, ends({ ext_hold(1.15), xt("1.0#1", 1.2, 1),
      "CB 1.0#1 lost 1.5 m1 a/1.0 kept" })) -- (extended to 2.2)
    -- told twice, or after the owner's release
    assert.equal(1, ends({ h, "X 1.1 /c/m1/x", "CB 1.0#1 lost 1.16 m1 " ..
      "a/1.0 kept", "CB 1.0#1 lost 1.17 m1 a/1.0 kept" }))
    assert.equal(1, ends({ ext_hold(1.15, { mh = 0, rel_t = 1.16 }),
      "Y 1.1 m1", "CB 1.0#1 revoke 1.2 m1 a/1.0 kept" }))
    -- on_revoke: only once someone asked, since the hold began
    assert.equal(1, ends({ h, "CB 1.0#1 revoke 1.1 m1 a/1.0 kept" }))
    assert.equal(0, ends({ h, "Y 1.05 m1", "CB 1.0#1 mrevoke 1.1 m1 " ..
      "a/1.0 kept" }))
    assert.equal(1, ends({ h, "Y -20 m1", "CB 1.0#1 revoke 1.1 m1 " ..
      "a/1.0 kept" }))
  end)

  it("ends: an extended hold is not over before its new limit", function()
    -- an extend that answered lock_lost just after is_held() said true
    assert.equal(1, ends({ ext_hold(1.15), xt("1.0#1", 1.2, 1, "lock_lost",
      1.2) }))
    assert.equal(0, ends({ ext_hold(1.15), xt("1.0#1", 1.2, 1, "lock_lost",
      1.1) })) -- (not believed just before: no claim)
    assert.equal(0, ends({ ext_hold(1.15), "F expire 1.1 1.15 all",
      xt("1.0#1", 1.2, 1, "lock_lost", 1.2) }))
    -- a release of an extended hold answering lock_lost early
    local early = ext_hold(1.15, { rel = "lock_lost", rel_t = 1.8 })
    assert.equal(1, ends({ early, xt("1.0#1", 1.2, 1) }))
    assert.equal(0, ends({ early, xt("1.0#1", 1.2, 1), "X 1.7 /c/m1/n-a/1.0" }))
    assert.equal(0, ends({ early, xt("1.0#1", 1.2, 0.3) })) -- (ended 1.5)
    -- an extend in time, yet not held just after: both at once
    assert.equal(1, ends({ ext_hold(1.15), xt("1.0#1", 1.2, 1, "ok", 1.2,
      0) }))
    assert.equal(0, ends({ ext_hold(1.15), "X 1.2 /c/m1/n-a/1.0",
      xt("1.0#1", 1.2, 1, "ok", 1.2, 0) }))
  end)

  it("answers: an update run again (a conflict) wrote nothing", function()
    local w = { "W s1 5 0 3 0 refused 1.0:7 update 1.0#1 2" }
    assert.equal(0, answers(w))
    w[2] = "G s1 1.0:7 4.5 update"
    assert.equal(1, answers(w))
    assert.matches("was run again %(a conflict%)", K.answers(logs(w))[1].text)
    -- a lease's write with the release, to the semaphore's notes
    assert.equal(1, answers({ "W s1n 5 0 3 0 lost 1.0:8 release 1.0#2 2",
      "G s1n 1.0:8 9 final" }))
  end)

  it("exclusion: a lease counts until its node's deletion; one of no " ..
     "known node until any lease's", function()
    local three = { hold("lease", "s1", "a/1.0", 1, 3,
      { node = "/c/s1/leases/x" }), hold("lease", "s1", "b/2.0", 1.5, 3),
      hold("lease", "s1", "c/3.0", 2, 4) }
    assert.equal(1, #K.exclusion(logs(three), PLAN))
    three[4] = "X 1.8 /c/s1/leases/x"
    assert.equal(0, #K.exclusion(logs(three), PLAN))
    three[1] = hold("lease", "s1", "a/1.0", 1, 3, { node = "-" })
    assert.equal(0, #K.exclusion(logs(three), PLAN))
    three[4] = nil
    assert.equal(1, #K.exclusion(logs(three), PLAN))
  end)

  it("fencing: a semaphore's leases write in any token order; its " ..
     "counter stays exact", function()
    local l = logs({ "W s1 7 100 1 0 ok", "W s1 5 110 2 0 ok" })
    assert.equal(0, #K.fencing(l, { s1 = 2 }, PLAN))
    assert.equal(1, #K.fencing(l, { s1 = 1 }, PLAN)) -- (an update lost)
    assert.equal(1, #K.fencing(l, { s1 = 2 })) -- (no plan: all in order)
  end)

  it("check: processes that crashed or hung, orphans, and the line",
     function()
    local s = K.check(logs({ hold("mutex", "m1", "a/1.0", 1, 2) }),
      { plan = PLAN, processes = { { p = "1.0", status = 0 },
        { p = "2.0", status = 1, output = "boom" }, { p = "3.0", hung = true },
        { p = "4.0", killed = true } }, orphans = { "/c/m1/n" } })
    assert.is_false(s.ok)
    assert.equal(2, s.counts.processes)
    assert.equal(1, s.counts.orphans)
    assert.matches("holds 1 %(mutex=1%)", s.line)
  end)

  it("killed: an nginx worker's nodes gone within the bound of its kill " ..
     "(and listed), its master's new worker connected; a hold it began and " ..
     "never ended is weighed until its last is_held() true", function()
    -- K who t held queued gone fresh
    local v = K.killed(logs({ "K 501 10 1 0 13 601", "K 502 20 0 2 26 602",
      "K 503 30 1 1 -1 603", "K 504 40 0 0 40.1 0",
      "K 505 50 -1 -1 -1 605" }), 5)
    assert.equal(4, #v)
    assert.matches("502 killed at 20.000: its 2 node%(s%) went 6.00 s after",
      v[1].text)
    assert.matches("503 killed .* still there long after", v[2].text)
    assert.matches("504 killed .* new worker never connected", v[3].text)
    assert.matches("505 killed .* could not be listed", v[4].text)
    -- O id target task t0 t1 token pass node; OT id t
    local l = logs({ "O 501.0#1 m1 n1/501.0 1 1.1 7 0 /c/m1/n1",
      "OT 501.0#1 1.4", "OT 501.0#1 2.5", "K 501 3 1 0 5 601",
      hold("mutex", "m1", "g1/1.0", 2, 3) })
    assert.same({}, K.close_killed(l))
    assert.equal(2, #l.H)
    assert.equal(2.5, l.H[2].t1)
    assert.equal("killed", l.H[2].rel)
    assert.equal(1, #K.exclusion(l, PLAN)) -- (it overlaps g1's)
    -- begun, never ended, its process never killed
    l = logs({ "O 502.0#1 m1 n1/502.0 1 1.1 7 0 /c/m1/n1" })
    assert.matches("never ended %(no release logged.*not killed",
      K.close_killed(l)[1].text)
    -- through K.check, under its own name
    local s = K.check(logs({ "K 503 30 1 1 -1 603" }), { plan = PLAN, st = 3 })
    assert.equal(1, s.counts.killed)
  end)

  it("tokens: check_token's answer against the hold believed through the " ..
     "check; only an unanswered code besides true and false", function()
    -- T target token t_s t_e res
    local held = hold("mutex", "m1", "a/1.0", 1, 5, { token = 7,
      node = "/c/m1/x" })
    local function v(...) return K.tokens(logs({ held, ... })) end
    assert.same({}, v("T m1 7 2 2.1 true", "T m1 6 2 2.1 false",
      "T m1 7 0.5 1.1 false", -- (not yet believed when it began)
      "T m1 6 4.9 5.2 true", -- (nor through its end)
      "T m1 7 2 2.1 timeout", "T m1 7 2 2.1 connection_loss",
      "T m1 7 2 2.1 session_expired"))
    local r = v("T m1 6 2 2.1 true")
    assert.equal(1, #r)
    assert.matches("check_token%(m1, 6%) answered true at %[2.000, 2.100%], " ..
      "while a/1.0 held it with token 7", r[1].text)
    assert.equal(1, #v("T m1 7 2 2.1 false"))
    assert.matches("answered closed", v("T m1 7 2 2.1 closed")[1].text)
    assert.equal(1, #v("T m1 7 2 2.1 no_node"))
    -- its node deleted by the chaos actor: the server may have moved on
    assert.same({}, v("X 1.5 /c/m1/x", "T m1 6 2 2.1 true",
      "T m1 7 2 2.1 false"))
    -- a passed hold shares its node's token; other targets do not count
    assert.same({}, K.tokens(logs({ hold("mutex", "m1", "b/1.0", 1, 5,
      { token = 7, pass = 2 }), "T m1 7 2 2.1 true", "T m2 6 2 2.1 true" })))
    -- a semaphore mutex's holds count; a reader's do not
    assert.equal(1, #K.tokens(logs({ hold("smutex", "m1", "a/1.0", 1, 5,
      { token = 7 }), "T m1 7 2 2.1 false" })))
    assert.same({}, K.tokens(logs({ hold("read", "m1", "a/1.0", 1, 5,
      { token = 7 }), "T m1 7 2 2.1 false" })))
    local s = K.check(logs({ held, "T m1 6 2 2.1 true" }), { plan = PLAN })
    assert.equal(1, s.counts.tokens)
  end)
end)

describe("chaos generator", function()
  it("draws the same numbers on every runtime, and the same plan", function()
    local r = G.stream(42, 3)
    local first = { r:next(), r:next(), r:next() }
    -- (the values Lua 5.4 drew: LuaJIT must draw them too)
    assert.same({ 1778562545, 891369929, 335491467 }, first)
    local a = G.plan(42, "/c", 4)
    local b = G.plan(42, "/c", 4)
    assert.equal(G.serialize(a), G.serialize(b))
    assert.equal(4096, #G.long_path("/c", "m3", 4096))
  end)

  it("a serialized plan loads back", function()
    local p = G.plan(7, "/c", 3)
    local q = load("return " .. G.serialize(p))()
    assert.same(p, q)
  end)
end)
