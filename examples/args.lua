-- The examples' argument errors, in one place: a bad or missing argument
-- prints "<example>: why" and a usage line on stderr, and exits 64
-- (EX_USAGE), not an assert's traceback.  Each example loads it with
--   local usage, number_arg = dofile(here .. "/args.lua")("HOSTS [n]")
-- usage(why) exits; number_arg(v, what, default) is v as a positive
-- integer (default when nil), or a usage exit.
return function(synopsis)
  local name = arg[0]:match("([^/]*)$")
  local line = ("usage: lua5.4 examples/%s %s"):format(name, synopsis)
  local function usage(why)
    io.stderr:write(name, ": ", why, "\n", line, "\n")
    os.exit(64)
  end
  local function number_arg(v, what, default)
    if v == nil then return default end
    local n = tonumber(v)
    if not n or n < 1 or n ~= math.floor(n) then
      usage(("%s must be a positive integer, got '%s'"):format(what, v))
    end
    return n
  end
  return usage, number_arg
end
