-- What the README and docs/openresty.md tell a newcomer to run, run as
-- written (issue 24): `make zk` and `make zk-stop`, `eval "$(make -s
-- env)"` and the README's Quick start block under Lua 5.4 and LuaJIT, an
-- example with no LUA_PATH set, docs/openresty.md's nginx.conf (with the
-- tree's build, then with the page's LuaRocks build for LuaJIT) and
-- examples/nginx/run.sh.  Only ZooKeeper addresses, ports and paths are
-- changed.  Runs once, in the LuaJIT pass, as nginx_spec does (nginx runs
-- LuaJIT; make memcheck and make asan run the Lua 5.4 pass under tools
-- that make, java and curl must not inherit).
local H = require "spec.helpers"
local N = require "spec.nginx"

if not jit then return end

local ROOT = os.getenv("PWD")
-- no paths of the caller's: what a newcomer's fresh shell has
local CLEAN = "unset LUA_PATH LUA_CPATH LUA_PATH_5_4 LUA_CPATH_5_4 "
  .. "LUA_INIT LUA_INIT_5_4; "

local quote, sh, block, subst = H.shquote, H.sh, H.doc_block, H.subst

-- GET on 127.0.0.1: status (nil: no answer) and body
local function get(port, path)
  local out = sh(("curl -s -m 10 -w '\\n%%{http_code}' "
    .. "'http://127.0.0.1:%d%s'"):format(port, path), 20)
  local body, st = out:match("^(.-)\n?(%d+)$")
  st = tonumber(st)
  return st ~= 0 and st or nil, body
end

describe("a newcomer's first hour, as the docs say", function()
  local port, dir, hosts, started

  lazy_setup(function()
    -- (under $ZKLOCK_TEST_TMP, so that spec/run.sh's clean-up finds the
    -- JVM if this file dies)
    dir = H.tmpname("newcomer-zk")
    for _ = 1, 3 do -- while another process takes the free port first
      port = H.tcore.free_port()
      started = { sh(("make -s zk ZK_PORT=%d ZK_DIR=%s"):format(port,
        quote(dir))) }
      if not started[1]:find("is taken by another process", 1, true) then
        break
      end
    end
    hosts = "127.0.0.1:" .. port
  end)

  lazy_teardown(function()
    N.stop_all()
    if dir then
      sh("make -s zk-stop ZK_DIR=" .. quote(dir))
      sh("rm -rf " .. quote(dir))
    end
  end)

  it("make zk leaves a ZooKeeper serving in the background, and says so "
     .. "when it runs already", function()
    local out, rc = started[1], started[2]
    assert.equal(0, rc, out)
    assert.matches("ZooKeeper is running on " .. hosts .. " %(pid %d+%)",
      out)
    local pid = out:match("%(pid (%d+)%)")
    -- make has exited; the server answers
    assert.equal("imok", H.tcore.four_letter("127.0.0.1", port, "ruok", 2))
    out, rc = sh(("make -s zk ZK_PORT=%d ZK_DIR=%s"):format(port,
      quote(dir)))
    assert.equal(0, rc, out)
    assert.matches("already running on " .. hosts .. " %(pid " .. pid, out)
  end)

  it("make -s env prints LUA_PATH and LUA_CPATH of the tree, absolute; "
     .. "LUA=luajit those of the LuaJIT build", function()
    for lua, build in pairs { [""] = "lua5.4", [" LUA=luajit"] = "luajit" } do
      local out, rc = sh("make -s env" .. lua)
      assert.equal(0, rc, out)
      assert.equal(("export LUA_PATH='%s/lua/?.lua;%s/lua/?/init.lua;;'\n"
        .. "export LUA_CPATH='%s/build/%s/?.so;;'\n"):format(ROOT, ROOT,
        ROOT, build), out)
    end
  end)

  it("the README's Quick start runs as written, saved in another "
     .. "directory, under Lua 5.4 and LuaJIT", function()
    local code = subst(block("README.md", "## Quick start", "lua"),
      "127.0.0.1:2181", hosts)
    local where = H.tmpname("quickstart")
    assert.equal(0, select(2, sh("mkdir " .. quote(where))))
    H.write(where .. "/quickstart.lua", code)
    for lua, env in pairs { ["lua5.4"] = "", luajit = " LUA=luajit" } do
      local out, rc = sh(("%seval \"$(make -s env%s)\" && cd %s && "
        .. "%s quickstart.lua"):format(CLEAN, env, quote(where), lua))
      assert.equal(0, rc, lua .. ": " .. out)
      assert.matches("^fencing token\t%d+\nwith_lock gave\t42\n$", out)
    end
    sh("rm -rf " .. quote(where))
  end)

  it("an example runs with no LUA_PATH or LUA_CPATH, from the root and "
     .. "from elsewhere, under Lua 5.4 and LuaJIT, and with the other "
     .. "runtime's", function()
    for _, run in ipairs {
      "lua5.4 examples/order_numbers.lua",
      "cd /tmp && ZKLOCK_LUA=luajit luajit " .. quote(ROOT)
        .. "/examples/order_numbers.lua",
      'eval "$(make -s env LUA=luajit)" && lua5.4 examples/order_numbers.lua'
    } do
      local out, rc = sh(("%s%s %s 2 2"):format(CLEAN, run, hosts))
      assert.equal(0, rc, run .. ": " .. out)
      assert.equal("2 workers made 4 order numbers: 0 duplicates\n", out)
    end
  end)

  -- docs/openresty.md's nginx.conf, its paths those of the tree or given
  local function page_conf(paths)
    local conf = block("docs/openresty.md", "## Set-up", "nginx")
    conf = subst(conf, "127.0.0.1:2181", hosts)
    if paths then
      conf = conf:gsub('\n%s*lua_package_path[^\n]*\n%s*lua_package_cpath'
        .. '[^\n]*\n', "\n" .. paths:gsub("%%", "%%%%"))
    end
    conf = subst(conf, "/path/to/zklock", ROOT, paths and 0 or 3)
    local file = H.tmpname("nginx-conf")
    local port_ = H.tcore.free_port()
    H.write(file, subst(conf, "listen 127.0.0.1:8080;",
      "listen 127.0.0.1:" .. port_ .. ";"))
    return file, port_
  end

  -- nginx with `conf` serves /buy under the lock: a token, then a higher
  -- one.  `main`: main-level text added.
  local function serves(conf, port_, main)
    local inst = N.start { conf = conf, port = port_, hosts = hosts,
                           ready = "/buy", main = main }
    local tokens = {}
    for i = 1, 2 do
      local st, body = inst:get("/buy")
      assert.equal(200, st, body)
      tokens[i] = tonumber(body:match("^held with token (%d+)$"))
      assert(tokens[i], body)
    end
    assert(tokens[2] > tokens[1], "tokens did not grow")
    inst:stop()
  end

  it("docs/openresty.md's nginx.conf starts nginx as written and serves "
     .. "a request under the lock", function()
    serves(page_conf())
  end)

  it("docs/openresty.md's LuaRocks build for LuaJIT loads in luajit, and "
     .. "the page's nginx.conf serves with it", function()
    local src = H.tmpname("rock-src")
    local tree = src .. "/tree"
    -- a copy of the sources: the build leaves objects beside them
    local out, rc = sh(("mkdir %s && cp -r src lua bin zklock-scm-1.rockspec"
      .. " %s"):format(quote(src), quote(src)))
    assert.equal(0, rc, out)
    local build = block("docs/openresty.md", "### Installed with LuaRocks",
      "sh")
    out, rc = sh(("cd %s && %s"):format(quote(src),
      subst(build, "/opt/zklock-luajit", tree)), 120)
    assert.equal(0, rc, out)
    local lib = tree .. "/lib/lua/5.1/?.so"
    out, rc = sh(("%sLUA_PATH=%s LUA_CPATH=%s luajit -e %s"):format(CLEAN,
      quote(tree .. "/share/lua/5.1/?.lua;" .. tree
        .. "/share/lua/5.1/?/init.lua"), quote(lib), quote(([[
      local zklock = require "zklock"
      assert(package.searchpath("zklock.core", package.cpath) == %q)
      local zk = assert(zklock.connect(%q))
      local m = zk:mutex("/newcomer/rock")
      assert(m:acquire(10))
      print(m:token())
      m:release()
      zk:close()]]):format((lib:gsub("%?", "zklock/core")), hosts))))
    assert.equal(0, rc, out)
    assert.matches("^%d+\n$", out)
    local paths = block("docs/openresty.md", "### Installed with LuaRocks",
      "nginx")
    -- (as root, nginx's workers would run as nobody, who cannot enter
    -- the run directory that holds this tree)
    local conf, port_ = page_conf(subst(paths, "/opt/zklock-luajit", tree, 3))
    serves(conf, port_, sh("id -u") == "0\n" and "user root root;" or nil)
    sh("rm -rf " .. quote(src))
  end)

  it("examples/nginx/run.sh serves the stock service in the foreground "
     .. "until stopped", function()
    local prefix = H.tmpname("run-sh")
    local port_ = H.tcore.free_port()
    local p = H.spawn_cmd("env NGINX_PREFIX=" .. prefix
      .. " sh examples/nginx/run.sh", hosts, port_)
    local ok, err = pcall(function()
      H.wait_until(function() return get(port_, "/ping") == 200 end, 15,
        "run.sh's nginx")
      assert.equal(200, (get(port_, "/reset?n=2")))
      local sold = {}
      for i = 1, 3 do sold[i] = get(port_, "/buy") end
      assert.same({ 200, 200, 409 }, sold)
      p:kill("TERM")
      assert.equal(0, p:wait(15), p:output())
      assert.is_nil((get(port_, "/ping")))
      assert.matches("stock service on http://127.0.0.1:" .. port_,
        p:output())
    end)
    p:kill("KILL")
    p:cleanup()
    sh("rm -rf " .. quote(prefix))
    assert(ok, err)
  end)

  it("make zk-stop stops the server, and says so when none runs",
     function()
    local out, rc = sh("make -s zk-stop ZK_DIR=" .. quote(dir))
    assert.equal(0, rc, out)
    assert.matches("ZooKeeper on " .. hosts .. " stopped", out)
    assert.is_nil((H.tcore.four_letter("127.0.0.1", port, "ruok", 1)))
    out, rc = sh("make -s zk-stop ZK_DIR=" .. quote(dir))
    assert.equal(0, rc, out)
    assert.matches("No ZooKeeper of .* is running", out)
  end)
end)
