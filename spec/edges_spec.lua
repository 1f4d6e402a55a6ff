-- The edges of every promise (issue "reliability" items, and "abandoned
-- waits"): each `it` names the item it guards and fails without its fix.
local H = require "spec.helpers"
local zklock = H.zklock
local core, tcore = H.core, H.tcore

-- Run a C op of zk to its end: its results (as op:result()).
local function op(zk, method, ...)
  local o, msg, code = zk[method](zk, ...)
  if not o then return nil, msg, code end
  assert(H.await(zk, o, core.now() + 10) == "done", method .. " hung")
  return o:result()
end

-- Run the callbacks zk has queued until `cond()` or 10 s.
local dispatch_until = H.dispatch_until

-- "user:base64(sha1(user:password))", the digest scheme's id
local function digest_id(user, password)
  local fh = assert(io.popen(("python3 -c 'import hashlib, base64, sys; " ..
    "u, p = sys.argv[1], sys.argv[2]; print(u + \":\" + base64.b64encode(" ..
    "hashlib.sha1((u + \":\" + p).encode()).digest()).decode())' %s %s")
    :format(user, password)))
  local id = fh:read("*l")
  fh:close()
  assert(id and id:find("^" .. user .. ":"), "python3 digest")
  return id
end

describe("edges", function()
  local srv, zk, zk2

  lazy_setup(function()
    srv = H.testing.server()
    zk = H.connect(srv)
    zk2 = H.connect(srv)
  end)
  lazy_teardown(function()
    if zk then zk:close() end
    if zk2 then zk2:close() end
    if srv then H.assert_no_orphans(srv); srv:close() end
  end)

  -- -------------------------------------------------------------------------
  describe("a node deleted by someone else (item 1)", function()
    it("ends a mutex hold: is_held false, on_lost, release lock_lost, " ..
       "and the next holder is alone", function()
      local path = H.path("foreign")
      local a, b = zk:mutex(path), zk2:mutex(path)
      local lost = 0
      a:on_lost(function(l)
        lost = lost + 1
        assert.is_false(l:is_held())
      end)
      assert(a:acquire(5))
      local before = zk:stats().lost
      assert(op(zk2, "_delete", a:node()))
      -- b gets it: the one who still believes must not
      assert.equal(b, b:acquire(5))
      H.wait_until(function() return not a:is_held() end, 10,
        "the old holder to notice")
      dispatch_until(zk, function() return lost == 1 end, "on_lost")
      assert.equal(before + 1, zk:stats().lost)
      local ok, msg, code = a:release()
      assert.is_nil(ok)
      assert.equal("lock_lost", code)
      assert.is_string(msg)
      assert.is_true(b:is_held())
      b:release()
      -- and the lock object works again
      assert.equal(a, a:acquire(5))
      assert.is_true(a:release())
    end)

    it("ends a semaphore lease and a read/write hold", function()
      local spath, rpath = H.path("foreign-sem"), H.path("foreign-rw")
      local lease = assert(zk:semaphore(spath, 1):acquire(5))
      local rw = zk:rwlock(rpath)
      assert(rw.write:acquire(5))
      local wnode = rw.write:node()
      assert(op(zk2, "_delete", lease:node()))
      assert(op(zk2, "_delete", wnode))
      H.wait_until(function()
        return not lease:is_held() and not rw.write:is_held()
      end, 10, "lease and write hold to end")
      assert.equal("lock_lost", select(3, lease:release()))
      assert.equal("lock_lost", select(3, rw.write:release()))
      local other = zk2:rwlock(rpath)
      assert(other.write:acquire(5))
      other.write:release()
    end)

    it("re-queues a waiter whose own node went (issue 16 item 5)", function()
      local path = H.path("foreign-waiter")
      local holder, waiter = zk2:mutex(path), zk:mutex(path)
      assert(holder:acquire(5))
      local got, node_before, held, node_after
      H.run(zk, { function()
        got = { waiter:acquire(20) }
        held, node_after = waiter:is_held(), waiter:node()
        waiter:release()
      end }, 30,
        function()
          local parts = holder:participants()
          if not node_before and #parts == 2 then
            node_before = parts[2]
            assert(op(zk2, "_delete", node_before)) -- not by its owner
          elseif node_before and #parts == 2 and parts[2] ~= node_before and
              holder:is_held() then
            holder:release() -- it queued again: now let it in
          end
        end)
      assert.equal(waiter, got[1])
      assert.is_true(held)
      assert.are_not.equal(node_before, node_after)
    end)
  end)

  -- -------------------------------------------------------------------------
  describe("ACLs (item 2)", function()
    local function connect(opts)
      opts.session_timeout = 5
      return assert(zklock.connect(srv.connect_string, opts))
    end

    it("'read' does not lock out its own users; others may only look",
        function()
      local path = H.path("acl-read")
      local u1 = connect({ acl = "read", auth = { "digest", "r1:pw" } })
      local u1b = connect({ acl = "read", auth = { "digest", "r1:pw" } })
      local m = u1:mutex(path)
      assert.equal(m, m:acquire(5)) -- the first one creates the directory
      assert.is_true(m:release())
      local m2 = u1b:mutex(path)     -- the same user, another session
      assert.equal(m2, m2:acquire(5))
      -- anyone may read the queue, nobody else may queue, delete or write
      local anon = zk:mutex(path)
      assert.equal(1, #anon:participants())
      local ok, _, code = anon:acquire(1)
      assert.is_nil(ok)
      assert.equal("no_auth", code)
      assert.equal("no_auth", select(3, op(zk, "_delete", m2:node())))
      assert.equal("no_auth", select(3, op(zk, "_set", m2:node(), "x")))
      assert.is_true(m2:is_held())
      assert.is_true(m2:release())
      assert.equal(m, m:acquire(5)) -- still usable after all that
      m:release()
      u1:close(); u1b:close()
    end)

    it("'creator': a session without the credentials cannot delete or " ..
       "write a lock node", function()
      local path = H.path("acl-creator")
      local u = connect({ acl = "creator", auth = { "digest", "c1:pw" } })
      local m = u:mutex(path)
      assert(m:acquire(5))
      local node = m:node()
      assert.equal("no_auth", select(3, op(zk, "_delete", node)))
      assert.equal("no_auth", select(3, op(zk, "_set", node, "__REVOKE__")))
      assert.equal("no_auth", select(3, op(zk, "_delete", path)))
      assert.is_true(m:is_held())
      assert.is_true(m:release())
      u:close()
    end)

    it("a list: two digest users share one lock, a third is kept out",
        function()
      local path = H.path("acl-list")
      local acl = {
        { "digest", digest_id("alice", "a-pw"), "cdrwa" },
        { "digest", digest_id("bob", "b-pw"), "cdrwa" },
      }
      local a = connect({ acl = acl, auth = { "digest", "alice:a-pw" } })
      local b = connect({ acl = acl, auth = { "digest", "bob:b-pw" } })
      local eve = connect({ auth = { "digest", "eve:e-pw" } })
      local ma, mb = a:mutex(path), b:mutex(path)
      assert(ma:acquire(5))
      local order = {}
      H.run(b, { function()
        assert(mb:acquire(20))
        order[#order + 1] = "bob"
        mb:release()
      end }, 30, function()
        if #order == 0 and #ma:participants() == 2 and ma:is_held() then
          order[#order + 1] = "alice"
          ma:release()
        end
      end)
      assert.same({ "alice", "bob" }, order)
      assert(ma:acquire(5))
      assert.equal("no_auth", select(3, op(eve, "_delete", ma:node())))
      assert.equal("no_auth", select(3, op(eve, "_set", ma:node(), "x")))
      assert.equal("no_auth", select(3, eve:mutex(path):acquire(1)))
      assert.is_true(ma:release())
      a:close(); b:close(); eve:close()
    end)

    it("bad ACL options are argument errors", function()
      for _, opts in ipairs({
        { acl = "creator" },                       -- names nobody
        { acl = {} }, { acl = { { "digest", "x" } } },
        { acl = { { "world", "anyone", "rwxyz" } } }, { acl = 5 },
      }) do
        assert.has_error(function() zklock.connect(srv.connect_string, opts) end)
      end
    end)
  end)

  -- -------------------------------------------------------------------------
  it("a double barrier collected while entered, across a connection " ..
     "blip, still deletes its member node (item 3)", function()
    local proxy = H.testing.proxy(srv)
    local ok, err = pcall(function()
      local pz = assert(zklock.connect(proxy:connect_string(),
        { session_timeout = 20 }))
      local sid = pz:session_id()
      local path = H.path("ghost")
      local db = pz:double_barrier(path, 1)
      local function members()
        local n = 0
        for _, name in ipairs(H.children(zk, path)) do
          if name ~= "ready" then n = n + 1 end
        end
        return n
      end
      assert.is_true(db:enter(5))
      assert.equal(1, members())
      proxy:stall(true, false) -- the delete goes nowhere...
      db = nil -- luacheck: ignore
      -- its __gc sends the delete; the op doing it is collected too (the
      -- old code then forgot it): several full cycles
      for _ = 1, 4 do collectgarbage() end
      proxy:cut()              -- ...and is cut
      proxy:stall(false, false)
      H.wait_until(function() return members() == 0 end, 15,
        "the member node to go")
      assert.equal(sid, pz:session_id()) -- (not by the session's end)
      pz:close()
    end)
    proxy:close()
    assert(ok, err)
  end)

  -- -------------------------------------------------------------------------
  describe("bad input (items 6, 7, 8)", function()
    it("data over max_data is an argument error, and nothing is sent",
        function()
      local path = H.path("big")
      local big = string.rep("x", 1024 * 1024)
      assert.has_error(function() zk:set(path, big) end)
      local ok, err = pcall(zk.set, zk, path, big)
      assert.is_false(ok)
      assert.matches("bad argument #2 to 'set' %(data of 1048576 bytes is " ..
        "over the client's limit", err)
      local m = zk:mutex(H.path("big-lock"))
      assert(m:acquire(5))
      assert.has_error(function() m:fenced_set(path, big) end)
      m:release()
      assert.has_error(function() zk:_set(path, big) end)  -- the C layer too
      assert.has_error(function() zk:_create(path, big) end)
      -- the default limit fits the server's (jute.maxbuffer, 1 MiB)
      local most = string.rep("y", 1024 * 1024 - 8192)
      assert.is_true(zk:set(path, most, 10))
      assert.equal(#most, #zk:get(path))
      -- configurable per client
      local small = assert(zklock.connect(srv.connect_string,
        { max_data = 10 }))
      assert.has_error(function() small:set(path, "12345678901") end)
      assert.is_true(small:set(path, "1234567890"))
      small:close()
      assert.is_true(op(zk, "_delete", path))
      -- the session was never cut: every request went through
      assert.equal("connected", zk:state())
    end)

    it("counts of 2^31 and more are refused", function()
      local p = H.path("count")
      for _, n in ipairs({ 2 ^ 31, 2 ^ 32, 2 ^ 53, math.huge }) do
        assert.has_error(function() zk:double_barrier(p, n) end)
        assert.has_error(function() zk:semaphore(p, n) end)
        assert.has_error(function() zk:_lock(p, "lease", n) end)
        assert.has_error(function() zk:_db("enter", p, p .. "/x", n) end)
      end
      assert.truthy(zk:semaphore(p, 2 ^ 31 - 1))
    end)

    it("the C entry points check what they dereference", function()
      for _, f in ipairs({
        function() zk:_db("leave", "/dir", "x") end,
        function() zk:_db("leave", "/dir", "/other/x") end,
        function() zk:_db("enter", "/dir", "/dir/a/b") end,
        function() zk:_lock("") end,
        function() zk:_lock("/") end,
        function() zk:_lock("a/b") end,
        function() zk:_lock("/a//b") end,
        function() zk:_lock("/a\0b") end,
        function() zk:_lock("/" .. string.rep("a", 5000)) end,
        function() zk:_lock("/a", "mutex", 0) end,
        function() zk:_lock("/a", "read", 1, "", "x/y") end,
        function() zk:_children("") end,
        function() zk:_get("x") end,
        function() zk:_delete("/a/") end,
        function() zk:_wait_gone("/a/..") end,
        function() zk:_fenced("/a", "b", "c") end,
        -- (the C client's multi-op freed such a path twice: found by the
        -- fuzz spec under ASan)
        function() zk:_fenced("/a\1", "/b", "c") end,
        function() zk:_fenced("/a", "/b\127", "c") end,
        function() zk:mutex("/a\31b") end,
        function() zk:_wait(0, 0 / 0) end,
        function() core.connect("127.0.0.1:1", -5) end,
        function() core.connect("127.0.0.1:1", 1000, 7) end,
        function() tcore.four_letter("127.0.0.1", 70000, "ruok") end,
      }) do
        assert.has_error(f)
      end
      assert.equal("connected", zk:state())
    end)
  end)

  -- -------------------------------------------------------------------------
  describe("no watch left on a node that is gone (item 14)", function()
    local function watched(client, prefix)
      local n = 0
      for _, p in ipairs(H.watches_by_session(srv)[client:session_id()] or {})
      do
        if p:sub(1, #prefix) == prefix then n = n + 1 end
      end
      return n
    end

    it("barrier wait on an absent barrier, double-barrier leave, and a " ..
       "timed-out enter", function()
      local wz = H.connect(srv) -- a fresh session: its watches only
      local bpath, dpath, epath = H.path("nw-b"), H.path("nw-d"),
        H.path("nw-e")
      assert.is_true(wz:barrier(bpath):wait(5))
      -- two members; the second leaves first and waits for the first
      local d1, d2 = zk:double_barrier(dpath, 2), wz:double_barrier(dpath, 2)
      H.run(zk, { function() assert(d1:enter(10)) end,
                  function() assert(d2:enter(10)) end }, 20)
      H.run(zk, { function() assert(d2:leave(10)) end,
                  function() assert(d1:leave(10)) end }, 20)
      local e = wz:double_barrier(epath, 2)
      assert.equal("timeout", select(3, e:enter(0.2)))
      -- (wchc: what the server holds; a removal answers before the check)
      assert.is_true(wz:barrier(bpath):wait(5)) -- a round trip after
      local left = H.watches_by_session(srv)[wz:session_id()] or {}
      assert.equal(0, watched(wz, bpath), table.concat(left, " "))
      assert.equal(0, watched(wz, dpath), table.concat(left, " "))
      assert.equal(0, watched(wz, epath), table.concat(left, " "))
      wz:close()
    end)
  end)

  -- -------------------------------------------------------------------------
  describe("abandoned waits leave the queue at once (issue 16 item 1)",
      function()
    local function queued_then(abandon)
      local path = H.path("abandon")
      local holder, m = zk2:mutex(path), zk:mutex(path)
      assert(holder:acquire(5))
      collectgarbage("stop") -- "at once" means without a collection
      local ok, err = pcall(function()
        abandon(m, holder)
        H.wait_until(function() return #holder:participants() == 1 end, 5,
          "the abandoned node to go")
      end)
      collectgarbage("restart")
      assert(ok, err)
      holder:release()
      -- a third session gets the lock at once: nobody else holds it
      local third = H.connect(srv)
      local t = third:mutex(path)
      assert.equal(t, t:acquire(3))
      t:release()
      third:close()
    end

    it("an error raised out of the waiter", function()
      queued_then(function(m)
        zklock.set_waiter(function(c, gen, t, obj)
          -- (queued: behind the holder, watching it)
          if obj and obj.poll and obj:poll() == "waiting" then
            error("cancelled!")
          end
          c:_wait(gen, t)
        end)
        local ok, err = pcall(m.acquire, m, 30)
        zklock.set_waiter(nil)
        assert.is_false(ok)
        assert.matches("cancelled!", err)
        assert.is_false(m:is_held())
      end)
    end)

    if H.is54 then
      it("coroutine.close() of the waiting coroutine (Lua 5.4)", function()
        queued_then(function(m, holder)
          zklock.set_waiter(function(c, gen, t)
            if coroutine.isyieldable() then coroutine.yield()
            else c:_wait(gen, t) end
          end)
          local co = coroutine.create(function() return m:acquire(30) end)
          H.wait_until(function()
            assert(coroutine.resume(co))
            return #holder:participants() == 2
          end, 10, "the waiter to queue")
          zklock.set_waiter(nil)
          assert.is_true(coroutine.close(co))
        end)
      end)
    end
  end)

  -- -------------------------------------------------------------------------
  it("a multilock release releases every member even when one fails " ..
     "(issue 16 item 2)", function()
    local pa, pb = H.path("mlA"), H.path("mlB")
    local A, B = zk:mutex(pa), zk:mutex(pb)
    B:on_revoke(function(l) l:release() end)
    local ml = zk:multilock({ A, B })
    assert.equal(ml, ml:acquire(5))
    assert.equal(1, zklock.revoke(zk2, pb))
    dispatch_until(zk, function() return not B:is_held() end, "revocation")
    local ok, msg, code = ml:release()
    assert.is_nil(ok)
    assert.equal("lock_lost", code)
    assert.matches(pb, msg, 1, true)
    assert.is_false(A:is_held())
    local other = zk2:mutex(pa)
    assert.equal(other, other:acquire(3)) -- A is free
    other:release()
    assert.equal(ml, ml:acquire(5))       -- and the multilock works again
    assert.is_true(ml:release())
  end)

  -- -------------------------------------------------------------------------
  it("rw.read and rw.write list the nodes of their own kind (issue 16 " ..
     "item 3, Curator testGetParticipantNodes)", function()
    local path = H.path("rwparts")
    local readers, writers = {}, {}
    for i = 1, 6 do
      readers[i] = zk:rwlock(path)
      assert(readers[i].read:acquire(5))
    end
    local fns = {}
    for i = 1, 3 do
      writers[i] = zk2:rwlock(path, { cohort = false }) -- (a node each)
      fns[i] = function()
        assert(writers[i].write:acquire(20))
        writers[i].write:release()
      end
    end
    local counted
    H.run(zk2, fns, 30, function()
      if not counted and #readers[1]:participants() == 9 then
        counted = { #readers[1].read:participants(),
                    #readers[1].write:participants() }
        for i = 1, 6 do readers[i].read:release() end
      end
    end)
    assert.same({ 6, 3 }, counted)
  end)
end)
