-- `tls_close.lua hosts ca cert key ready go`: a TLS session whose server
-- is frozen while it reconnects (tls_spec): connects, writes `ready`,
-- waits for the file `go` (the parent froze the server and cut the
-- connection), waits until the C client is back in a TLS handshake with
-- it, then closes the client and prints "closed in <s>".
local zklock = require "zklock"
local core = require "zklock.core"
local W = dofile("spec/workers/common.lua")

local hosts, ca, cert, key, ready, go = ...
local lines = {}
zklock.set_log_level("info")
zklock.set_logger(function(_, msg) lines[#lines + 1] = msg end)
local zk = assert(zklock.connect(hosts, { session_timeout = 10,
  tls = { ca = ca, cert = cert, key = key } }))
local f = assert(io.open(ready, "w")); f:close()
W.wait_gate(go, 30)
local seen = #lines
-- the C client's reconnect: each TLS handshake begins with the line
-- "FIPS mode is OFF" (init_ssl_for_socket, as it makes the connection's
-- SSL object), then waits for the server
local deadline = core.now() + 30
repeat
  zk:dispatch(0.05)
  local found = false
  for i = seen + 1, #lines do
    if lines[i]:find("FIPS mode is", 1, true) then
      found = true
    end
  end
until found or core.now() > deadline
assert(core.now() <= deadline, "no reconnect seen")
zk:dispatch(0.5) -- (inside the handshake's first 1-s wait)
local t0 = core.now()
zk:close()
print(("closed in %.3f"):format(core.now() - t0))
