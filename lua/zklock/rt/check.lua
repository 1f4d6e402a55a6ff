-- Argument checks for every zklock Lua file: the standard "bad argument
-- #n to 'f' (...)" error, pinned on the first caller outside zklock's own
-- files; paths and connect strings (the reasons are C's: paths.c);
-- options tables, whose unknown keys get a "did you mean"; counts,
-- timeouts, boxed objects, data sizes.  Owns the set of zklock's own
-- sources (INTERNAL).  Not a public interface.
local core = require "zklock.core"

local M = {}

local unbox = core.unbox
local type, tostring, error, pairs, ipairs, getmetatable =
  type, tostring, error, pairs, ipairs, getmetatable
local floor, huge = math.floor, math.huge

-- The sources of zklock's own Lua files: their frames are skipped when an
-- error is pinned on the caller.
local INTERNAL = { [debug.getinfo(1, "S").source] = true }

--- Count the calling file as zklock's own (each zklock Lua file calls it
-- as it loads).
function M.internal_file()
  INTERNAL[debug.getinfo(2, "S").source] = true
end

--- Raise "bad argument #n to 'fname' (msg)", pointing at the first caller
-- outside zklock's Lua files.
local function argerror(n, fname, msg)
  local level = 2
  while true do
    local info = debug.getinfo(level, "S")
    if not info or not INTERNAL[info.source] then break end
    level = level + 1
  end
  error(("bad argument #%d to '%s' (%s)"):format(n, fname, msg), level)
end
M.argerror = argerror

-- The longest path (docs/limits.md: core.PATH_MAX, 4096), and the longest
-- a recipe directory may have: its longest node name,
-- "/leases/_c_<uuid>-lease-<10 digits>" (64 bytes), must fit within the
-- first.
M.RECIPE_PATH_MAX = core.PATH_MAX - 64

local path_problem, hosts_problem = core.path_problem, core.hosts_problem

--- `path`, or a standard argument error; `max` (default 4096): its
-- longest length in bytes (RECIPE_PATH_MAX for a recipe's directory).
-- Why a path is refused is said in C, once (src/core/paths.c).
function M.check_path(path, n, fname, max)
  if type(path) ~= "string" then
    argerror(n, fname, "string expected, got " .. type(path))
  end
  local why = path_problem(path, max)
  if why then argerror(n, fname, why) end
  return path
end

--- `hosts`, a connect string ("host:port,...[/chroot]"), or a standard
-- argument error (the reasons: src/core/paths.c).
function M.check_hosts(hosts, n, fname)
  if type(hosts) ~= "string" then
    argerror(n, fname, "connect string expected, got " .. type(hosts))
  end
  local why = hosts_problem(hosts)
  if why then argerror(n, fname, why) end
  return hosts
end

-- ---------------------------------------------------------------------------
-- options tables: every key must be known (docs/api.md, "Conventions"),
-- as kazoo's keyword arguments are (a TypeError for a misspelt one)

--- The set of option names in the array `names`, with those of the sets
-- `...` (a function's own table of allowed keys, next to it).
function M.options(names, ...)
  local set = {}
  for _, base in ipairs({ ... }) do
    for k in pairs(base) do set[k] = true end
  end
  for _, k in ipairs(names) do set[k] = true end
  return set
end

-- The edit distance of a and b (optimal string alignment: a swap of two
-- neighbours counts one).
local function distance(a, b)
  local la, lb = #a, #b
  local d = {}
  for i = 0, la do d[i] = { [0] = i } end
  for j = 1, lb do d[0][j] = j end
  for i = 1, la do
    local ai = a:byte(i)
    for j = 1, lb do
      local bj = b:byte(j)
      local v = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1,
        d[i - 1][j - 1] + (ai == bj and 0 or 1))
      if i > 1 and j > 1 and ai == b:byte(j - 1) and a:byte(i - 1) == bj then
        v = math.min(v, d[i - 2][j - 2] + 1)
      end
      d[i][j] = v
    end
  end
  return d[la][lb]
end

-- The error for the unknown key k of an options table: with the closest
-- allowed name when it is at most two edits away (and not all of it).
local function unknown_option(k, allowed, n, fname, prefix)
  local name = type(k) == "string" and ("'" .. prefix .. k .. "'")
    or "[" .. tostring(k) .. "]"
  local best, bd
  if type(k) == "string" then
    for a in pairs(allowed) do
      local d = distance(k, a)
      if d <= 2 and d < #a and (not bd or d < bd or d == bd and a < best)
          then
        best, bd = a, d
      end
    end
  end
  argerror(n, fname, "unknown option " .. name ..
    (best and (" (did you mean '" .. prefix .. best .. "'?)") or ""))
end

--- `opts` (argument n of fname; a table, checked by the caller), or the
-- standard error for its first key not in the set `allowed`:
-- `unknown option 'sesion_timeout' (did you mean 'session_timeout'?)`.
-- `prefix` ("tls."): a nested table's, named as such.
function M.check_options(opts, allowed, n, fname, prefix)
  local bad
  for k in pairs(opts) do
    if not allowed[k] and (bad == nil or tostring(k) < tostring(bad)) then
      bad = k -- (the first by name: the same error every run)
    end
  end
  if bad ~= nil then unknown_option(bad, allowed, n, fname, prefix or "") end
  return opts
end

-- ---------------------------------------------------------------------------
-- values

function M.check_count(v, n, fname, what)
  if type(v) ~= "number" or v ~= floor(v) or v < 1 or v > 2 ^ 31 - 1 then
    argerror(n, fname, what .. " must be a positive integer, got " ..
      tostring(v))
  end
  return v
end

function M.check_timeout(t, n, fname)
  if t == nil then return nil end
  if type(t) ~= "number" then
    argerror(n, fname, "number expected, got " .. type(t))
  end
  if t ~= t or t < 0 then argerror(n, fname, "timeout must be >= 0") end
  if t == huge then return nil end
  return t
end

function M.check_client(self, fname)
  if not core.is_client(self) then
    argerror(1, fname, "zklock client expected")
  end
end

--- The fields of a boxed object of class `mt`, or the standard error.
function M.checked(self, mt, fname, what)
  local f = unbox(self)
  if not f or getmetatable(self) ~= mt then
    argerror(1, fname, "zklock " .. what .. " expected, got " .. type(self))
  end
  return f
end

--- `data` (argument n of fname) fits the client's max_data, or the error.
function M.check_data(client, data, n, fname)
  if type(data) ~= "string" then
    argerror(n, fname, "string expected, got " .. type(data))
  end
  local limit = client:_limits() -- (none once closed: the op says so)
  if limit and #data > limit then
    argerror(n, fname, ("data of %d bytes is over the client's limit of %d " ..
      "(max_data)"):format(#data, limit))
  end
  return data
end

return M
