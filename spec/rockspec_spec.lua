-- The rockspecs (no server): the versioned one and scm-1 agree on all but
-- version and source, list every module (lua/zklock and its folders) and
-- C source of the tree, name no build machine, and the version is
-- zklock._VERSION.
local zklock = require "zklock"

-- a rockspec's fields, read as LuaRocks reads it: a Lua file of globals
local function load_rockspec(name)
  local f = assert(io.open(name, "r"))
  local text = f:read("*a")
  f:close()
  local env = {}
  local chunk
  if setfenv then -- Lua 5.1, LuaJIT
    chunk = assert(loadstring(text, "@" .. name))
    setfenv(chunk, env)
  else
    chunk = assert(load(text, "@" .. name, "t", env))
  end
  chunk()
  return env
end

local function lines(cmd)
  local p = assert(io.popen(cmd))
  local out = {}
  for l in p:lines() do out[#out + 1] = l end
  p:close()
  table.sort(out)
  return out
end

local function sorted(t)
  local out = {}
  for _, v in ipairs(t) do out[#out + 1] = v end
  table.sort(out)
  return out
end

local function keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

local versioned = lines("ls zklock-*.rockspec | grep -v -- '-scm-'")

describe("rockspecs", function()
  local scm = load_rockspec("zklock-scm-1.rockspec")

  it("there is exactly one versioned rockspec beside scm-1", function()
    assert.equal(1, #versioned)
  end)

  local rel = load_rockspec(versioned[1] or "zklock-scm-1.rockspec")

  it("its version is zklock._VERSION, its file name and its tag", function()
    local v = rel.version:match("^(%d+%.%d+%.%d+)%-%d+$")
    assert.is_string(v)
    assert.equal(v, zklock._VERSION)
    assert.equal("zklock-" .. rel.version .. ".rockspec", versioned[1])
    assert.equal("v" .. v, rel.source.tag)
  end)

  it("agrees with scm-1 on everything but version and source", function()
    for _, field in ipairs { "rockspec_format", "package", "description",
        "dependencies", "supported_platforms", "external_dependencies",
        "test_dependencies", "build_dependencies", "build", "test" } do
      assert.same(scm[field], rel[field], field)
    end
    assert.same(keys(scm), keys(rel))
    assert.equal(scm.source.url, rel.source.url)
  end)

  it("names no build machine's path", function()
    for _, spec in ipairs { scm, rel } do
      assert.matches("^git%+https://", spec.source.url)
      assert.is_nil(spec.source.url:find("file:", 1, true))
    end
  end)

  it("installs every module of lua/zklock and its folders", function()
    local want = {}
    -- (and of its folders: lua/zklock/testing/...)
    for _, file in ipairs(lines("find lua/zklock -name '*.lua'")) do
      local name = file:match("^lua/(.-)%.lua$"):gsub("/", ".")
      want[#want + 1] = (name:gsub("%.init$", ""))
    end
    local have = {}
    for name, v in pairs(scm.build.modules) do
      if type(v) == "string" then have[#have + 1] = name end
    end
    assert.same(sorted(want), sorted(have))
  end)

  it("compiles every C source into its module", function()
    local mods = scm.build.modules
    assert.same(lines("find src/core src/lua -name '*.c'"),
      sorted(mods["zklock.core"].sources))
    local testing = lines("ls src/testing/*.c")
    for _, f in ipairs { "src/core/base/util.c", "src/core/base/errors.c",
        "src/core/base/zkcshim.c", "src/lua/lutil.c" } do
      testing[#testing + 1] = f
    end
    assert.same(sorted(testing), sorted(mods["zklock.testing.core"].sources))
  end)
end)
