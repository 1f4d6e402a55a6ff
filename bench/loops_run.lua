-- make bench, event loops: one fresh server, then bench/loops.lua once per
-- loop and mode (docs/performance.md, "Event loops").
local testing = require "zklock.testing"

local srv = testing.server({ tick_time = 2000 })
local ok, err = pcall(function()
  local runs = {
    { "lua5.4", "./build/lua5.4/?.so", "cqueues", "adapter" },
    { "lua5.4", "./build/lua5.4/?.so", "cqueues", "poll" },
    { "lua5.4", "./build/lua5.4/?.so", "luv", "adapter" },
    { "lua5.4", "./build/lua5.4/?.so", "luv", "poll" },
    { "luajit", "./build/luajit/?.so", "copas", "adapter" },
  }
  local rate = {}
  for _, r in ipairs(runs) do
    local fh = assert(io.popen(("LUA_CPATH='%s;;' %s bench/loops.lua %s " ..
      "%s %s 1000 2>&1"):format(r[2], r[1], srv.connect_string, r[3], r[4])))
    local out = fh:read("*a")
    assert(fh:close(), "bench/loops.lua " .. r[3] .. " " .. r[4] ..
      " failed: " .. out)
    io.write(out)
    rate[r[3] .. "." .. r[4]] = tonumber(out:match("handoffs_per_s=(%d+)"))
  end
  for _, l in ipairs { "cqueues", "luv" } do
    print(("ratio loops.%s/loops.%s.poll=%.1f (hand-offs/s)"):format(l, l,
      rate[l .. ".adapter"] / rate[l .. ".poll"]))
  end
end)
srv:close()
assert(ok, err)
