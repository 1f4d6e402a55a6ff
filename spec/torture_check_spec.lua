-- The torture checker on made-up logs: it must see what it claims to.
local C = dofile("spec/torture_check.lua")

local function log(lines) return C.parse(table.concat(lines, "\n")) end

describe("torture checker", function()
  it("parses a worker log", function()
    local w = log { "H 1.5 2.5 100", "W 7 100 3 ok", "F timeout",
                    "F timeout", "D 1" }
    assert.same({ { 1.5, 2.5, 100 } }, w.holds)
    assert.same({ { 7, 100, 3, "ok" } }, w.writes)
    assert.same({ timeout = 2 }, w.failed)
    assert.equal(1, w.done)
  end)

  it("passes disjoint holds with rising tokens and an exact counter",
     function()
    local a = log { "H 1 2 10", "W 11 10 1 ok", "H 5 6 30", "W 31 30 3 ok",
                    "D 2" }
    local b = log { "H 3 4 20", "W 21 20 2 ok", "D 1" }
    local s = C.check({ a, b }, 3, 0, 1, 0)
    assert.is_true(s.ok)
    assert.equal(3, s.holds)
    assert.equal(3, s.accepted)
  end)

  it("reports overlapping holds", function()
    local a = log { "H 1 3 10", "D 1" }
    local b = log { "H 2 4 20", "D 1" }
    local s = C.check({ a, b }, 0, 0, 1, 0)
    assert.equal(1, s.overlaps)
    assert.is_false(s.ok)
  end)

  it("reports an accepted write whose token is not above every earlier " ..
     "one (a stale holder's write let through)", function()
    local a = log { "W 5 30 1 ok", "D 1" }
    local b = log { "W 9 20 2 ok", "D 1" } -- later in zxid, older token
    local s = C.check({ a, b }, 2, 0, 0, 0)
    assert.equal(1, s.token_violations)
    assert.is_false(s.ok)
  end)

  it("reports lost updates, and allows for writes of unknown outcome",
     function()
    local a = log { "W 1 1 1 ok", "W 2 2 1 ok", "D 0" } -- both wrote 1
    assert.equal(1, C.check({ a }, 1, 0, 0, 0).lost_updates)
    local b = log { "W 1 1 1 ok", "W 0 2 2 unknown", "D 0" }
    assert.equal(0, C.check({ b }, 2, 0, 0, 0).lost_updates)
    assert.equal(0, C.check({ b }, 1, 0, 0, 0).lost_updates)
  end)

  it("counts a write sent by a worker killed before it logged the " ..
     "outcome as unknown", function()
    local a = log { "P 1 1", "W 5 1 1 ok", "P 2 2" } -- killed after P
    local s = C.check({ a }, 2, 0, 1, 1)
    assert.equal(1, s.unknown)
    assert.equal(0, s.lost_updates)
    assert.equal(1, C.check({ a }, 3, 0, 1, 1).lost_updates)
  end)

  it("reports workers that did not finish, and orphans", function()
    local a = log { "H 1 2 1" }
    local s = C.check({ a }, 0, 0, 1, 0)
    assert.equal(1, s.incomplete)
    assert.equal(0, C.check({ a }, 0, 0, 1, 1).incomplete) -- killed
    assert.is_false(C.check({ log { "D 1" } }, 0, 2, 1, 0).ok)
  end)
end)
