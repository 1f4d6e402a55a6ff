-- Specs of the test equipment itself (zklock.testing), against real
-- ZooKeeper servers.
local testing = require "zklock.testing"

local TMP = os.getenv("ZKLOCK_TEST_TMP") or "/tmp"

-- Is process `pid` alive (present and not a zombie)?
local function proc_alive(pid)
  local state = testing._proc_stat(pid)
  return state ~= nil and state ~= "Z" and state ~= "X"
end

local function exists(path) return os.rename(path, path) ~= nil end

-- The zklock-zk-* directories under the temp dir, as one sorted string.
local function server_dirs()
  local p = io.popen("ls -d '" .. TMP .. "'/zklock-zk-* 2>/dev/null")
  local out = p:read("*a")
  p:close()
  return out
end

local function mode(srv, timeout)
  local r = srv:four_letter("srvr", timeout or 1)
  return r and r:match("Mode: (%a+)")
end

describe("zklock.testing.server", function()
  local srv

  lazy_setup(function() srv = testing.server() end)
  lazy_teardown(function() if srv then srv:close() end end)

  it("serves on a free loopback port from a throwaway directory", function()
    assert.equal("127.0.0.1", srv.host)
    assert.is_number(srv.port)
    assert.equal("127.0.0.1:" .. srv.port, srv.connect_string)
    assert.equal("imok", srv:four_letter("ruok"))
    assert.equal("standalone", mode(srv))
    assert.is_true(srv:is_running())
    assert.is_true(proc_alive(srv:pid()))
    assert.equal(TMP .. "/zklock-zk-", srv.dir:sub(1, #TMP + 11))
    local conf = srv:four_letter("conf")
    assert.matches("tickTime=500\n", conf, 1, true)
    assert.matches("minSessionTimeout=1000\n", conf, 1, true)
    assert.matches("ZooKeeperServerMain - Starting server", srv:log(), 1, true)
  end)

  it("stop makes it unreachable; start brings back port and data", function()
    local port, dir, pid = srv.port, srv.dir, srv:pid()
    assert.is_true(srv:stop())
    assert.is_false(srv:is_running())
    assert.is_nil(srv:pid())
    assert.is_false(proc_alive(pid))
    local r, msg, code = srv:four_letter("ruok", 1)
    assert.is_nil(r)
    assert.is_string(msg)
    assert.is_string(code)
    assert.is_true(srv:start())
    assert.equal("imok", srv:four_letter("ruok"))
    assert.equal(port, srv.port)
    assert.equal(dir, srv.dir)
    assert.not_equal(pid, srv:pid())
    -- the second start loaded the snapshot the first one wrote
    local second = srv:log():match("zklock.testing: start 2 ---\n(.*)$")
    assert.truthy(second)
    assert.matches("Reading snapshot " .. dir .. "/data/version-2/", second,
                   1, true)
  end)

  it("restart gives a new JVM on the same port", function()
    local pid = srv:pid()
    assert.is_true(srv:restart())
    assert.not_equal(pid, srv:pid())
    assert.equal("imok", srv:four_letter("ruok"))
  end)

  it("pause makes it silent, resume makes it answer", function()
    srv:pause()
    finally(function() srv:resume() end)
    assert.is_true(srv:is_running())
    local r, msg = srv:four_letter("ruok", 0.5)
    assert.is_nil(r)
    assert.matches("timed out", msg, 1, true)
    srv:resume()
    assert.equal("imok", srv:four_letter("ruok", 5))
  end)

  it("a start on a taken port raises with the log, leaving nothing", function()
    local before = server_dirs()
    local ok, err = pcall(testing.server, { port = srv.port })
    assert.is_false(ok)
    assert.matches("Address already in use", err, 1, true)
    assert.matches("--- last lines of ", err, 1, true)
    assert.equal(before, server_dirs())
    assert.equal("imok", srv:four_letter("ruok")) -- the owner is unharmed
  end)
end)

-- Runs `code` in a child interpreter of the same kind, with our paths;
-- returns its output. The child lets close_all and exit-time clean-up be
-- checked without touching servers this process may share.
local function child(code)
  local lua = os.getenv("ZKLOCK_LUA") or (jit and "luajit" or "lua5.4")
  local prog = ("package.path = %q; package.cpath = %q; %s")
    :format(package.path, package.cpath, code)
  local p = io.popen(lua .. " -e '" .. prog:gsub("'", [['\'']]) .. "' 2>&1")
  local out = p:read("*a")
  p:close()
  return out
end

-- Parses "pid dir" lines; kills and removes whatever survived (so a
-- failing check leaves nothing behind).
local function started(out)
  local list = {}
  for pid, dir in out:gmatch("(%d+)%s+(%S+/zklock%-zk%-%w+)") do
    list[#list + 1] = { pid = tonumber(pid), dir = dir }
  end
  finally(function()
    for _, s in ipairs(list) do
      -- only the JVM of that directory: its pid may be someone else's now
      local f = io.open("/proc/" .. s.pid .. "/cmdline", "rb")
      local cmd = f and f:read("*a") or ""
      if f then f:close() end
      if cmd:find(s.dir, 1, true) then
        os.execute("kill -KILL " .. s.pid .. " 2>/dev/null")
      end
      os.execute("rm -rf '" .. s.dir .. "'")
    end
  end)
  return list
end

describe("zklock.testing clean-up", function()
  it("close kills the JVM and removes the directory, idempotently", function()
    local srv = testing.server()
    finally(function() srv:close() end)
    local pid, dir = srv:pid(), srv.dir
    assert.is_true(exists(dir))
    assert.is_true(srv:close())
    assert.is_false(proc_alive(pid))
    assert.is_false(exists(dir))
    assert.is_true(srv:close())
    assert.is_false(srv:is_running())
    assert.matches("closed", tostring(srv), 1, true)
  end)

  it("collecting a dropped server closes it", function()
    local pid, dir
    do
      local srv = testing.server()
      pid, dir = srv:pid(), srv.dir
    end
    collectgarbage()
    collectgarbage()
    assert.is_false(proc_alive(pid))
    assert.is_false(exists(dir))
  end)

  it("close_all closes every server and member of the process", function()
    -- os.exit without closing the state: only close_all can clean up
    local list = started(child([[
      local t = require "zklock.testing"
      local a, c = t.server(), t.cluster(3)
      for _, s in ipairs({ a, c.members[1], c.members[2], c.members[3] }) do
        print(s:pid(), s.dir)
      end
      t.close_all()
      io.stdout:flush()
      os.exit(0, false)]]))
    assert.equal(4, #list)
    for _, s in ipairs(list) do
      assert.is_false(proc_alive(s.pid))
      assert.is_false(exists(s.dir))
    end
  end)

  it("a normal exit of the interpreter closes open servers", function()
    local list = started(child([[
      local srv = require("zklock.testing").server()
      print(srv:pid(), srv.dir)]]))
    assert.equal(1, #list)
    assert.is_false(proc_alive(list[1].pid))
    assert.is_false(exists(list[1].dir))
  end)
end)

describe("zklock.testing.cluster(3)", function()
  local cl

  lazy_setup(function() cl = testing.cluster(3) end)
  lazy_teardown(function() if cl then cl:close() end end)

  it("has three serving members and exactly one leader", function()
    assert.equal(3, #cl.members)
    local addrs, leaders = {}, 0
    for i, m in ipairs(cl.members) do
      assert.equal(i, m.id)
      addrs[i] = m.connect_string
      local md = mode(m)
      assert.truthy(md == "leader" or md == "follower", md)
      if md == "leader" then leaders = leaders + 1 end
    end
    assert.equal(1, leaders)
    assert.equal(table.concat(addrs, ","), cl.connect_string)
    assert.matches("^127%.0%.0%.1:%d+,127%.0%.0%.1:%d+,127%.0%.0%.1:%d+$",
                   cl.connect_string)
    local leader = assert(cl:leader())
    assert.equal("leader", mode(leader))
  end)

  it("elects a new leader when the leader stops", function()
    local old = assert(cl:leader())
    old:stop()
    local new = assert(cl:leader(20))
    assert.not_equal(old.id, new.id)
    assert.equal("leader", mode(new))
    old:start()
    assert(cl:wait_quorum(20))
    assert.equal("follower", mode(old))
    assert.equal(new.id, assert(cl:leader()).id)
  end)

  it("close kills every member and removes their directories", function()
    local pids, dirs = {}, {}
    for i, m in ipairs(cl.members) do pids[i], dirs[i] = m:pid(), m.dir end
    assert.is_true(cl:close())
    for i = 1, 3 do
      assert.is_false(proc_alive(pids[i]))
      assert.is_false(exists(dirs[i]))
    end
    assert.is_true(cl:close())
  end)
end)
