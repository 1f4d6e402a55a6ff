-- make bench-capacity's worker process (bench/capacity.lua): SESSIONS
-- client sessions of one process in one cqueues loop, each with 2
-- coroutines looping until END (a CLOCK_MONOTONIC time): a cycle of the
-- session's own lock, then one of a shared lock (one per SHARE sessions
-- of the whole run), every lock with cohort = COHORT.  Counts what ends
-- inside [M0, M1]: own cycles, shared acquires (hand-offs), acquires that
-- timed out; prints one line: "own N shared N failed N connected N".
--
--   capacity_worker.lua HOSTS FIRST SESSIONS SHARED_LOCKS COHORT M0 M1 END
local zcq = require "zklock.cqueues"
local cqueues = require "cqueues"
local core = require "zklock.core"

local hosts, first, sessions, nshared, cohort, m0, m1, t_end = ...
first, sessions, nshared = tonumber(first), tonumber(sessions),
  tonumber(nshared)
cohort = cohort == "on"
m0, m1, t_end = tonumber(m0), tonumber(m1), tonumber(t_end)
local now = core.now

local cq = cqueues.new()
local counts = { own = 0, shared = 0, failed = 0, connected = 0 }
local function count(k)
  local t = now()
  if t >= m0 and t < m1 then counts[k] = counts[k] + 1 end
end

for s = first, first + sessions - 1 do
  cq:wrap(function()
    local zk = zcq.connect(cq, hosts, { session_timeout = 20,
      connect_timeout = 120, id = "capacity " .. s })
    if not zk then return end
    counts.connected = counts.connected + 1
    local own = zk:mutex("/capacity/own/" .. s, { cohort = cohort })
    local shared = zk:mutex("/capacity/shared/" .. (s % nshared),
      { cohort = cohort })
    local live = 2
    for _ = 1, 2 do
      cq:wrap(function()
        while now() < t_end do
          if own:acquire(10) then
            own:release()
            count("own")
          else
            count("failed")
          end
          if now() >= t_end then break end
          if shared:acquire(10) then
            shared:release()
            count("shared")
          else
            count("failed")
          end
        end
        live = live - 1
        if live == 0 then zk:close() end
      end)
    end
  end)
end
assert(cq:loop())
print(("own %d shared %d failed %d connected %d"):format(counts.own,
  counts.shared, counts.failed, counts.connected))
