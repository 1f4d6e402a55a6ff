--- Exactly one worker across the fleet runs a periodic job.
-- Every worker of every nginx instance joins one leader selector (Curator
-- LeaderSelector compatible: a mutex on PATH); the chosen worker runs the
-- job every `period` seconds, in a timer of its own (zklock.ngx), so the
-- worker keeps serving.  Its turn ends when it is interrupted: its session
-- lost, or the worker stopping.  Then the next worker in line takes over,
-- within a round trip of the server noticing (a killed worker: once its
-- session expires).
local M = {}

M.PATH = "/zklock-example/leader"
local selector

--- init_worker_by_lua: join, with `job()` to run while leading.
function M.init_worker(zk, job, period)
  selector = zk:leader_selector(M.PATH, function(s)
    while not s:is_interrupted() and not ngx.worker.exiting() do
      local ok, err = pcall(job)
      if not ok then ngx.log(ngx.ERR, "leader job failed: ", err) end
      ngx.sleep(period)
    end
  end)
  assert(selector:start())
end

--- Is this worker the leader now?
function M.leading() return selector ~= nil and selector:has_leadership() end

return M
