-- The chaos run in `make test` (docs/testing.md, "The chaos run"): its
-- checkers proven on every recipe broken on purpose, and the short
-- profile, every option and composition in, on a random seed (printed:
-- replay it with `make chaos PROFILE=short SEED=n`).  The seeds that found
-- issue 22's compositions replay with make chaos-found; each composition
-- has its own regression spec in spec/holds_spec.lua.
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
       "a barrier and a double barrier passed early", function()
      local s = C.run("broken")
      print("\n" .. s.line)
      assert.is_false(s.ok)
      for _, kind in ipairs({ "^two holders: mutex", "smutex", "leader",
          "leases of s1", "write rw" }) do
        assert.is_true(found(s, "exclusion", kind), kind .. ": " .. s.line)
      end
      for _, check in ipairs({ "fencing", "rw", "fifo", "wedges", "barrier",
          "dbarrier" }) do
        assert.is_true(s.counts[check] > 0, check .. ": " .. s.line)
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
