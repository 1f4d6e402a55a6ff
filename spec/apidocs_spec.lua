-- Every code block of docs/api.md that is meant to run, run as written
-- (issue 37), as quickstart_spec does for the README: the event-loop
-- example as a program of its own (its server address and lock path
-- changed), the read-modify-write of with_lock in a chunk given `zklock`
-- and `lock`.  Under both runtimes.  A block added to api.md must be run
-- here, or named in NOT_RUN: the first spec fails until it is.
local H = require "spec.helpers"

local zklock = H.zklock
local block, subst, sh, quote = H.doc_block, H.subst, H.sh, H.shquote
local PAGE = "docs/api.md"

-- the fenced lua blocks of api.md, by the heading they follow
local RUN = {
  ["## Waiting in an event loop"] = 1,
  ["## `zklock.with_lock(lock, [timeout,] fn, ...)`"] = 1,
}
local NOT_RUN = {} -- (heading -> why; none yet)

describe("docs/api.md's code, as written", function()
  local srv
  lazy_setup(function() srv = H.testing.server() end)
  lazy_teardown(function() if srv then srv:close() end end)

  it("every lua block is run here (or said not to be)", function()
    local text, heading, seen = assert(H.read(PAGE)), nil, {}
    for line in text:gmatch("([^\n]*)\n") do
      if line:find("^#+ ") then heading = line end
      if line == "```lua" then
        seen[heading] = (seen[heading] or 0) + 1
      end
    end
    for h, count in pairs(seen) do
      assert(RUN[h] == count or NOT_RUN[h],
        ("%s: %d lua block(s) under %q, not run by spec/apidocs_spec.lua")
        :format(PAGE, count, h))
    end
  end)

  it("the cqueues example runs to its end", function()
    local path = H.path("apidocs-job")
    local program = subst(subst(block(PAGE, "## Waiting in an event loop",
      "lua"), "127.0.0.1:2181", srv.connect_string), '"/app/job"',
      ("%q"):format(path))
    local file = H.tmpname("apidocs") .. ".lua"
    H.write(file, program)
    local out, rc = sh(("LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' " ..
      "LUA_CPATH=%s %s %s"):format(quote(package.cpath), H.lua, quote(file)),
      60)
    os.remove(file)
    assert.equal(0, rc, out)
    assert.matches("done\t100\n$", out)
    -- (every hold released: nobody holds or waits)
    local zk = H.connect(srv.connect_string)
    assert.same({}, assert(zk:mutex(path):holders()))
    zk:close()
  end)

  it("with_lock's read-modify-write, twice and once more on 0", function()
    local zk = H.connect(srv.connect_string)
    local code = block(PAGE, "## `zklock.with_lock(lock, [timeout,] fn, ...)`",
      "lua")
    local stock = H.path("apidocs-stock")
    code = subst(code, '"/stock"', ("%q"):format(stock)) ..
      "return sold, left\n"
    assert(zk:set(stock, "2"))
    local lock = zk:mutex(H.path("apidocs-stock-lock"))
    local function run()
      local env = setmetatable({ zklock = zklock, lock = lock },
        { __index = _G })
      local chunk
      if setfenv then
        chunk = assert(loadstring(code, "=api.md"))
        setfenv(chunk, env)
      else
        chunk = assert(load(code, "=api.md", "t", env))
      end
      return chunk()
    end
    assert.same({ true, 1 }, { run() })
    assert.same({ true, 0 }, { run() })
    assert.same({ false, 0 }, { run() })
    assert.equal("0", (zk:get(stock)))
    zk:close()
  end)
end)
