--- OpenResty metrics across workers (docs/openresty.md, "Metrics"): every
-- worker records its own; with a `lua_shared_dict zklock_metrics` each
-- publishes them there once a second, and `metrics()` adds up every
-- worker's.  Used through `zklock.ngx.metrics()`.
-- @module zklock.ngxmetrics
local metrics = require "zklock.metrics"

local M = {}

local ngx = ngx
local ngx_log, WARN = ngx.log, ngx.WARN
local ipairs, type = ipairs, type
local METRICS_DICT = "zklock_metrics"
local PUBLISH_EVERY = 1 -- s
local publishing = false

local function publish(dict)
  return dict:set("metrics:" .. ngx.worker.pid(),
    metrics.serialize(metrics.process))
end

local function publisher(premature)
  if premature then return end
  local dict = ngx.shared[METRICS_DICT]
  if dict then
    local ok, err = publish(dict)
    if not ok then ngx_log(WARN, "zklock: cannot publish metrics: ", err) end
  end
end

-- Started by connect, once per worker: only a worker with a session
-- records anything.
function M.start_publisher()
  if publishing or not ngx.shared[METRICS_DICT] then return end
  local ok, err = ngx.timer.every(PUBLISH_EVERY, publisher)
  if ok then publishing = true
  else ngx_log(WARN, "zklock: no metrics timer: ", err) end
end

--- The zklock figures in the Prometheus text exposition format, for a
-- `/metrics` location: every worker's added up when nginx declares
-- `lua_shared_dict zklock_metrics 1m` (each worker publishes its figures
-- there every second, and this worker's at once), else this worker's.
function M.metrics()
  local dict = ngx.shared[METRICS_DICT]
  if not dict then
    return "# zklock: no lua_shared_dict " .. METRICS_DICT ..
      ": this worker's figures only\n" .. metrics.prometheus(metrics.process)
  end
  publish(dict)
  local kinds = {}
  for _, key in ipairs(dict:get_keys(0)) do
    if key:sub(1, 8) == "metrics:" then
      local text = dict:get(key)
      if type(text) == "string" and not metrics.merge_text(kinds, text) then
        ngx_log(WARN, "zklock: malformed metrics under ", key)
      end
    end
  end
  return metrics.prometheus(kinds)
end

return M
