-- What the lock cohort specs share (cohort_spec.lua, cohort_ends_spec.lua):
-- a describe block's server and two sessions on it, and the ways they
-- drive coroutines and watch the server.
local H = require "spec.helpers"

local C = {}

-- For a describe block: its server and sessions (given to `set` as they
-- are made), and helpers over them.  Call inside describe, then
-- lazy_setup(fx.setup), lazy_teardown(fx.teardown).
function C.fixture(set)
  local fx = {}
  local srv, zk, zk2

  function fx.setup()
    srv = H.testing.server({ min_session_timeout = 1000 })
    zk = H.connect(srv)
    zk2 = H.connect(srv)
    set(srv, zk, zk2)
  end
  function fx.teardown()
    if zk then zk:close() end
    if zk2 then zk2:close() end
    if srv then H.assert_no_orphans(srv); srv:close() end
  end

  -- the lock nodes under path, as the second session lists them
  function fx.nodes(path) return H.lock_nodes(zk2, path) end

  -- The server's last zxid (srvr): its write transactions so far, within
  -- one epoch.
  function fx.zxid()
    local hex = (srv:four_letter("srvr") or ""):match("Zxid: 0x(%x+)")
    return tonumber(hex, 16)
  end

  -- Two round trips on the session of `client` that run none of its
  -- callbacks (an op polled by hand): a watch event the server sent it
  -- before them has been handled after the first, and the read C sent on
  -- that event answered before the second.  So a revocation written (by
  -- another session) before is queued in C, its callback not run.
  function fx.settle(client)
    for _ = 1, 2 do
      local op = assert(client:_children("/zklock-spec", "all"))
      H.wait_until(function() return op:poll() == "done" end, 10,
        "a round trip")
    end
  end
  return fx
end

-- (inside H.run: wait for cond, yielding to the other coroutines)
function C.yield_until(cond, secs)
  local deadline = H.now() + (secs or 10)
  while not cond() do
    assert(H.now() < deadline, "timed out waiting for a condition")
    coroutine.yield()
  end
end

-- Coroutines driven by hand (not H.run: it resumes every one each round,
-- and each wait in them runs zk's callbacks): zklock's waits yield in a
-- coroutine, block in the main one.  Returns what puts the default
-- waiter back, for the spec's finally.
function C.by_hand()
  H.zklock.set_waiter(function(cl, gen, t)
    local co, ismain = coroutine.running()
    if co and not ismain then coroutine.yield() else cl:_wait(gen, t) end
  end)
  return function() H.zklock.set_waiter(nil) end
end

function C.step(co)
  local ok, err = coroutine.resume(co)
  if not ok then error(debug.traceback(co, err), 0) end
end

-- resume the coroutines until all have ended (bounded)
function C.finish(cos)
  H.wait_until(function()
    local live = false
    for _, co in ipairs(cos) do
      if coroutine.status(co) == "suspended" then C.step(co) end
      live = live or coroutine.status(co) ~= "dead"
    end
    return not live
  end, 30, "the coroutines to end")
end

return C
