-- luacheck configuration: `make lint` checks lua/, spec/, examples/,
-- bench/ and tools/ and passes with zero warnings.
--
-- zklock runs on Lua 5.1 to 5.4 and LuaJIT, and picks what each has at
-- run time (`table.unpack or unpack`, `jit`, `<close>` loaded from a
-- string), so the standard globals are the union of them all.
std = "max"
-- the project's own limit (docs and code keep to 80 columns; a few spec
-- lines with long literal strings go a little past it)
max_line_length = 100

-- OpenResty: zklock.ngx runs inside nginx's Lua module (OpenResty's API,
-- ngx.ctx written); zklock (init.lua) and zklock.election only read `ngx`
-- to tell whether they run there.
files["lua/zklock/ngx.lua"] = { std = "+ngx_lua" }
files["lua/zklock/ngxmetrics.lua"] = { std = "+ngx_lua" }
files["lua/zklock/init.lua"] = { read_globals = { "ngx" } }
files["lua/zklock/election.lua"] = { read_globals = { "ngx" } }
-- The argument checks write `not (x >= 0)` on purpose: NaN fails every
-- comparison, so the negated form refuses it where `x < 0` would not.
files["lua/zklock/rt/session.lua"] = { ignore = { "581" } }

-- the example nginx service: OpenResty's API (and ngx.status is set)
files["examples/nginx"] = { std = "+ngx_lua" }

-- specs: busted's globals; spec/nginx.lua and the workers run under plain
-- Lua, so only the *_spec.lua files get them
files["spec/**/*_spec.lua"] = { std = "+busted" }

-- the chaos run's nginx participant runs inside nginx (OpenResty's API)
files["spec/chaos/chaos_ngx.lua"] = { std = "+ngx_lua" }
