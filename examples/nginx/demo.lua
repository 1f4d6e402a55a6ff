-- The stock counter as a web service, end to end: a throwaway ZooKeeper,
-- two nginx instances of two workers each (examples/nginx/nginx.conf),
-- and 200 concurrent buys spread over both, with and without the lock.
--   make && lua5.4 examples/nginx/demo.lua      (needs nginx-light,
--   libnginx-mod-http-lua and curl: make deps)
local root = dofile((arg[0]:match("^(.*)/") or ".") .. "/../paths.lua")
package.path = root .. "/?.lua;" .. package.path -- spec.nginx
local testing = require "zklock.testing"
local N = require "spec.nginx" -- starts nginx with its own prefix

local srv = testing.server()
local ok, err = pcall(function()
  local a = N.start { hosts = srv.connect_string, workers = 2 }
  local b = N.start { hosts = srv.connect_string, workers = 2 }
  print(("two nginx instances on %s and %s, ZooKeeper on %s"):format(
    a.base, b.base, srv.connect_string))
  for _, path in ipairs { "/buy", "/buy_unlocked" } do
    a:get("/reset?n=30")
    local urls = {}
    for i = 1, 200 do urls[i] = (i % 2 == 0 and a or b):url(path) end
    local count = N.parallel(urls)
    local _, left = a:get("/stock")
    print(("%-14s stock 30, 200 concurrent buyers: %3d bought, %3d sold " ..
      "out, stock left %s"):format(path, count[200] or 0, count[409] or 0,
      left))
  end
end)
N.stop_all()
srv:close()
if not ok then error(err, 0) end
