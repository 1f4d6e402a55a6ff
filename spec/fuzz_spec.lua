-- API fuzzing against a real server: thousands of random calls (bounded in
-- count and time) on every constructor and method, public or underscore,
-- with arguments of random types and odd values: NaN, +-inf, huge and
-- negative numbers, NUL bytes, long and odd paths, data over 1 MiB, closed
-- clients, collected objects.  Pass: the process survives (make asan runs
-- this under AddressSanitizer), every failure is a Lua error or
-- `nil, msg, code` with a known code, and no lock node is left behind.
-- Seeded: ZKLOCK_FUZZ_SEED=n repeats a run; the seed is printed on failure.
local H = require "spec.helpers"
local zklock = H.zklock
local core = H.core

local CALLS = tonumber(os.getenv("ZKLOCK_FUZZ_CALLS")) or 6000
local SECONDS = tonumber(os.getenv("ZKLOCK_FUZZ_SECONDS")) or 40

describe("fuzz", function()
  local srv

  lazy_setup(function() srv = H.testing.server() end)
  lazy_teardown(function()
    zklock.set_waiter(nil)
    if srv then
      -- every session of the run is closed: their nodes must be gone
      H.wait_until(function()
        local zk = H.connect(srv)
        local left = H.lock_nodes(zk, "/zklock-spec")
        zk:close()
        return #left == 0
      end, 20, "no lock node left")
      srv:close()
    end
  end)

  it("random calls: errors or nil, msg, code; no crash; nothing left",
      function()
    local seed = tonumber(os.getenv("ZKLOCK_FUZZ_SEED")) or
      (os.time() + core.pid())
    math.randomseed(seed)
    local function rnd(n) return math.random(n) end
    local ROOT = H.path("fuzz")

    local clients = { H.connect(srv), H.connect(srv) }
    local closed = H.connect(srv)
    closed:close()
    local objects = {} -- everything made so far (some dropped at random)

    -- argument values
    local big = string.rep("d", 1024 * 1024 + 1)
    local long = "/" .. string.rep("p", 5000)
    local function path()
      local r = rnd(21)
      if r <= 8 then return ROOT .. "/" .. rnd(6) end
      return ({ "", "/", "//", "a/b", "/a/", "/a\0b", long, "/.", "/..",
        "/a/../b", "/a\1", ROOT .. "/\127" })[r - 8] or ROOT .. "/\xc3\xbc x"
    end
    local VALUES = {
      function() return nil end, function() return true end,
      function() return false end, function() return 0 end,
      function() return -1 end, function() return 1 end,
      function() return 0.5 end, function() return 2 ^ 31 end,
      function() return 2 ^ 31 - 1 end, function() return 2 ^ 53 end,
      function() return -2 ^ 63 end, function() return 0 / 0 end,
      function() return math.huge end, function() return -math.huge end,
      function() return "" end, function() return "x\0y" end,
      function() return big end, path, path, path,
      function() return {} end, function() return { 1, "a" } end,
      function() return function() end end,
      function() return clients[rnd(#clients)] end,
      function() return closed end,
      function() return objects[rnd(#objects + 1)] end,
      function() return io.stdout end,
    }
    local function value() return VALUES[rnd(#VALUES)]() end
    local function args(n)
      local t = { n = rnd(n + 1) - 1 }
      for i = 1, t.n do t[i] = value() end
      return t
    end
    local function timeout()
      return ({ 0, 0.05, 0.2, -1, 0 / 0, math.huge, 2 ^ 40, "1" })[rnd(8)]
    end

    -- no wait may last: a wait cut off raises out of the waiter, which is
    -- itself a case (an abandoned wait must leave nothing queued)
    local cap = 0
    zklock.set_waiter(function(c, gen, t)
      if core.now() > cap then error("fuzz: wait cut off") end
      c:_wait(gen, math.min(t or 0.1, 0.1))
    end)

    local unpack = table.unpack or unpack
    local CTORS = { "mutex", "semaphore_mutex", "semaphore", "rwlock",
      "multilock", "barrier", "double_barrier" }
    local CLIENT = { "get", "set", "dispatch", "stats", "state",
      "session_id", "session_timeout", "_children", "_create", "_delete",
      "_set", "_get", "_wait_gone", "_db", "_fenced", "_lock", "_events",
      "_ready", "_poll", "_stats" }
    local METHODS = { "acquire", "release", "is_held", "token", "node",
      "participants", "on_revoke", "on_lost", "fenced_set", "set", "wait",
      "remove", "enter", "leave", "poll", "result", "cancel", "start",
      "held", "info", "revocable", "extend", "__close" }
    local codes = {}
    for k in pairs(zklock.errors) do codes[k] = true end

    -- arguments of the expected types, odd values inside: the C layer
    -- must check what it dereferences even when the types are right
    local function word(list) return list[rnd(#list)] end
    local SHAPED = {
      _db = function() return { n = 4, word({ "enter", "leave" }), path(),
        rnd(2) == 1 and path() or word({ "x", "/", "" }), value() } end,
      _lock = function() return { n = 5, path(), word({ "mutex", "lease",
        "read", "write" }), value(), value(), word({ "x", "", "a/b" }) } end,
      _fenced = function() return { n = 3, path(), path(), value() } end,
      _create = function() return { n = 3, path(), value(),
        word({ "persistent", "ephemeral" }) } end,
      _children = function() return { n = 2, path(),
        word({ "mutex", "lease", "rw", "all" }) } end,
    }

    local function one()
      local r = rnd(10)
      local target, name, a
      if r <= 3 then
        target, name = clients[rnd(#clients)], CTORS[rnd(#CTORS)]
        if rnd(8) == 1 then target = closed end
        a = rnd(3) == 1 and args(3) or { n = 2, path(), rnd(4) }
        if name == "multilock" then a = { n = 1, { objects[rnd(#objects + 1)],
          objects[rnd(#objects + 1)] } } end
      elseif r <= 5 then
        target, name = clients[rnd(#clients)], CLIENT[rnd(#CLIENT)]
        if rnd(8) == 1 then target = closed end
        a = rnd(2) == 1 and args(5) or { n = 3, path(), value(), timeout() }
        if SHAPED[name] and rnd(2) == 1 then a = SHAPED[name]() end
      elseif r <= 9 and #objects > 0 then
        target = objects[rnd(#objects)]
        local obj = type(target) == "table" and target.read and
          (rnd(2) == 1 and target.read or target.write) or target
        target, name = obj, METHODS[rnd(#METHODS)]
        a = rnd(3) == 1 and args(3) or { n = 1, timeout() }
        if name == "fenced_set" then a = { n = 2, path(), value() } end
      else
        local f = ({
          function() return zklock.with_lock(objects[rnd(#objects + 1)],
            timeout(), function() return value() end) end,
          function() return zklock.revoke(clients[rnd(2)], path(), value()) end,
          function() return zklock.connect(value(), { connect_timeout = 0,
            session_timeout = value() }) end,
          function() return zklock.with_lock(value(), value(), value()) end,
          function() objects[rnd(#objects + 1)] = nil
            collectgarbage("step", 10) end,
          function() return tostring(objects[rnd(#objects + 1)]) end,
        })[rnd(6)]
        return "misc", { pcall(f) }
      end
      local fn = target ~= nil and (type(target) == "userdata" or
        type(target) == "table") and target[name]
      if type(fn) ~= "function" then return name, { true } end
      return name, { pcall(fn, target, unpack(a, 1, a.n)) }
    end

    local deadline = core.now() + SECONDS
    local calls, errors, fails = 0, 0, 0
    while calls < CALLS and core.now() < deadline do
      cap = core.now() + 0.5
      local name, res = one()
      calls = calls + 1
      local ok, r1, r2, r3 = res[1], res[2], res[3], res[4]
      local where = ("seed %d, call %d (%s)"):format(seed, calls,
        tostring(name))
      if not ok then
        errors = errors + 1
        assert(type(r1) == "string", where .. ": error of type " .. type(r1))
      else
        if r1 == nil and r2 ~= nil then
          fails = fails + 1
          assert(type(r2) == "string", where .. ": message " .. tostring(r2))
          assert(codes[r3], where .. ": unknown code " .. tostring(r3))
        end
        -- keep what was made, to call its methods later
        if type(r1) == "userdata" or (type(r1) == "table" and r1.read) then
          if #objects < 200 then objects[#objects + 1] = r1 end
        end
      end
    end
    print(("\nfuzz: seed %d, %d calls, %d errors, %d failures returned")
      :format(seed, calls, errors, fails))
    zklock.set_waiter(nil)
    assert.is_true(calls >= 500, "too few calls in time: " .. calls)
    objects = nil -- luacheck: ignore
    collectgarbage(); collectgarbage()
    for _, c in ipairs(clients) do c:close() end
  end)
end)
