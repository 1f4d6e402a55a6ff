-- `make install` into a private tree (issue 37; docs/security.md,
-- "Builds"): the TLS build installed for this pass's runtime, used from a
-- directory outside the repository, over TLS, by a script with the
-- tree's paths (what `luarocks path --tree` gives) and by the installed
-- zklock command with no paths at all.  Under both runtimes (each its own
-- tree).
local H = require "spec.helpers"

local sh, quote = H.sh, H.shquote

-- the participant id zklock writes by default (docs/api.md, `id`)
local function zklock_id()
  return "pid " .. H.core.pid()
end

describe("make install", function()
  local srv, tree, away
  local rt = jit and "luajit" or "lua5.4"
  local v = jit and "5.1" or "5.4"

  lazy_setup(function()
    srv = H.testing.server({ tls = true })
    tree, away = H.tmpname("tree"), H.tmpname("away")
    assert(os.execute("mkdir -p " .. quote(away)))
    local out, rc = sh(("make -s install PREFIX=%s INSTALL_RUNTIMES=%s")
      :format(quote(tree), rt), 120)
    assert(rc == 0, out)
  end)
  lazy_teardown(function()
    if srv then srv:close() end
    os.execute("rm -rf " .. quote(tree) .. " " .. quote(away))
  end)

  it("installs the TLS build for " .. rt .. " under PREFIX, usable from " ..
     "outside the repository", function()
    local script = away .. "/try.lua"
    H.write(script, [[
      local zklock = require "zklock"
      local hosts, ca, cert, key, path = ...
      print("tls=" .. tostring(zklock.features.tls))
      print("core=" .. package.searchpath("zklock.core", package.cpath))
      print("lua=" .. package.searchpath("zklock", package.path))
      local zk = assert(zklock.connect(hosts, { tls = { ca = ca, cert = cert,
        key = key } }))
      local m = zk:mutex(path)
      assert(m:acquire(5))
      print("held " .. tostring(m:is_held()))
      assert(m:release())
      zk:close()
    ]])
    local t, path = srv.tls, H.path("installed")
    local out, rc = sh(("cd %s && LUA_PATH=%s LUA_CPATH=%s %s try.lua %s %s %s " ..
      "%s %s"):format(quote(away),
      quote(("%s/share/lua/%s/?.lua;%s/share/lua/%s/?/init.lua;;")
        :format(tree, v, tree, v)),
      quote(("%s/lib/lua/%s/?.so;;"):format(tree, v)), H.lua,
      quote(srv.connect_string), quote(t.ca), quote(t.cert), quote(t.key),
      quote(path)), 60)
    assert.equal(0, rc, out)
    assert.matches("tls=true", out, 1, true)
    assert.matches("core=" .. tree .. "/lib/lua/" .. v .. "/zklock/core.so",
      out, 1, true)
    assert.matches("lua=" .. tree .. "/share/lua/" .. v ..
      "/zklock/init.lua", out, 1, true)
    assert.matches("held true", out, 1, true)
  end)

  it("its zklock command finds the tree by itself, over TLS", function()
    local t, path = srv.tls, H.path("installed-held")
    local zk = H.connect(srv)
    local m = zk:mutex(path)
    assert.truthy(m:acquire(5))
    local out, rc = sh(("cd %s && env -u LUA_PATH -u LUA_CPATH -u " ..
      "LUA_PATH_5_4 -u LUA_CPATH_5_4 %s %s/bin/zklock holders %s %s " ..
      "--tls-ca %s --tls-cert %s --tls-key %s"):format(quote(away), H.lua,
      quote(tree), quote(srv.connect_string), quote(path),
      quote(t.ca), quote(t.cert), quote(t.key)), 60)
    assert.is_true(m:release())
    zk:close()
    assert.equal(0, rc, out) -- (connected, and found our holder)
    assert.matches(zklock_id(), out, 1, true)
  end)
end)
