/* Pushing errors, numbers in range, metatables: the binding's helpers that
 * need nothing of the core but its error names (zklock.testing.core links
 * this file too). */
#include "lbind.h"

int zkl_pusherr(lua_State *L, const zkl_error *e) {
  lua_pushnil(L);
  lua_pushstring(L, e->msg);
  lua_pushstring(L, zkl_code_name(e->code));
  return 3;
}

void zkl_setmeta(lua_State *L, const char *name, const luaL_Reg *methods,
                 const luaL_Reg *meta) {
  luaL_newmetatable(L, name);        /* mt */
  luaL_setfuncs(L, meta, 0);
  lua_newtable(L);                   /* mt, methods */
  luaL_setfuncs(L, methods, 0);
  lua_setfield(L, -2, "__index");    /* mt */
  lua_pushstring(L, name);
  lua_setfield(L, -2, "__name");
  lua_pop(L, 1);
}

int zkl_checkrange(lua_State *L, int idx, lua_Integer lo, lua_Integer hi,
                   const char *what) {
  lua_Number n = luaL_checknumber(L, idx);
  if (!(n >= (lua_Number)lo && n <= (lua_Number)hi) ||
      n != (lua_Number)(lua_Integer)n)
    luaL_argerror(L, idx, lua_pushfstring(L, "%s must be an integer from %I "
                  "to %I", what, lo, hi));
  return (int)(lua_Integer)n;
}

