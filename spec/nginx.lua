-- Real nginx instances for the OpenResty specs and the W4 benchmark:
-- Debian's nginx-light with libnginx-mod-http-lua, each with its own prefix
-- (made under $ZKLOCK_TEST_TMP, so spec/run.sh's clean-up finds it) and
-- examples/nginx/nginx.conf filled in.  HTTP goes through curl.
local core = require "zklock.core"
local tcore = require "zklock.testing.core"

local N = {}

-- the project (absolute): where this file is, less spec/nginx.lua
local ROOT = debug.getinfo(1, "S").source:match("^@(.*)/spec/nginx%.lua$")
if not ROOT or ROOT == "." then ROOT = os.getenv("PWD")
elseif ROOT:sub(1, 1) ~= "/" then ROOT = os.getenv("PWD") .. "/" .. ROOT end
local TMP = os.getenv("ZKLOCK_TEST_TMP") or "/tmp"
local NGINX = os.getenv("ZKLOCK_NGINX") or "/usr/sbin/nginx"

local function slurp(path)
  local f = io.open(path, "rb")
  local s = f and f:read("*a")
  if f then f:close() end
  return s
end

local function spit(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function capture(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  return out
end

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

local proc_stat = require("zklock.testing")._proc_stat

local function alive(pid)
  local state = proc_stat(pid)
  return state ~= nil and state ~= "Z" and state ~= "X"
end

local seq = 0
local live = {}

local Instance = {}
Instance.__index = Instance

--- Start an instance and wait until it answers `ready` (default /ping)
-- with 200.
-- opts: hosts (ZooKeeper connect string), tls (the client's { ca, cert,
-- key }, for a TLS ZooKeeper), workers (2), port (a free one),
-- extra (server-level configuration text), http (http-level text), main
-- (main-level text), worker_connections (the conf's own, else as given),
-- conf (template, default examples/nginx/nginx.conf), ready (a path), env
-- (NAME=value words for nginx's environment; main needs `env NAME;`)
function N.start(opts)
  seq = seq + 1
  local prefix = ("%s/zklock-nginx-%d-%d"):format(TMP, core.pid(), seq)
  local port = opts.port or tcore.free_port()
  assert(sh(("mkdir -p '%s/conf/extra' '%s/logs'"):format(prefix, prefix)))
  local conf = assert(slurp(opts.conf or (ROOT .. "/examples/nginx/nginx.conf")))
  local user = capture("id -u"):match("^0%s") and "user root root;" or ""
  local http = opts.http or ""
  conf = conf:gsub("__ROOT__", ROOT):gsub("__PORT__", tostring(port))
    :gsub("__WORKERS__", tostring(opts.workers or 2))
    :gsub("__USER__", user)
    :gsub("worker_connections %d+;", opts.worker_connections and
      "worker_connections " .. opts.worker_connections .. ";" or "%0")
    :gsub("(\nhttp {\n)", "%1" .. http:gsub("%%", "%%%%") .. "\n")
  if opts.main then conf = opts.main .. "\n" .. conf end
  -- make asan: nginx loads the AddressSanitizer build of the module
  local cpath = os.getenv("ZKLOCK_NGX_CPATH")
  if cpath then
    conf = conf:gsub('lua_package_cpath "[^"]*"', 'lua_package_cpath "' ..
      cpath:gsub("%%", "%%%%") .. ';;"')
  end
  spit(prefix .. "/conf/nginx.conf", conf)
  spit(prefix .. "/conf/extra/spec.conf", opts.extra or "")
  local self = setmetatable({ prefix = prefix, port = port,
    base = ("http://127.0.0.1:%d"):format(port) }, Instance)
  -- make asan: nginx (and so its workers) runs with libasan preloaded
  local preload = os.getenv("ZKLOCK_NGX_PRELOAD")
  preload = preload and ("LD_PRELOAD='%s' "):format(preload) or ""
  local tls = opts.tls and ("ZK_TLS_CA='%s' ZK_TLS_CERT='%s' ZK_TLS_KEY='%s' ")
    :format(opts.tls.ca, opts.tls.cert, opts.tls.key) or ""
  local env = opts.env and opts.env .. " " or ""
  local out = capture(("%s%s%sZK_HOSTS='%s' %s -p '%s' -c conf/nginx.conf " ..
    "2>&1; echo rc=$?"):format(preload, tls, env, opts.hosts, NGINX, prefix))
  if not out:match("rc=0%s*$") then
    sh(("rm -rf '%s'"):format(prefix))
    error("nginx did not start:\n" .. out)
  end
  live[self] = true
  local deadline = core.now() + 15
  while true do
    local st = self:get(opts.ready or "/ping")
    if st == 200 then break end
    if core.now() > deadline then
      local log = self:log()
      if os.getenv("ZKLOCK_DEBUG_NGX") then
        os.execute("for p in $(pgrep -f 'nginx.*" .. prefix .. "'); do " ..
          "echo PID $p; " ..
          "gdb -p $p -batch -ex 'thread apply all bt' 2>&1 | " ..
          "grep '^#' | head -30; " ..
          "cat /proc/$p/status | grep -i 'state\\|ppid'; " ..
          "for t in /proc/$p/task/*; do echo \"  $t $(cat $t/comm) " ..
          "$(cat $t/wchan) $(cut -d' ' -f1 $t/syscall)\"; done; " ..
          "done > /tmp/ngx_debug.txt 2>&1")
      end
      self:stop()
      error("nginx on port " .. port .. " never answered " ..
        (opts.ready or "/ping") .. ":\n" .. log)
    end
    tcore.sleep(0.05)
  end
  return self
end

function Instance:url(path) return self.base .. path end

--- The master's pid, or nil.
function Instance:pid()
  return tonumber(slurp(self.prefix .. "/logs/nginx.pid") or "")
end

--- Worker pids.
function Instance:workers()
  local pid = self:pid()
  local out = {}
  if not pid then return out end
  for w in capture("ps -o pid= --ppid " .. pid):gmatch("%d+") do
    out[#out + 1] = tonumber(w)
  end
  return out
end

--- The error log.
function Instance:log() return slurp(self.prefix .. "/logs/error.log") or "" end

--- Stop: graceful shutdown (SIGQUIT: each worker's zklock timer ends its
-- session, so its nodes go at once), then SIGTERM, then SIGKILL, each
-- after a bounded wait; then remove the prefix.  Idempotent.
function Instance:stop()
  if not live[self] then return end
  live[self] = nil
  local pid = self:pid()
  local workers = self:workers()
  for _, sig in ipairs { "QUIT", "TERM", "KILL" } do
    if not (pid and alive(pid)) then break end
    sh("kill -" .. sig .. " " .. pid .. " 2>/dev/null")
    local deadline = core.now() + 10
    while alive(pid) and core.now() < deadline do tcore.sleep(0.02) end
  end
  for _, w in ipairs(workers) do
    if alive(w) then sh("kill -KILL " .. w .. " 2>/dev/null") end
  end
  sh(("rm -rf '%s'"):format(self.prefix))
end

function N.stop_all()
  for inst in pairs(live) do inst:stop() end
end

--- GET: status, body (without its last newline), seconds.  `max_time` bounds it (default 30 s).
function Instance:get(path, max_time)
  local out = capture(("curl -s -m %g -o - -w '\\n%%{http_code} " ..
    "%%{time_total}' '%s' 2>/dev/null"):format(max_time or 30,
    self:url(path)))
  local body, st, t = out:match("^(.-)\n?(%d+) ([%d.]+)$")
  return tonumber(st), body and body:gsub("\n$", ""), tonumber(t)
end

-- A curl config listing `urls`, for -K.
local function url_list(file, urls)
  local lines = {}
  for i, u in ipairs(urls) do
    lines[i] = ('url = "%s"\noutput = "/dev/null"\n'):format(u)
  end
  spit(file, table.concat(lines))
end

local function curl_many(n, max_time, list)
  return ("curl -s -Z --parallel-max %d --parallel-immediate -m %g " ..
    "-w '%%{http_code}\\n' -K '%s' 2>/dev/null"):format(n, max_time, list)
end

-- status -> count, and the number of answers
local function tally(out)
  local count, n = {}, 0
  for code in out:gmatch("%d+") do
    code = tonumber(code)
    count[code] = (count[code] or 0) + 1
    n = n + 1
  end
  return count, n
end

-- Run shell command `cmd` in the background, its output kept under the
-- file name `tag`: returns a function that waits for it (at most `secs`;
-- `what` names it in the error) and gives that output, its files gone.
local function in_background(cmd, tag)
  sh(("(%s >'%s.out'; echo done >'%s.done') >/dev/null 2>&1 &")
    :format(cmd, tag, tag))
  return function(secs, what)
    local deadline = core.now() + secs
    while not slurp(tag .. ".done") do
      assert(core.now() < deadline, what .. " never finished")
      tcore.sleep(0.05)
    end
    local out = slurp(tag .. ".out") or ""
    os.remove(tag .. ".out"); os.remove(tag .. ".done")
    return out
  end
end

--- Many GETs at once (curl --parallel, all in flight together), in the
-- background: returns a function that waits for them (bounded) and then
-- gives status -> how many, and how many answered in all (a request that
-- got no answer counts as status 0).
function N.parallel_bg(urls, max_time)
  local tag = ("%s/zklock-bg-%d-%d"):format(TMP, core.pid(), math.random(1e9))
  url_list(tag .. ".urls", urls)
  local wait = in_background(curl_many(#urls, max_time or 60,
    tag .. ".urls"), tag)
  return function(timeout)
    local out = wait(timeout or (max_time or 60) + 10, "background requests")
    os.remove(tag .. ".urls")
    return tally(out)
  end
end

--- `n` GETs of `url` (an HTTP/2 listener without TLS) all in flight at
-- once, through h2load (nghttp2-client): `conns` connections of up to
-- ceil(n / conns) streams each, so that a hundred thousand requests fit in
-- a few descriptors.  In the background: returns a function that waits
-- for them (bounded) and gives status -> how many, by class (200: 2xx,
-- 409: 4xx, 503: 5xx, 0: not answered), and how many answered.
function N.h2load_bg(url, n, conns, max_time)
  local tag = ("%s/zklock-h2-%d-%d"):format(TMP, core.pid(), math.random(1e9))
  local wait = in_background(("h2load -n %d -c %d -m %d '%s' 2>&1")
    :format(n, conns, math.ceil(n / conns), url), tag)
  return function()
    local out = wait(max_time or 600, "h2load")
    local c2, c3, c4, c5 = out:match(
      "status codes: (%d+) 2xx, (%d+) 3xx, (%d+) 4xx, (%d+) 5xx")
    if not c2 then error("h2load said:\n" .. out) end
    local count = { [200] = tonumber(c2), [409] = tonumber(c4),
      [503] = tonumber(c5) }
    local answered = count[200] + count[409] + count[503] + tonumber(c3)
    if n > answered then count[0] = n - answered end
    for code, k in pairs(count) do if k == 0 then count[code] = nil end end
    return count, answered
  end
end

--- `N.parallel_bg(urls, max_time)`, waited for.
function N.parallel(urls, max_time)
  return N.parallel_bg(urls, max_time)()
end

return N
