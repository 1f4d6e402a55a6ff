-- Leader election under faults on a 3-member ensemble: 5 processes (Lua
-- 5.4 and LuaJIT) join one leader latch while the spec kills the leader
-- (SIGKILL), freezes one past the session timeout (SIGSTOP), and stops
-- and starts the ensemble's leader.  The terms in which has_leadership()
-- answered true never overlap, and every process that lives leads when
-- its turn comes; the checker is proven on a broken stand-in.
local H = require "spec.helpers"
local tcore = H.tcore

describe("leader election under faults", function()
  local cl
  local ST = 2 -- session timeout, seconds

  lazy_setup(function()
    cl = H.testing.cluster(3, { min_session_timeout = 1000 })
  end)
  lazy_teardown(function() H.end_cluster(cl) end)

  -- The workers: { p, log, killed_at }
  local function spawn(n, path, stop, broken, list)
    list = list or {}
    for _ = 1, n do
      local i = #list + 1
      local rt = H.runtimes()[(i - 1) % 2 + 1]
      local w = { log = H.tmpname("log"), id = "w" .. i }
      local args = { "spec/workers/leader.lua", cl.connect_string, path, w.id,
        w.log, stop, ST }
      if broken then args[#args + 1] = "broken" end
      w.p = H.spawn_lua(rt[1], rt[2], (table.unpack or unpack)(args))
      list[i] = w
    end
    return list
  end

  -- Terms { s, e, who }: "B t" opens one, "E t" closes it; a term left
  -- open by a SIGKILL ends at the kill; one left open otherwise: now.
  local function terms(list)
    local out = {}
    for _, w in ipairs(list) do
      local open
      for kind, t in (H.read(w.log) or ""):gmatch("(%u) (%S+)") do
        t = tonumber(t)
        if kind == "B" then open = t
        elseif open then out[#out + 1] = { open, t, w.id }; open = nil end
      end
      if open then out[#out + 1] = { open, w.killed_at or H.now(), w.id } end
    end
    return out
  end

  -- A worker leading now (an open term, alive, not `except`), or nil.
  local function leader(list, except)
    for _, w in ipairs(list) do
      if w ~= except and not w.killed_at and not w.p:status() then
        local last = (H.read(w.log) or ""):match("(%u) %S+\n$")
        if last == "B" then return w end
      end
    end
  end

  local function wait_leader(list, other_than, what)
    return H.wait_until(function() return leader(list, other_than) end, 60,
      what)
  end

  local function finish(list, stop)
    H.write(stop, "stop")
    for _, w in ipairs(list) do
      if not w.killed_at then
        local st = w.p:wait(120)
        assert.equal(0, st, w.id .. ": " .. tostring(w.p:output()))
      end
    end
  end

  it("5 processes; leader killed, frozen, ensemble leader restarted: " ..
     "one leader at a time, every living process leads", function()
    local path, stop = H.path("elect-faults"), H.tmpname("stop")
    local list = spawn(5, path, stop)
    local ok, err = pcall(function()
      -- 1. kill the leader; a new process takes its place
      local w = wait_leader(list, nil, "a first leader")
      w.killed_at = H.now()
      w.p:kill("KILL")
      spawn(1, path, stop, false, list)
      -- 2. freeze the next leader past the session timeout
      w = wait_leader(list, w, "a leader after the kill")
      w.p:kill("STOP")
      local frozen = w
      local ok2, err2 = pcall(wait_leader, list, w, "a leader while frozen")
      frozen.p:kill("CONT")
      assert(ok2, err2)
      -- 3. stop and start the ensemble's leader
      local zkleader = assert(cl:leader())
      zkleader:stop()
      tcore.sleep(ST)
      zkleader:start()
      assert(cl:wait_quorum(30))
      wait_leader(list, nil, "a leader after the restart")
      -- 4. kill the leader once more
      w = wait_leader(list, nil, "a leader")
      w.killed_at = H.now()
      w.p:kill("KILL")
      wait_leader(list, w, "a leader after the second kill")
    end)
    if not ok then
      for _, w in ipairs(list) do
        if not w.killed_at then w.p:kill("KILL") end
      end
    end
    assert(ok, err)
    finish(list, stop)
    local t = terms(list)
    local spans, led = {}, {}
    for i, x in ipairs(t) do spans[i] = { x[1], x[2] }; led[x[3]] = true end
    assert.equal(1, H.max_overlap(spans))
    for _, w in ipairs(list) do
      if not w.killed_at then
        assert.is_true(led[w.id], w.id .. " lived and never led")
      end
      w.p:cleanup()
      os.remove(w.log)
    end
    os.remove(stop)
  end)

  it("the checker catches two leaders at once", function()
    local path, stop = H.path("elect-broken"), H.tmpname("stop")
    local list = spawn(4, path, stop, true)
    for _, w in ipairs(list) do assert.equal(0, w.p:wait(120)) end
    local spans = {}
    for i, x in ipairs(terms(list)) do spans[i] = { x[1], x[2] } end
    assert.is_true(H.max_overlap(spans) > 1)
    for _, w in ipairs(list) do w.p:cleanup(); os.remove(w.log) end
  end)
end)
