-- The chaos run in `make test` (docs/testing.md, "The chaos run"): its
-- checkers proven on every recipe broken on purpose, and the short
-- profile, every option and composition in, on a random seed (printed:
-- replay it with `make chaos PROFILE=short SEED=n`).  The seeds that found
-- issue 22's compositions and issue 32's defects replay with make
-- chaos-found; each of issue 22's has its own regression spec in
-- spec/holds_spec.lua.
local C = dofile("spec/chaos/run.lua")
local H = require "spec.helpers"

local function found(s, check, pattern)
  for _, v in ipairs(s.found[check]) do
    if v.text:find(pattern) then return true end
  end
  return false
end

describe("chaos run", function()
  -- (under one runtime: the workers run both whichever runs busted)
  if not H.is54 then
    it("finds every recipe broken on purpose: two holders of a mutex, a " ..
       "semaphore mutex, a leader; a lease too many; a writer beside " ..
       "readers; lost updates; a queue jumped; a lock never given back; " ..
       "a barrier and a double barrier passed early; a token check that " ..
       "says every token holds", function()
      -- (a random program may miss a broken recipe now and then: one more
      -- run, on another seed, and every checker must have found its own
      -- in one of the two)
      local missing
      for round = 1, 2 do
        local s = C.run("broken")
        print("\n" .. s.line)
        assert.is_false(s.ok)
        local still = {}
        for _, kind in ipairs(missing or { "^two holders: mutex", "smutex",
            "leader", "leases of s1", "write rw" }) do
          if not found(s, "exclusion", kind) then still[#still + 1] = kind end
        end
        for _, check in ipairs(missing and (missing.checks or {}) or
            { "fencing", "rw", "fifo", "wedges", "barrier", "dbarrier",
              "tokens" }) do
          if s.counts[check] == 0 then still[#still + 1] = "#" .. check end
        end
        if round == 2 then
          assert.same({}, still, "not found in two runs: " .. s.line)
        end
        if #still == 0 then break end
        missing = {}
        for _, k in ipairs(still) do
          if k:sub(1, 1) ~= "#" then missing[#missing + 1] = k end
        end
        missing.checks = {} -- (the checks missed: the second run's turn)
        for _, k in ipairs(still) do
          if k:sub(1, 1) == "#" then
            missing.checks[#missing.checks + 1] = k:sub(2)
          end
        end
      end
    end)
  end

  -- (under the other: its workers alternate Lua 5.4 and LuaJIT anyway)
  if H.is54 then
    it("short profile on a random seed: every recipe and option under " ..
       "faults and the chaos actor, no violation", function()
      local s = C.run("short")
      local replay = ("replay: make chaos PROFILE=short SEED=%d")
        :format(s.seed)
      print("\n" .. s.line .. "\n" .. replay)
      assert.is_true(s.ok, s.line .. "\n" .. replay)
      assert.is_true(s.holds > 100, s.line)
    end)
  end
end)
