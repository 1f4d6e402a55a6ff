-- A holder that will be stale (spec/token_spec.lua):
-- `token_holder.lua hosts path ports tokenfile gofile outfile`.
-- Takes the mutex at `path` (a 4 s session), writes its token's string
-- form to `tokenfile`, writes "a1" with it to every resource of `ports`
-- (comma-separated), then waits (bounded) for `gofile` — the spec freezes
-- it meanwhile, past its session — and writes "a2" with the same token,
-- as a holder that does not know it was paused would.  Each answer is a
-- line of `outfile`: "PORT VALUE ANSWER".
local W = dofile("spec/workers/common.lua")
local socket = require "socket"

local hosts, path, ports, tokenfile, gofile, outfile = ...

local zk = assert(W.connect(hosts, { session_timeout = 4 }))
local m = zk:mutex(path)
assert(m:acquire(30))
local token = m:token("string")
local out = assert(io.open(outfile, "w"))
out:setvbuf("line")

local function write_all(value)
  for port in ports:gmatch("%d+") do
    local c = assert(socket.connect("127.0.0.1", tonumber(port)))
    c:settimeout(10)
    assert(c:send(("WRITE %s %s\n"):format(token, value)))
    out:write(("%s %s %s\n"):format(port, value, c:receive("*l") or "none"))
    c:close()
  end
end

write_all("a1")
local fh = assert(io.open(tokenfile .. ".tmp", "w"))
fh:write(token, "\n")
fh:close()
assert(os.rename(tokenfile .. ".tmp", tokenfile))
W.wait_gate(gofile, 120)
write_all("a2")
out:close()
