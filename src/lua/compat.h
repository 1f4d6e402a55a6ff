/* Lua 5.1 (LuaJIT 2.1) / 5.4 compatibility shims. */
#ifndef ZKLOCK_COMPAT_H
#define ZKLOCK_COMPAT_H

#include <lua.h>
#include <lauxlib.h>

#if LUA_VERSION_NUM == 501
/* LuaJIT 2.1 has luaL_setfuncs, luaL_testudata and luaL_newlib, but no
 * lua_absindex and no user values: a userdata's environment table serves. */
#define lua_absindex(L, i) \
  (((i) > 0 || (i) <= LUA_REGISTRYINDEX) ? (i) : lua_gettop(L) + (i) + 1)
#define zkl_setuservalue(L, i) lua_setfenv((L), (i))
#define zkl_getuservalue(L, i) lua_getfenv((L), (i))
#define zkl_rawlen(L, i) lua_objlen((L), (i))
#else
#define zkl_setuservalue(L, i) lua_setuservalue((L), (i))
#define zkl_getuservalue(L, i) ((void)lua_getuservalue((L), (i)))
#define zkl_rawlen(L, i) lua_rawlen((L), (i))
#endif

/* Push a 64-bit integer: exact on 5.4; on LuaJIT a double, exact below 2^53
 * (zxids are epoch<<32 | counter, far below that). */
static inline void zkl_pushint64(lua_State *L, long long v) {
#if LUA_VERSION_NUM >= 503
  lua_pushinteger(L, (lua_Integer)v);
#else
  lua_pushnumber(L, (lua_Number)v);
#endif
}

#endif
