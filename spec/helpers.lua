-- Shared set-up for the specs: real servers from zklock.testing, clients,
-- worker processes, bounded waits, and the orphan check.
local zklock = require "zklock"
local core = require "zklock.core"
local tcore = require "zklock.testing.core"
local wait = require "zklock.rt.wait"
local testing = require "zklock.testing"

local H = {}

H.now = core.now
--- The interpreter running this suite, for worker processes.
H.lua = os.getenv("ZKLOCK_LUA") or (jit and "luajit" or "lua5.4")

--- Both runtimes, for specs that mix them: { lua, cpath } each; under a
-- sanitizer (LD_PRELOAD) only this one, with its own build.
function H.runtimes()
  local own = { H.lua, os.getenv("LUA_CPATH") or package.cpath }
  if os.getenv("LD_PRELOAD") then return { own, own } end
  return { { "lua5.4", "./build/lua5.4/?.so" },
    { "luajit", "./build/luajit/?.so" } }
end
H.is54 = _VERSION == "Lua 5.4"
--- PUC Lua 5.1 (make test-compat; LuaJIT also says "Lua 5.1"), where a
-- coroutine cannot yield across pcall (docs/compatibility.md, "Lua
-- versions").
H.puc51 = _VERSION == "Lua 5.1" and not jit
--- busted's `it`, or under PUC Lua 5.1, where a wait inside zklock cannot
-- yield (a language limit, documented), one that leaves the spec out.
function H.it_yields(it)
  if not H.puc51 then return it end
  return function() end
end

local TMP = os.getenv("ZKLOCK_TEST_TMP") or "/tmp"

--- Sleep without busy-waiting (used only inside bounded polling loops).
function H.nap(s)
  tcore.sleep(s or 0.05) -- (not os.execute: a run spawns enough processes
                        -- already for pids to wrap around)
end

--- A spec of a known zklock bug (docs/testing.md): pending with its
-- reason (busted's `it` and `pending` passed in: its globals reach spec
-- files only); run, and failing until fixed, with
-- ZKLOCK_SPEC_KNOWN_BUGS=1.
function H.known_bug(it, pending, reason, name, fn)
  if os.getenv("ZKLOCK_SPEC_KNOWN_BUGS") == "1" then
    it(name .. " (known bug: " .. reason .. ")", fn)
  else
    pending(reason .. ": " .. name)
  end
end

--- Run zk's callbacks (zk:dispatch()) until cond() holds; error after 10 s.
function H.dispatch_until(zk, cond, what)
  H.wait_until(function()
    zk:dispatch()
    return cond()
  end, 10, what)
end

--- Poll fn until it returns a truthy value; error after timeout seconds.
function H.wait_until(fn, timeout, what)
  local deadline = core.now() + (timeout or 10)
  while true do
    local v = fn()
    if v then return v end
    if core.now() > deadline then
      error("timed out waiting for " .. (what or "a condition"), 2)
    end
    H.nap(0.02)
  end
end

function H.connect(srv, opts)
  if type(srv) == "string" then
    return assert(zklock.connect(srv, opts or { session_timeout = 5 }))
  end
  -- a TLS or SASL server of zklock.testing: with its client settings
  return assert(zklock.connect(srv.connect_string, opts or
    { session_timeout = 5, tls = srv.tls, sasl = srv.sasl }))
end

-- busted loads this file afresh for every spec file (insulation), so a
-- counter alone would hand out the same names again in the next file: the
-- names carry a random tag of this load as well.
local seq = 0
local LOAD = core.uuid():sub(1, 8)

--- A fresh lock path per test, so tests never see each other's nodes.
function H.path(name)
  seq = seq + 1
  return ("/zklock-spec/%s/%d-%s-%d"):format(name or "lock", core.pid(), LOAD,
    seq)
end

--- A fresh temp file name under the run's temp dir.
function H.tmpname(tag)
  seq = seq + 1
  return ("%s/zklock-%s-%d-%s-%d"):format(TMP, tag or "f", core.pid(), LOAD,
    seq)
end

function H.read(file)
  local fh = io.open(file)
  if not fh then return nil end
  local s = fh:read("*a")
  fh:close()
  return s
end

function H.write(file, s)
  local fh = assert(io.open(file, "w"))
  fh:write(s)
  fh:close()
end

--- Children of a path (every child, unsorted), or {} when it is missing.
function H.children(zk, path)
  local op = assert(zk:_children(path, "all"))
  assert(wait.await(zk, op, core.now() + 10) == "done")
  local names, msg, code = op:result()
  if not names then error(msg .. " " .. code) end
  return names
end

--- Whether a node name is a lock node (mutex, lease and rw markers alike).
function H.is_lock_node(name)
  return (name:find("%-lock%-") or name:find("__lock__") or
    name:find("%-lease%-") or name:find("__READ__") or
    name:find("__WRIT__")) ~= nil
end

--- Lock nodes under path (recursively, mutex/lease/rw markers alike).
-- A directory this session may not read (an ACL spec's) is skipped: those
-- specs check their own nodes are gone.
function H.lock_nodes(zk, path, out)
  out = out or {}
  local op = assert(zk:_children(path, "all"))
  assert(wait.await(zk, op, core.now() + 10) == "done")
  local names, msg, code = op:result()
  if not names and code ~= "no_auth" then error(msg .. " " .. code) end
  for _, name in ipairs(names or {}) do
    local full = path .. "/" .. name
    if H.is_lock_node(name) then
      out[#out + 1] = full
    end
    H.lock_nodes(zk, full, out)
  end
  return out
end

--- Assert that no lock node is left anywhere under the specs' root: run in
-- every spec file's teardown, with a fresh session, so a node kept alive by
-- a still-open client counts as an orphan too.
function H.assert_no_orphans(srv)
  local zk = H.connect(srv)
  local left = H.lock_nodes(zk, "/zklock-spec")
  zk:close()
  assert(#left == 0, "orphan lock nodes: " .. table.concat(left, ", "))
end

-- A describe block's standalone server and two sessions on it, as the
-- functions for its lazy_setup and lazy_teardown (busted's globals reach
-- spec files only): `up(srv, zk, zk2)` receives them; the teardown checks
-- that no lock node is left (and runs `check(srv)`, if given), then
-- closes them.  `opts`: the server's (testing.server).
function H.fixture(up, check, opts)
  local srv, zk, zk2
  local function setup()
    srv = H.testing.server(opts)
    zk = H.connect(srv)
    zk2 = H.connect(srv)
    up(srv, zk, zk2)
  end
  local function teardown()
    local ok, err = true, nil
    if srv then
      ok, err = pcall(function()
        H.assert_no_orphans(srv)
        if check then check(srv) end
      end)
    end
    if zk then zk:close() end
    if zk2 then zk2:close() end
    if srv then srv:close() end
    if not ok then error(err, 0) end
  end
  return setup, teardown
end

-- A connect that fails: what it returned, and how long it took (the
-- connect timeout defaults to 30 s).  TLS verdicts come in about a second;
-- the specs assert "before the connect timeout" (under valgrind a
-- handshake takes seconds, and a retry may be needed).
function H.failing_connect(hosts, opts)
  opts.connect_timeout = opts.connect_timeout or 30
  local t0 = H.now()
  local c, msg, code = zklock.connect(hosts, opts)
  if c then c:close() end
  return c, msg, code, H.now() - t0
end

-- A connect with `opts` fails with code tls, a message that holds `says`,
-- within `within` seconds.
function H.fails_tls(hosts, opts, says, within)
  local c, msg, code, took = H.failing_connect(hosts, opts)
  -- (plain asserts: this file is loaded outside busted too)
  assert(c == nil, "connected")
  assert(code == "tls", ("code %s, not tls: %s"):format(tostring(code),
    tostring(msg)))
  assert(tostring(msg):find(says, 1, true), ("message %q does not hold %q")
    :format(tostring(msg), says))
  assert(took < within, "took " .. took)
end

-- A describe block's ensemble at its end: settled again (a spec may have
-- stopped a member), no lock node left, then closed, even when a check
-- failed (which is raised after).
function H.end_cluster(cl)
  if not cl then return end
  local ok, err = pcall(function()
    assert(cl:wait_quorum(30))
    H.assert_no_orphans(cl)
  end)
  cl:close()
  if not ok then error(err, 0) end
end

function H.ephemerals(srv)
  local out = {}
  local text = srv:four_letter("dump") or ""
  for line in text:gmatch("[^\n]+") do
    local p = line:match("^%s+(/%S*)")
    if p then out[#out + 1] = p end
  end
  return out
end

-- ---------------------------------------------------------------------------
-- worker processes

local Proc = {}
Proc.__index = Proc

-- Start time (field 22 of /proc/PID/stat) of a live process, else nil:
-- tells the wrapper we spawned from a later process that got its pid.
local function started_at(pid)
  local state, started = H.testing._proc_stat(pid)
  if state == "Z" or state == "X" then return nil end
  return started
end

local function new_proc(pid, done, out)
  return setmetatable({ pid = pid, started = started_at(pid), done = done,
    out = out }, Proc)
end

--- Start `H.lua script args...` in the background; its exit status lands
-- in a file, so waiting never depends on who reaps it.
function H.spawn(script, ...)
  return H.spawn_lua(H.lua, os.getenv("LUA_CPATH") or package.cpath, script,
    ...)
end

--- H.spawn with another interpreter and cpath.
function H.spawn_lua(lua, cpath, script, ...)
  local args = { script }
  for i = 1, select("#", ...) do
    args[#args + 1] = ("'%s'"):format(tostring((select(i, ...))))
  end
  local done = H.tmpname("done")
  local out = H.tmpname("out")
  local cmd = ("LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' LUA_CPATH='%s' " ..
    "%s %s >%s 2>&1; echo \\$? >%s"):format(cpath, lua,
    table.concat(args, " "), out, done)
  local fh = assert(io.popen(("sh -c \"%s\" >/dev/null 2>&1 & echo $!"):format(
    cmd:gsub('"', '\\"'))))
  local pid = tonumber(fh:read("*l"))
  fh:close()
  return new_proc(pid, done, out)
end

--- Start any program in the background: `H.spawn_cmd(prog, args...)`,
-- e.g. a Java or Python peer. `prog` is taken as shell words (a command
-- with its options); each arg is single-quoted, so it must not hold quotes.
-- Same handle as `H.spawn` (status, wait, output, kill, cleanup).
function H.spawn_cmd(prog, ...)
  local args = { prog }
  for i = 1, select("#", ...) do
    local a = tostring((select(i, ...)))
    assert(not a:find("['\"$`\\]"), "unquotable argument: " .. a)
    args[#args + 1] = ("'%s'"):format(a)
  end
  local done = H.tmpname("done")
  local out = H.tmpname("out")
  local cmd = ("%s >%s 2>&1; echo \\$? >%s"):format(
    table.concat(args, " "), out, done)
  local fh = assert(io.popen(("sh -c \"%s\" >/dev/null 2>&1 & echo $!"):format(
    cmd)))
  local pid = tonumber(fh:read("*l"))
  fh:close()
  return new_proc(pid, done, out)
end

--- Exit status once finished, else nil.
function Proc:status()
  local s = H.read(self.done)
  return s and tonumber(s:match("%d+"))
end

function Proc:wait(timeout)
  return H.wait_until(function() return self:status() end, timeout,
    "worker " .. tostring(self.pid))
end

function Proc:output() return H.read(self.out) or "" end

--- Signal the worker's interpreter (the child of the sh wrapper), if the
-- wrapper still runs: once it has exited its pid may belong to anyone.
function Proc:kill(sig)
  if not self.started or started_at(self.pid) ~= self.started then return end
  -- (LD_PRELOAD= : procps under make asan's preloaded libasan hangs)
  os.execute(("LD_PRELOAD= pkill -%s -P %d >/dev/null 2>&1"):format(sig or "KILL",
    self.pid))
end

function Proc:cleanup()
  if not self:status() then
    self:kill("KILL")
    -- the wrapper writes the status file once it sees its child die: wait
    -- for that (bounded), or it would write it after we removed it
    if self.started then pcall(self.wait, self, 10) end
  end
  os.remove(self.done)
  os.remove(self.out)
end

-- ---------------------------------------------------------------------------
-- a small cooperative scheduler: waits inside zklock yield to it

--- Run coroutines whose zklock waits yield, until all finish or timeout.
-- `tick()` (optional) runs between rounds and may return true to stop.
function H.run(client, fns, timeout, tick)
  local cos = {}
  for i, fn in ipairs(fns) do cos[i] = coroutine.create(fn) end
  zklock.set_waiter(function(c, gen, t)
    local co, ismain = coroutine.running()
    if co and not ismain then coroutine.yield() else c:_wait(gen, t) end
  end)
  local deadline = core.now() + (timeout or 20)
  local ok, err = pcall(function()
    while true do
      local live = 0
      local _, gen = client:_poll()
      for i, co in ipairs(cos) do
        if coroutine.status(co) == "suspended" then
          local okr, e = coroutine.resume(co)
          if not okr then error(debug.traceback(co, e), 0) end
        end
        if coroutine.status(cos[i]) ~= "dead" then live = live + 1 end
      end
      if live == 0 then return end
      if tick and tick() then return end
      if core.now() > deadline then error("coroutines did not finish", 0) end
      client:_wait(gen, 0.05)
    end
  end)
  zklock.set_waiter(nil)
  if not ok then error(err, 2) end
  return cos
end

--- Watches the server holds, from the `wchc` four-letter word:
-- { [session id "0x..."] = { path, ... } }.
function H.watches_by_session(srv)
  local out, cur = {}, nil
  local text = srv:four_letter("wchc") or ""
  for line in text:gmatch("[^\n]+") do
    local sid = line:match("^(0x%x+)")
    if sid then
      cur = {}
      out[sid] = cur
    else
      local p = line:match("^%s+(/%S*)")
      if p and cur then cur[#cur + 1] = p end
    end
  end
  return out
end

--- Is list (an array) holding x?
function H.contains(list, x)
  for _, v in ipairs(list) do if v == x then return true end end
  return false
end

--- Does session c hold a watch on path on srv?  (Ask with a fresh session:
-- wchc shows every watch of it, stray ones too.)
function H.watching(srv, c, path)
  local w = H.watches_by_session(srv)[c:session_id()]
  return w ~= nil and H.contains(w, path)
end

--- Intervals { {start, end}, ... }: the largest number that overlap at any
-- instant (an interval ending when another starts does not overlap it).
--- The intervals "<start> <end>" logged one per line in each of `files`
-- (the exclusion checker's workers): { { start, end }, ... }.
function H.intervals(files)
  local out = {}
  for _, file in ipairs(files) do
    for a, b in (H.read(file) or ""):gmatch("(%S+) (%S+)") do
      out[#out + 1] = { tonumber(a), tonumber(b) }
    end
  end
  return out
end

function H.max_overlap(intervals)
  local ev = {}
  for _, iv in ipairs(intervals) do
    ev[#ev + 1] = { iv[1], 1 }
    ev[#ev + 1] = { iv[2], -1 }
  end
  table.sort(ev, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2] -- ends before starts at the same instant
  end)
  local cur, max = 0, 0
  for _, e in ipairs(ev) do
    cur = cur + e[2]
    if cur > max then max = cur end
  end
  return max
end

-- ---------------------------------------------------------------------------
-- a holder frozen past its session timeout (spec/workers/lost.lua)

local function parse_report(text)
  local t = {}
  for k, v in (text or ""):gmatch("([%w_]+)=([^\n]*)") do t[k] = v end
  return t
end

--- A report as one line "k=v k=v ...", sorted, for assertion messages.
function H.report_text(r)
  local t = {}
  for k, v in pairs(r) do t[#t + 1] = k .. "=" .. tostring(v) end
  table.sort(t)
  return table.concat(t, " ")
end

--- What H.freeze_holder's report must say, with and without renewal.
H.FROZEN_REPORT = {
  [true] = { lost_calls = "1", held_in_cb = "false", fenced = "lock_lost",
    release = "lock_lost", reacquire = "ok", new_session = "true",
    new_token_higher = "true", renewed = "1" },
  [false] = { lost_calls = "1", fenced = "lock_lost", release = "lock_lost",
    reacquire = "session_expired", state = "expired", renewed = "0" },
}

--- Freeze a holder process (SIGSTOP) past its session timeout while this
-- process takes the lock and makes a fenced write, then resume it; returns
-- the worker's report ("key=value" lines as a table).  `srv`: a server or
-- a cluster.
function H.freeze_holder(srv, renew)
  local path, fpath = H.path("lost"), H.path("fenced")
  local ready, result = H.tmpname("ready"), H.tmpname("result")
  local st = 2
  local p = H.spawn("spec/workers/lost.lua", srv.connect_string, path,
    ready, result, st, renew and "1" or "0", fpath)
  local report, waiter_token, fenced_by_waiter
  local ok, err = pcall(function()
    -- (the file may be seen created but not yet written: wait for the
    -- token itself)
    local holder_token = H.wait_until(function()
      return tonumber(H.read(ready) or "") end, 30, "holder ready")
    local zk = H.connect(srv)
    local m = zk:mutex(path)
    p:kill("STOP")
    -- the server expires the frozen one
    assert(m:acquire(30) == m, "waiter did not get the lock")
    waiter_token = m:token()
    assert(waiter_token > holder_token, "token did not grow")
    fenced_by_waiter = { m:fenced_set(fpath, "waiter") }
    -- stay frozen a while after the expiry, then resume while we hold
    H.nap(0.5)
    p:kill("CONT")
    local rc = p:wait(60)
    assert(rc == 0, "worker exited " .. rc .. ": " .. p:output())
    report = parse_report(H.read(result))
    assert(m:is_held(), "waiter lost the lock")
    assert(zk:get(fpath) == "waiter", "the fenced data is not the waiter's")
    m:release()
    zk:close()
  end)
  p:kill("CONT")
  p:cleanup()
  os.remove(ready)
  os.remove(result)
  assert(ok, err)
  assert(type(fenced_by_waiter[1]) == "number", "waiter's fenced write: " ..
    tostring(fenced_by_waiter[2]))
  return report
end

-- ---------------------------------------------------------------------------
-- worker processes that start together behind a gate file

--- Start one worker per entry of `jobs` ({ script, args... }, where the
-- strings "$LOG" and "$GATE" are replaced), open the gate, wait for all
-- (bounded), and return the text each logged.
function H.run_workers(jobs, timeout)
  local gate = H.tmpname("gate")
  local procs, logs = {}, {}
  for i, job in ipairs(jobs) do
    logs[i] = H.tmpname("log")
    local args = {}
    for j = 2, #job do
      local a = job[j]
      if a == "$LOG" then a = logs[i] elseif a == "$GATE" then a = gate end
      args[#args + 1] = a
    end
    procs[i] = H.spawn(job[1], (table.unpack or unpack)(args))
  end
  H.write(gate, "go")
  local texts = {}
  local ok, err = pcall(function()
    for i, p in ipairs(procs) do
      local status = p:wait(timeout or 60)
      assert(status == 0, ("worker %d (%s) failed: %s"):format(i, jobs[i][1],
        p:output()))
    end
  end)
  for i, p in ipairs(procs) do
    texts[i] = H.read(logs[i]) or ""
    p:cleanup()
    os.remove(logs[i])
  end
  os.remove(gate)
  if not ok then error(err, 2) end
  return texts
end

--- The Prometheus text `text` as the reference parser (Debian's
-- python3-prometheus-client, spec/tools/prom_parse.py) reads it:
-- "name{label=value,...}" -> { type =, value = }.  Fails if it refuses it.
function H.parse_prometheus(text)
  local input, out = H.tmpname("prom"), H.tmpname("parsed")
  H.write(input, text)
  local p = H.spawn_cmd("/usr/bin/python3", "spec/tools/prom_parse.py",
    input, out)
  local status = p:wait(60)
  local parsed, output = H.read(out), p:output()
  p:cleanup()
  os.remove(input)
  os.remove(out)
  assert(status == 0, "the Prometheus parser refused the text: " .. output)
  local samples = {}
  for typ, name, labels, value in
      parsed:gmatch("(%S+) ([%w_]+){(.-)} (%S+)\n") do
    samples[name .. "{" .. labels .. "}"] =
      { type = typ, value = tonumber(value) }
  end
  return samples
end

H.testing = testing
H.zklock = zklock
H.core = core
H.tcore = tcore
--- zklock's internal wait: await(client, obj, deadline) polls obj (a C op)
-- until it is done or the deadline passes.
H.await = wait.await
-- ---------------------------------------------------------------------------
-- the docs' code blocks, run as written (quickstart_spec, server_docs_spec)

local function shquote(s) return "'" .. s:gsub("'", [['\'']]) .. "'" end
H.shquote = shquote

--- `sh -c cmd` from the project's root, bounded: its output (stdout and
-- stderr) and exit status (124: timed out)
function H.sh(cmd, timeout)
  local p = assert(io.popen(("timeout %d sh -c %s 2>&1; echo \"rc=$?\"")
    :format(timeout or 60, shquote(cmd))))
  local out = p:read("*a")
  p:close()
  local text, rc = out:match("^(.-)rc=(%d+)%s*$")
  return text, tonumber(rc)
end

--- The fenced `lang` block that follows the line `heading` of `file`,
-- first or `nth`, as written ("" for a block that names no language).
function H.doc_block(file, heading, lang, nth)
  local text = assert(H.read(file))
  local at = assert(text:find("\n" .. heading .. "\n", 1, true),
    file .. ": no " .. heading)
  local found
  for body in text:sub(at):gmatch("\n```" .. lang .. "\n(.-\n)```") do
    nth = (nth or 1) - 1
    if nth == 0 then found = body break end
  end
  return (assert(found, file .. ": no " .. lang .. " block under " ..
    heading))
end

--- `text` with every `from` (plain text, there `n` times, default 1) made
-- `to`
function H.subst(text, from, to, n)
  local out, count = text:gsub(from:gsub("%p", "%%%0"),
    (to:gsub("%%", "%%%%")))
  assert(count == (n or 1), ("%d times %q, not %d"):format(count, from,
    n or 1))
  return out
end

return H
