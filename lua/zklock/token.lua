-- Fencing tokens for resources outside ZooKeeper (docs/api.md, "Tokens for
-- outside resources"; docs/recipes.md, "A resource that checks tokens";
-- issue 36): the one string form of a token that sorts as tokens are
-- ordered, its parser, and `zklock.check_token`, which asks the ensemble
-- whether a token is a current hold.
-- (The doc comments below are on zklock's page of the reference:
-- config.ld.)

--- @module zklock
local core = require "zklock.core"
local check = require "zklock.rt.check"
local op = require "zklock.rt.op"
check.internal_file()

local T = {}

local type, tonumber, tostring, ipairs = type, tonumber, tostring, ipairs
local floor = math.floor
local argerror = check.argerror
local closed, call_op = op.closed, op.call_op

-- A token is (czxid, pass): the lock node's creation zxid, and for a hold
-- passed within a lock cohort its pass (1, 2...; 0 for the hold that took
-- the node).  Both fit 16 hex digits (a zxid is a signed 64-bit integer,
-- epoch·2^32 + counter; a pass is counted in a Lua integer), so the form
-- "CZXID.PASS", each zero-padded to 16 lower-case hex digits, sorts as
-- the pairs do, byte by byte (strcmp, ORDER BY on a text column).
local FORM = "%016x.%016x"
-- (lower case only: the form is one string per token, compared as it is)
local PATTERN = "^(" .. ("[0-9a-f]"):rep(16) .. ")%.(" ..
  ("[0-9a-f]"):rep(16) .. ")$"

-- A non-negative integer (an integer-valued number on LuaJIT).
local function whole(v)
  return type(v) == "number" and v >= 0 and floor(v) == v and v < 2 ^ 63
end

--- The string form of (czxid, pass) (pass: nil or 0 for an unpassed
-- hold).
function T.format(czxid, pass)
  return FORM:format(czxid, pass or 0)
end

--- What a token() method answers for a hold of node czxid and pass
-- (nil or 0: not passed): with form "string", the string form; else the
-- czxid, and the pass when there is one.
function T.answer(czxid, pass, form)
  if form then return T.format(czxid, pass) end
  if pass and pass > 0 then return czxid, pass end
  return czxid
end

--- A token() method's argument: nil, or "string" (argument n of fname).
function T.check_form(form, n, fname)
  if form ~= nil and form ~= "string" then
    argerror(n, fname, "\"string\" or nothing expected, got " ..
      (type(form) == "string" and ("%q"):format(form) or type(form)))
  end
  return form
end

--- czxid, pass of a token given as the string form, or as a czxid (and a
-- pass); nil and why for anything else.
function T.parse(token, pass)
  if type(token) == "string" then
    if pass ~= nil then
      return nil, "a pass beside a token in its string form"
    end
    local c, p = token:match(PATTERN)
    if not c then
      return nil, ("not a token: %q (CZXID.PASS, 16 hex digits each, as " ..
        "lock:token(\"string\") gives it)"):format(token:sub(1, 60))
    end
    c, p = tonumber(c, 16), tonumber(p, 16)
    if not (whole(c) and whole(p)) or c == 0 then
      return nil, ("not a token: %q (out of range)"):format(token)
    end
    return c, p
  end
  if not whole(token) or token == 0 then
    return nil, ("a token (a positive integer czxid, or its string form) " ..
      "expected, got %s"):format(type(token) == "number" and
      tostring(token) or type(token))
  end
  if pass ~= nil and not whole(pass) then
    return nil, "a pass (a non-negative integer) expected, got " ..
      (type(pass) == "number" and tostring(pass) or type(pass))
  end
  return token, pass or 0
end

-- The holders of the lock at path, whatever its kind (as zklock.revoke
-- finds them): a mutex's first node, a read/write lock's writer or
-- readers, a leader latch's leader, a semaphore's first max_leases
-- leases; within `timeout` seconds in all. Records of
-- lock/holders.lua (node, id, token, session), or nil, msg, code.
local function holders(zk, path, max_leases, timeout)
  local tries = { { path, "mutex", 1 }, { path, "rw" }, { path, "latch", 1 },
    { path .. "/leases", "lease", max_leases or 1 } }
  local deadline = core.now() + timeout -- (one bound for every try)
  for _, t in ipairs(tries) do
    local left = deadline - core.now()
    if left <= 0 then return nil, "timeout", "timeout" end
    local recs, msg, code = call_op(zk, left, "_holders", t[1], t[2],
      t[3], nil, false, true)
    if not recs and code ~= "no_node" then return nil, msg, code end
    if recs and #recs > 0 then return recs end
  end
  return {} -- (no such path: nobody holds it)
end

local CHECK_OPTIONS = check.options({ "max_leases", "timeout" })

--- Whether `token` is a current hold of the lock at `path`: its node
-- still exists and holds (is first in the queue; for a read/write lock,
-- the writer or a reader before the first writer; for a semaphore, among
-- the first `max_leases` leases; a leader latch's leader).  A sync, a
-- listing and a get behind it,
-- pipelined, for a mutex; up to three for the other kinds (the sync: a
-- member behind the leader must not call a stale token current).  A passed hold's pass lives in
-- its process, not on the server: the answer is the node's, and a
-- resource that must tell passes apart keeps the greatest token it has
-- seen (docs/recipes.md, "A resource that checks tokens").
-- @param zk a client
-- @string path the lock's path
-- @param token a czxid (what `lock:token()` returns first), or the
-- string form (`lock:token("string")`)
-- @tparam[opt] table opts `max_leases` (a semaphore's, default 1),
-- `timeout` (seconds, default the session timeout)
-- @return true; false and why ("not held", and the holder's token in its
-- string form when another holds); or nil, message, code
function T.check_token(zk, path, token, opts)
  if not core.is_client(zk) then
    argerror(1, "check_token", "zklock client expected")
  end
  check.check_path(path, 2, "check_token")
  local czxid, why = T.parse(token)
  if not czxid then argerror(3, "check_token", why) end
  opts = opts == nil and {} or
    check.check_options(opts, CHECK_OPTIONS, 4, "check_token")
  if opts.max_leases ~= nil then
    check.check_count(opts.max_leases, 4, "check_token", "max_leases")
  end
  local timeout = check.check_timeout(opts.timeout, 4, "check_token")
  local c, msg, code = closed(zk)
  if c then return nil, msg, code end
  local recs
  recs, msg, code = holders(zk, path, opts.max_leases,
    timeout or zk:session_timeout())
  if not recs then return nil, msg, code end
  for i = 1, #recs do
    if recs[i].token == czxid then return true end
  end
  if recs[1] then
    return false, "not held: held by " .. T.format(recs[1].token)
  end
  return false, "not held: nobody holds " .. path
end

return T
