-- `sigmask.lua hosts ca cert key`: opens a TLS session (plaintext when
-- ca is "-"), then prints one line per thread of this process:
-- "<tid> <main|other> <SigBlk hex>" (tls_spec: the C client's threads
-- must block SIGPIPE).
local zklock = require "zklock"
local core = require "zklock.core"

local hosts, ca, cert, key = ...
local tls = ca ~= "-" and { ca = ca, cert = cert, key = key } or nil
local zk = assert(zklock.connect(hosts, { tls = tls }))
local pid = core.pid()
local p = assert(io.popen("ls /proc/" .. pid .. "/task"))
for tid in p:read("*a"):gmatch("%d+") do
  local f = io.open(("/proc/%d/task/%s/status"):format(pid, tid))
  if f then
    local blk = f:read("*a"):match("SigBlk:%s*(%x+)")
    f:close()
    print(tid, tonumber(tid) == pid and "main" or "other", blk)
  end
end
p:close()
zk:close()
