/* Lua 5.1 (LuaJIT 2.1, PUC Lua 5.1) / 5.3 / 5.4 compatibility shims.
 * Tested: Lua 5.4 and LuaJIT 2.1 fully, Lua 5.3 and PUC Lua 5.1 on the
 * client, mutex and recipe specs (docs/compatibility.md, "Lua versions"). */
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

#ifndef LUA_GCISRUNNING
/* PUC Lua 5.1 (LuaJIT 2.1's headers define LUA_GCISRUNNING and declare the
 * Lua 5.2 auxiliary functions below; PUC 5.1's have neither). */
static inline void zkl_compat_setfuncs(lua_State *L, const luaL_Reg *l,
                                       int nup) {
  luaL_checkstack(L, nup + 1, "too many upvalues");
  for (; l->name != NULL; l++) {
    int i;
    for (i = 0; i < nup; i++) lua_pushvalue(L, -nup);
    lua_pushcclosure(L, l->func, nup);
    lua_setfield(L, -(nup + 2), l->name);
  }
  lua_pop(L, nup);
}

static inline void zkl_compat_setmetatable(lua_State *L, const char *tname) {
  luaL_getmetatable(L, tname);
  lua_setmetatable(L, -2);
}

static inline void *zkl_compat_testudata(lua_State *L, int ud,
                                         const char *tname) {
  void *p = lua_touserdata(L, ud);
  if (p == NULL || !lua_getmetatable(L, ud)) return NULL;
  luaL_getmetatable(L, tname);
  if (!lua_rawequal(L, -1, -2)) p = NULL;
  lua_pop(L, 2);
  return p;
}

#define luaL_setfuncs(L, l, nup) zkl_compat_setfuncs((L), (l), (nup))
#define luaL_setmetatable(L, t) zkl_compat_setmetatable((L), (t))
#define luaL_testudata(L, i, t) zkl_compat_testudata((L), (i), (t))
#define luaL_newlib(L, l) \
  (lua_newtable(L), zkl_compat_setfuncs((L), (l), 0))
#endif
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
