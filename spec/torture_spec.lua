-- The short torture run (`make torture` runs the long one), and the proof
-- that its checker catches a broken lock.  Its workers are of both
-- runtimes, so it runs once, in the Lua 5.4 pass (make test's 10 minutes).
if jit then return end
local T = dofile("spec/torture.lua")

describe("torture", function()
  it("a deliberately broken lock (no predecessor check) is caught: " ..
     "overlaps, lost updates", function()
    local s = T.run("broken")
    print("\n" .. s.line)
    assert.is_true(s.overlaps > 0, s.line)
    assert.is_true(s.lost_updates > 0, s.line)
    assert.is_false(s.ok)
  end)

  it("short run: every fault kind, no overlap, no lost update, every " ..
     "survivor finishes, no orphan", function()
    local s = T.run("short")
    print("\n" .. s.line)
    assert.is_true(s.ok, s.line)
    for _, kind in ipairs(T.KINDS) do
      assert.is_true((s.faults[kind] or 0) >= 1, kind .. ": " .. s.line)
    end
  end)
end)
