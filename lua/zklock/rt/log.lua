-- Logging (docs/design.md section 13.1): zklock's own messages and, once
-- a logger is set, the C client's log (queued on ZooKeeper's threads,
-- drained on the Lua thread), both to logger(level, message).  Owns the
-- logger.  Not a public interface.
local core = require "zklock.core"

local M = {}

local tostring, pcall = tostring, pcall

local logger -- nil: stderr (and the C client writes its own lines there)

local function to_stderr(level, msg)
  io.stderr:write(("zklock: %s: %s\n"):format(level, msg))
end

--- Send one message to the logger; a failing logger falls back to stderr.
local function log(level, msg)
  if logger then
    local ok, err = pcall(logger, level, msg)
    if ok then return end
    to_stderr("error", "logger failed: " .. tostring(err))
  end
  to_stderr(level, msg)
end
M.log = log

--- Pass the C client's queued lines to `send` (default: the logger, when
-- one is set; called on every dispatch), with a word on lines a full
-- queue dropped.
local log_pop = core.log_pop
local function drain_log(send)
  send = send or (logger and log)
  if not send then return end
  while true do
    local line, level, dropped = log_pop()
    if dropped > 0 then
      send("warn", ("%d lines of the ZooKeeper client's log dropped " ..
        "(queue full)"):format(dropped))
    end
    if not line then return end
    send(level, line)
  end
end
M.drain_log = drain_log

--- The logger in use (nil: stderr).
function M.current_logger() return logger end

--- Set (fn) or clear (nil) the logger: fn(level, message).
function M.set_logger(fn)
  logger = fn
  core.log_capture(fn ~= nil)
  if not fn then drain_log(to_stderr) end -- (what was queued goes out)
end

--- Log that a callback (`what`) failed with `err`.
function M.report(what, err)
  log("error", ("%s callback failed: %s"):format(what, tostring(err)))
end

return M
