-- Connection-state notices (zk:on_state), in Curator's model: a server
-- stopped and started again gives suspended -> reconnected; a connection
-- silent past the session timeout, while the server expires the session,
-- gives suspended -> lost -> renewed.  Delivered in Lua, in order.
local H = require "spec.helpers"

describe("connection-state notices", function()
  local srv

  lazy_setup(function()
    srv = H.testing.server({ min_session_timeout = 1000 })
  end)
  lazy_teardown(function()
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  -- listen on zk: the notices "new<old" in the order told
  local function listen(zk)
    local got = {}
    zk:on_state(function(new, old)
      got[#got + 1] = new .. "<" .. tostring(old)
    end)
    return got
  end

  local function wait_for(zk, got, n, what)
    H.wait_until(function()
      zk:dispatch()
      return #got >= n
    end, 30, what)
  end

  it("a server stopped and started again: suspended, then reconnected",
      function()
    local zk = H.connect(srv, { session_timeout = 10 })
    local sid = zk:session_id()
    local got = listen(zk)
    srv:stop()
    local ok, err = pcall(wait_for, zk, got, 1, "suspended")
    srv:start()
    assert(ok, err)
    wait_for(zk, got, 2, "reconnected")
    assert.same({ "suspended<nil", "reconnected<suspended" }, got)
    assert.equal(sid, zk:session_id()) -- the same session
    zk:close()
  end)

  it("a connection silent past the session timeout: suspended, lost, " ..
     "then renewed", function()
    local proxy = H.testing.proxy(srv)
    local zk = H.connect(proxy:connect_string(), { session_timeout = 2 })
    local sid = zk:session_id()
    local got = listen(zk)
    proxy:stall(true, true) -- silence: the server expires the session
    local ok, err = pcall(wait_for, zk, got, 2, "suspended and lost")
    proxy:cut()
    proxy:stall(false, false)
    assert(ok, err)
    wait_for(zk, got, 3, "renewed")
    assert.same({ "suspended<nil", "lost<suspended", "renewed<lost" }, got)
    assert.not_equal(sid, zk:session_id()) -- a new session
    assert.equal("connected", zk:state())
    zk:close()
    proxy:close()
  end)

  it("several listeners, in order; on_state(nil) removes them; an error " ..
     "in one is reported, not raised", function()
    local zk = H.connect(srv, { session_timeout = 10 })
    local order = {}
    zk:on_state(function(new) order[#order + 1] = "a:" .. new end)
    zk:on_state(function() error("listener b fails") end)
    zk:on_state(function(new) order[#order + 1] = "c:" .. new end)
    local saved = io.stderr
    local reported = {}
    -- the failing listener's report goes to io.stderr: catch it there
    -- luacheck: push ignore 122 (io.stderr is set on purpose)
    io.stderr = { write = function(_, s) reported[#reported + 1] = s end }
    srv:restart()
    local ok, err = pcall(wait_for, zk, order, 4, "both notices")
    io.stderr = saved
    -- luacheck: pop
    assert(ok, err)
    assert.same({ "a:suspended", "c:suspended", "a:reconnected",
      "c:reconnected" }, order)
    assert.is_truthy(table.concat(reported):find("listener b fails", 1, true))
    for _, line in ipairs(reported) do -- the default logger's form
      assert.matches("^zklock: %a+: ", line)
    end
    zk:on_state(nil)
    srv:restart()
    H.wait_until(function() return zk:state() == "connected" end, 30,
      "reconnected")
    zk:dispatch()
    assert.equal(4, #order) -- nobody listens any more
    zk:close()
  end)

  it("refuses what is not a function", function()
    local zk = H.connect(srv)
    assert.has_error(function() zk:on_state(42) end,
      "bad argument #1 to 'on_state' (function or nil expected, got number)")
    zk:close()
  end)
end)
