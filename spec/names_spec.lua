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
  it("keeps one kind of a read/write lock's nodes", function()
    local list = { "_c_b-__READ__0000000002", "_c_a-__WRIT__0000000001",
      "_c_c-__READ__0000000003" }
    assert.same({ "_c_b-__READ__0000000002", "_c_c-__READ__0000000003" },
      names(list, "read"))
    assert.same({ "_c_a-__WRIT__0000000001" }, names(list, "write"))
  end)

  -- who holds: the same rule a lock attempt applies to itself in C
  describe("holders", function()
    local function seq(kind, n) return ("_c_x-%s%010d"):format(kind, n) end

    it("a mutex: the first node only", function()
      assert.same({ seq("lock-", 1) },
        core.holders({ seq("lock-", 2), seq("lock-", 1) }, "mutex"))
      assert.same({}, core.holders({}, "mutex"))
    end)

    it("a semaphore: the first max_leases", function()
      local list = { seq("lease-", 3), seq("lease-", 1), seq("lease-", 2) }
      assert.same({ seq("lease-", 1), seq("lease-", 2) },
        core.holders(list, "lease", 2))
      assert.same(3, #core.holders(list, "lease", 5))
    end)

    it("a read/write lock: readers before the first writer, or that writer",
      function()
      local R, W = "__READ__", "__WRIT__"
      assert.same({ seq(R, 1), seq(R, 2) },
        core.holders({ seq(R, 1), seq(R, 2), seq(W, 3), seq(R, 4) }, "rw"))
      assert.same({ seq(W, 1) },
        core.holders({ seq(W, 1), seq(R, 2), seq(W, 3) }, "rw"))
    end)

    it("refuses bad arguments", function()
      assert.has_error(function() core.holders({}, "all") end)
      assert.has_error(function() core.holders({}, "lease", 0) end)
      assert.has_error(function() core.holders("x", "mutex") end)
    end)
  end)

  -- a downgraded writer keeps its write node while a writer sorts between
  -- it and its read node (docs/design.md, section 5)
  describe("writer_between", function()
    local w1, r2, w3, r4 = "_c_a-__WRIT__0000000001", "_c_a-__READ__0000000002",
      "_c_b-__WRIT__0000000003", "_c_a-__READ__0000000004"
    it("sees a writer between our write and read nodes", function()
      assert.is_true(core.writer_between({ w1, w3, r4 }, w1, r4))
      assert.is_false(core.writer_between({ w1, r2, w3 }, w1, r2))
    end)
    it("treats missing nodes as the release did", function()
      assert.is_false(core.writer_between({ w3, r4 }, w1, r4)) -- no writer
      assert.is_true(core.writer_between({ w1, w3 }, w1, nil)) -- no reader
      assert.is_false(core.writer_between({ w1, r2 }, w1, nil))
    end)
  end)

  -- the completion thread's one pass over an unsorted listing
  -- (zkl_names_scan) against the same verdict from the sorted order
  describe("blocker", function()
    local function reference(list, kind, ours, ignore)
      local family = (kind == "read" or kind == "write") and "rw" or kind
      local sorted = core.sort_names(list, family)
      local idx
      for i, e in ipairs(sorted) do if e.name == ours then idx = i end end
      if not idx then return nil end
      local ahead = {}
      for i = 1, idx - 1 do
        local n = sorted[i].name
        if kind == "read" and n == ignore then return false, false end
        if kind ~= "read" or n:find("__WRIT__", 1, true) then
          ahead[#ahead + 1] = n
        end
      end
      return ahead[#ahead] or false, #ahead == 1
    end

    local MARK = { mutex = { "-lock-", "__lock__" }, latch = { "-latch-" },
      read = { "-__READ__", "-__WRIT__" }, write = { "-__READ__", "-__WRIT__" } }

    it("agrees with the sorted order on 2,000 random listings", function()
      math.randomseed(20261125)
      for round = 1, 2000 do
        local kind = ({ "mutex", "latch", "read", "write" })[round % 4 + 1]
        local list, n = {}, math.random(1, 12)
        for i = 1, n do
          local marks = MARK[kind]
          -- sequence numbers near the uint32 wrap too, and duplicates
          local seq = math.random(0, 5) == 0 and -math.random(1, 3)
            or math.random(1, 9)
          list[i] = ("_c_%02d%s%s"):format(i, marks[math.random(#marks)],
            seq < 0 and ("-%09d"):format(-seq) or ("%010d"):format(seq))
          if math.random(8) == 1 then list[i] = "junk" .. i end
        end
        local ours = list[math.random(n)]
        local ignore = kind == "read" and list[math.random(n)] or nil
        local b, sole = core.blocker(list, kind, ours, ignore)
        local rb, rsole = reference(list, kind, ours, ignore)
        local what = table.concat(list, " ") .. " ours " .. ours ..
          " ignore " .. tostring(ignore) .. " kind " .. kind
        assert.equal(rb, b, what)
        if rb ~= nil then assert.equal(rsole, sole, what) end
      end
    end)

    it("refuses bad input", function()
      assert.has_error(function() core.blocker("x", "mutex", "a") end)
      assert.has_error(function() core.blocker({ 1 }, "mutex", "a") end)
      assert.has_error(function() core.blocker({}, "lease", "a") end)
      assert.has_error(function() core.blocker({}, "nope", "a") end)
      assert.has_error(function() core.blocker({}, "mutex") end)
    end)
  end)
end)
