-- A minority of an ensemble cut off from the rest (zklock.testing's
-- cluster:cut, a packet filter between the members: docs/testing.md,
-- "Partitions"; issue 35): the cut member stops serving; a client that
-- was on it moves to the majority with its session and its hold; a client
-- that can reach only the cut member loses its session, and its lock
-- passes to a waiter on the majority side; healed, the member serves
-- again and the lost client learns that its session expired (and opens
-- another).
local H = require "spec.helpers"

local can, why = H.testing.partitions()

describe("a minority cut off from the ensemble", function()
  if not can then
    pending("cluster:cut needs a packet filter here: " .. why)
    return
  end

  local cl
  lazy_setup(function() cl = H.testing.cluster(3, { partitions = true }) end)
  lazy_teardown(function() H.end_cluster(cl) end)

  local function mode(m)
    return (m:four_letter("srvr", 1) or ""):match("Mode: (%a+)")
  end

  it("a follower cut off: its clients move or lose their sessions, " ..
     "the majority goes on, and it serves again once healed", function()
    local leader = assert(cl:leader(10))
    local x, rest = nil, {}
    for _, m in ipairs(cl.members) do
      if m ~= leader and not x then x = m else rest[#rest + 1] = m end
    end
    local majority = rest[1].connect_string .. "," .. rest[2].connect_string
    local path = H.path("partition")
    -- (alone: X is all it knows; moving: on X, told of every member)
    local alone = H.connect(x.connect_string,
      { session_timeout = 4, follow_ensemble = false })
    local held = alone:mutex(path .. "/a")
    assert(held:acquire(10))
    local lost_sid = alone:session_id()
    local moving
    for _ = 1, 40 do -- (the C client picks a member at random)
      moving = H.connect(cl.connect_string, { session_timeout = 4 })
      local sid = moving:session_id():lower():gsub("^0x0*", "")
      if (x:four_letter("cons", 1) or ""):lower()
          :find("sid=0x0*" .. sid, 1) then
        break
      end
      moving:close()
      moving = nil
    end
    assert(moving, "no session of the spec's on the member to cut off")
    local sid = moving:session_id()
    local kept = moving:mutex(path .. "/b")
    assert(kept:acquire(10))
    local token = kept:token()
    local waiter = H.connect(majority, { session_timeout = 4 })

    assert(cl:cut(x))
    H.wait_until(function() return mode(x) == nil end, 15,
      "the cut member stopped serving")
    -- the majority expires the lone client's session: its lock passes
    local m = waiter:mutex(path .. "/a")
    assert(m:acquire(30))
    assert.is_true(m:release())
    -- the client that was on X is on the majority, same session and hold
    H.wait_until(function()
      moving:dispatch()
      return moving:state() == "connected"
    end, 15, "the moved client connected")
    assert.equal(sid, moving:session_id())
    assert.is_true(kept:is_held())
    assert.equal(0, moving:stats().renewed)
    assert.is_nil(mode(x))

    assert(cl:heal())
    assert(cl:wait_quorum(30))
    assert.equal("follower", mode(x))
    -- (told its session expired, it opens another: renew_session)
    H.wait_until(function()
      alone:dispatch()
      return alone:stats().renewed == 1 and alone:state() == "connected"
    end, 30, "the lone client on a new session")
    assert.not_equal(lost_sid, alone:session_id())
    assert.is_false(held:is_held())
    assert.is_true(kept:is_held())
    assert.equal(token, kept:token())
    assert.is_true(kept:release())
    alone:close()
    moving:close()
    waiter:close()
  end)

  it("the leader cut off: the majority elects another, and the old one " ..
     "follows it once healed", function()
    local old = assert(cl:leader(10))
    local zk = H.connect(cl.connect_string, { session_timeout = 4 })
    local m = zk:mutex(H.path("partition-leader"))
    assert(m:acquire(10))
    assert(cl:cut({ old }))
    local new
    H.wait_until(function()
      for _, member in ipairs(cl.members) do
        if member ~= old and mode(member) == "leader" then new = member end
      end
      return new ~= nil and mode(old) == nil
    end, 20, "another leader elected, the old one not serving")
    H.wait_until(function()
      zk:dispatch()
      return zk:state() == "connected"
    end, 15, "the client connected to the majority")
    assert.is_true(m:is_held())
    assert.is_true(m:release())
    assert(cl:heal())
    assert(cl:wait_quorum(30))
    assert.equal("follower", mode(old))
    assert.equal(new, cl:leader(10))
    zk:close()
  end)

  it("refuses what is not a member", function()
    assert.has_error(function() cl:cut(42) end)
    assert.has_error(function() cl:cut({ 42 }) end)
  end)
end)
