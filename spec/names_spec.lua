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
        if kind == "read" and n == ignore then return false, false, 0 end
        if kind ~= "read" or n:find("__WRIT__", 1, true) then
          ahead[#ahead + 1] = n
        end
      end
      return ahead[#ahead] or false, #ahead == 1, #ahead
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
        local b, sole, nahead = core.blocker(list, kind, ours, ignore)
        local rb, rsole, rahead = reference(list, kind, ours, ignore)
        local what = table.concat(list, " ") .. " ours " .. ours ..
          " ignore " .. tostring(ignore) .. " kind " .. kind
        assert.equal(rb, b, what)
        if rb ~= nil then
          assert.equal(rsole, sole, what)
          assert.equal(rahead, nahead, what) -- (on_queued's position)
        end
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

-- What ZooKeeper takes as a path and as a connect string (core/base/paths.c):
-- the one statement of the reasons, which every check raises with.
describe("path and connect-string checks", function()
  local problem = core.path_problem

  it("accepts ordinary paths, and characters next to the refused ranges",
    function()
    for _, p in ipairs({
      "/a", "/a/b-c_d.e", "/a/...", "/a/.b", "/a/b.", "/a b/~!@#",
      "/\xc3\xbc", -- U+00FC
      "/\xc2\xa0", -- U+00A0, the first after the C1 controls
      "/\xed\x9f\xbf", -- U+D7FF, the last before the surrogates
      "/\xef\xa4\x80", -- U+F900, the first after the private use area
      "/\xef\xbf\xaf", -- U+FFEF, the last before U+FFF0
      "/" .. ("x"):rep(4095),
    }) do
      assert.is_nil(problem(p), p)
    end
    assert.equal(4096, core.PATH_MAX)
  end)

  it("says why a path is refused: reason, then the path", function()
    for _, c in ipairs({
      { "", "path must start with '/'" },
      { "a/b", "path must start with '/': a/b" },
      { "/", "path must not be the root: /" },
      { "/a/", "path must not end with '/': /a/" },
      { "/a//b", "empty path component: /a//b" },
      { "/a/./b", "relative path component: /a/./b" },
      { "/a/..", "relative path component: /a/.." },
      { "/a\0b", "path contains a NUL byte: /a" },
      { "/a\1", "path contains a control character: /a\1" },
      { "/a\31", "path contains a control character: /a\31" },
      { "/a\127", "path contains a control character: /a\127" },
      -- C1 controls, U+0080-U+009F (the server refuses them)
      { "/a\xc2\x80", "path contains a control character: /a\xc2\x80" },
      { "/a\xc2\x9f", "path contains a control character: /a\xc2\x9f" },
      -- not UTF-8 (the server reads U+FFFD, and refuses it)
      { "/a\xff", "path is not valid UTF-8 (at byte 3): /a\xff" },
      { "/a\x80", "path is not valid UTF-8 (at byte 3): /a\x80" },
      { "/ab\xc3", "path is not valid UTF-8 (at byte 4): /ab\xc3" },
      { "/\xc3(", "path is not valid UTF-8 (at byte 2): /\xc3(" },
      { "/\xc0\xaf", "path is not valid UTF-8 (at byte 2): /\xc0\xaf" },
      { "/\xe0\x80\xaf", "path is not valid UTF-8 (at byte 2): " ..
        "/\xe0\x80\xaf" }, -- overlong
      { "/\xed\xa0\x80", "path is not valid UTF-8 (at byte 2): " ..
        "/\xed\xa0\x80" }, -- a surrogate, U+D800
      { "/\xf4\x90\x80\x80", "path is not valid UTF-8 (at byte 2): " ..
        "/\xf4\x90\x80\x80" }, -- beyond U+10FFFF
      -- what the server refuses (PathUtils.validatePath, bounds included)
      { "/\xee\x80\x80", "path contains U+E000, a character ZooKeeper " ..
        "refuses: /\xee\x80\x80" },
      { "/\xef\xa3\xbf", "path contains U+F8FF, a character ZooKeeper " ..
        "refuses: /\xef\xa3\xbf" },
      { "/\xef\xbf\xb0", "path contains U+FFF0, a character ZooKeeper " ..
        "refuses: /\xef\xbf\xb0" },
      { "/\xef\xbf\xbd", "path contains U+FFFD, a character ZooKeeper " ..
        "refuses: /\xef\xbf\xbd" },
      { "/\xef\xbf\xbf", "path contains U+FFFF, a character ZooKeeper " ..
        "refuses: /\xef\xbf\xbf" },
      { "/\xf0\x9f\x98\x80", "path contains U+1F600, a character " ..
        "ZooKeeper refuses: /\xf0\x9f\x98\x80" }, -- a UTF-16 pair there
    }) do
      assert.equal(c[2], problem(c[1]), ("%q"):format(c[1]))
    end
  end)

  it("counts the length in bytes, against the limit given", function()
    local long = "/" .. ("x"):rep(4096)
    assert.equal("path too long (over 4096 bytes): " .. long, problem(long))
    local p = "/" .. ("x"):rep(4032)
    assert.equal("path too long (over 4032 bytes: its nodes' paths would " ..
      "pass 4096): " .. p, problem(p, 4032))
    assert.is_nil(problem(p:sub(1, 4032), 4032))
    assert.has_error(function() problem("/a", 5000) end)
    assert.has_error(function() problem({}) end)
  end)

  it("says why a connect string is refused", function()
    local hp = core.hosts_problem
    for _, h in ipairs({ "127.0.0.1:2181", "a:1,b:2,c:3/app",
        "zk1.example.com:2181, zk2.example.com:2181/a/b", "::1:2181",
        "h:1/", "h:65535" }) do
      assert.is_nil(hp(h), h)
    end
    for _, c in ipairs({
      { "", "empty connect string; expected \"host:port[,host:port...]" ..
        "[/chroot]\"" },
      { "localhost", "host 'localhost' has no port (host:port expected): " ..
        "localhost" },
      { ",", "empty host in the connect string (host:port expected " ..
        "between commas): ," },
      { "a:1,", "empty host in the connect string (host:port expected " ..
        "between commas): a:1," },
      { "a:1,,b:2", "empty host in the connect string (host:port " ..
        "expected between commas): a:1,,b:2" },
      { "127.0.0.1:2181\0/app", "connect string contains a NUL byte: " ..
        "127.0.0.1:2181" },
      { "h:0", "host 'h:0' has a bad port (a number from 1 to 65535 " ..
        "expected): h:0" },
      { "h:65536", "host 'h:65536' has a bad port (a number from 1 to " ..
        "65535 expected): h:65536" },
      { "h:0x50", "host 'h:0x50' has a bad port (a number from 1 to " ..
        "65535 expected): h:0x50" },
      { "h:", "host 'h:' has a bad port (a number from 1 to 65535 " ..
        "expected): h:" },
      { ":2181", "host ':2181' has no name before its port: :2181" },
      { "a host:1", "host 'a host:1' contains a space or a control " ..
        "character: a host:1" },
      { "/app", "no host:port before the chroot: /app" },
      { "h:1/app/", "chroot: path must not end with '/': h:1/app/" },
      { "h:1/a\xff", "chroot: path is not valid UTF-8 (at byte 3): " ..
        "h:1/a\xff" },
    }) do
      assert.equal(c[2], hp(c[1]), ("%q"):format(c[1]))
    end
    assert.has_error(function() hp(nil) end)
  end)
end)
