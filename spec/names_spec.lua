-- Pure functions: recognising lock nodes and ordering them (no server).
local core = require "zklock.core"

local function names(list, markers)
  local out = {}
  for i, e in ipairs(core.sort_names(list, markers)) do out[i] = e.name end
  return out
end

describe("lock node ordering", function()
  it("orders by the sequence suffix, not by the uuid in front", function()
    assert.same({
      "_c_ffff-lock-0000000001", "_c_0000-lock-0000000002",
      "_c_8888-lock-0000000010",
    }, names({ "_c_8888-lock-0000000010", "_c_0000-lock-0000000002",
      "_c_ffff-lock-0000000001" }, "mutex"))
  end)

  it("compares suffixes as uint32 across the 2^31 wrap", function()
    -- after 2147483647 ZooKeeper's counter prints -2147483648: newer, so
    -- later; a string or signed sort would put it first
    local sorted = core.sort_names({
      "_c_b-lock--2147483648", "_c_a-lock-2147483647",
      "_c_c-lock--2147483647", "_c_d-lock-0000000005",
    }, "mutex")
    assert.same({ "_c_d-lock-0000000005", "_c_a-lock-2147483647",
      "_c_b-lock--2147483648", "_c_c-lock--2147483647" },
      { sorted[1].name, sorted[2].name, sorted[3].name, sorted[4].name })
    assert.equal(2147483648, sorted[3].seq)
    assert.equal(2147483649, sorted[4].seq)
  end)

  it("ignores anything that is not a contender", function()
    assert.same({ "_c_x-lock-0000000003" }, names({
      "leases", "_c_x-lock-0000000003", "lock-", "_c_y-lock-", "_c_z-lock-12a",
      "_c_q-lock-00000000001", "_c_r-lease-0000000001", "ready",
    }, "mutex"))
  end)

  it("knows kazoo's lock nodes (extra_lock_patterns interop)", function()
    assert.same({ "abc__lock__0000000001", "_c_x-lock-0000000002" },
      names({ "_c_x-lock-0000000002", "abc__lock__0000000001" }, "mutex"))
  end)

  it("keeps leases and read/write nodes apart", function()
    assert.same({ "_c_a-lease-0000000001" },
      names({ "_c_a-lease-0000000001", "_c_b-lock-0000000000" }, "lease"))
    assert.same({ "_c_a-__WRIT__0000000001", "_c_b-__READ__0000000002" },
      names({ "_c_b-__READ__0000000002", "_c_a-__WRIT__0000000001",
        "_c_c-lock-0000000000" }, "rw"))
  end)

  it("rejects a bad marker set", function()
    assert.has_error(function() core.sort_names({}, "bogus") end)
    assert.has_error(function() core.sort_names({ 1 }, "mutex") end)
  end)
end)
