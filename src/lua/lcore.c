/* luaopen_zklock_core, the only exported symbol: gathers the binding
 * files (each adds its part to the module table) and the few functions
 * of no object: clocks, coroutine status, the log level, the error
 * codes.  The design of the C core: core/internal.h, docs/design.md. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lbind.h"

__attribute__((visibility("default"))) int luaopen_zklock_core(lua_State *L);

static int lcore_now(lua_State *L) {
  lua_pushnumber(L, zkl_now());
  return 1;
}

/* core.costatus(co): the plain status of a coroutine ("running",
 * "suspended", "normal", "dead"), whatever a host did to
 * coroutine.status (OpenResty answers "dead" for another request's). */
static int lcore_costatus(lua_State *L) {
  lua_State *co = lua_tothread(L, 1);
  lua_Debug ar;
  luaL_argcheck(L, co != NULL, 1, "coroutine expected");
  if (co == L) lua_pushliteral(L, "running");
  else if (lua_status(co) == LUA_YIELD) lua_pushliteral(L, "suspended");
  else if (lua_status(co) != 0) lua_pushliteral(L, "dead");
  else if (lua_getstack(co, 0, &ar) > 0) lua_pushliteral(L, "normal");
  else if (lua_gettop(co) == 0) lua_pushliteral(L, "dead");
  else lua_pushliteral(L, "suspended"); /* not started yet */
  return 1;
}

static int lcore_pid(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)zkl_pid());
  return 1;
}

/* core.addr(v) -> "0x..." */
static int lcore_addr(lua_State *L) {
  luaL_checkany(L, 1);
  lua_pushfstring(L, "%p", lua_topointer(L, 1));
  return 1;
}

static int lcore_set_log_level(lua_State *L) {
  static const char *const levels[] = { "none", "error", "warn", "info",
                                        "debug", NULL };
  int lv = luaL_checkoption(L, 1, NULL, levels);
  zoo_set_debug_level((ZooLogLevel)lv);
  zkl_log_set_level(lv);
  return 0;
}

/* core.log_capture(on): queue the C client's log for core.log_pop instead
 * of writing it to stderr */
static int lcore_log_capture(lua_State *L) {
  luaL_checkany(L, 1);
  zkl_log_capture(lua_toboolean(L, 1));
  return 0;
}

/* core.log_pop() -> line, level, dropped | nil, nil, dropped: the oldest
 * queued line of the C client's log ("error", "warn", "info", "debug"),
 * and how many lines a full queue lost since the last call */
static int lcore_log_pop(lua_State *L) {
  static const char *const names[] = { "error", "error", "warn", "info",
                                       "debug" };
  char buf[2048];
  int level = ZKL_LOG_ERROR;
  unsigned long dropped = 0;
  if (zkl_log_pop(buf, sizeof buf, &level, &dropped)) {
    lua_pushstring(L, buf);
    lua_pushstring(L, names[level >= 1 && level <= 4 ? level : 1]);
  } else {
    lua_pushnil(L);
    lua_pushnil(L);
  }
  lua_pushnumber(L, (lua_Number)dropped);
  return 3;
}

int luaopen_zklock_core(lua_State *L) {
  static const luaL_Reg funcs[] = {
    { "now", lcore_now },
    { "costatus", lcore_costatus },
    { "pid", lcore_pid },
    { "addr", lcore_addr },
    { "set_log_level", lcore_set_log_level },
    { "log_capture", lcore_log_capture },
    { "log_pop", lcore_log_pop },
    { NULL, NULL }
  };
  const char *lv = getenv("ZKLOCK_LOG_LEVEL");
  ZooLogLevel level;
  int i;
  /* the C client logs INFO to stderr by default; zklock reports failures
   * as return values, so its log stays off unless ZKLOCK_LOG_LEVEL asks */
  level = !lv ? (ZooLogLevel)0
          : strcmp(lv, "debug") == 0 ? ZOO_LOG_LEVEL_DEBUG
          : strcmp(lv, "info") == 0 ? ZOO_LOG_LEVEL_INFO
          : strcmp(lv, "warn") == 0 ? ZOO_LOG_LEVEL_WARN
          : strcmp(lv, "error") == 0 ? ZOO_LOG_LEVEL_ERROR
          : (ZooLogLevel)0;
  zoo_set_debug_level(level);
  zkl_log_set_level((int)level);
  lua_newtable(L);
  luaL_setfuncs(L, funcs, 0);
  zkl_open_client(L); /* (first: the others add client methods) */
  zkl_open_op(L);
  zkl_open_attempt(L);
  zkl_open_names(L);
  zkl_open_check(L);
  zkl_open_proc(L);
  lua_newtable(L); /* errors: code -> code */
  for (i = 1; i < ZKL_NCODES; i++) {
    lua_pushstring(L, zkl_code_name(i));
    lua_pushstring(L, zkl_code_name(i));
    lua_settable(L, -3);
  }
  lua_setfield(L, -2, "errors");
  lua_pushstring(L, ZKL_REVOKE); /* what a revoker writes */
  lua_setfield(L, -2, "REVOKE");
  lua_pushstring(L, LUA_VERSION);
  lua_setfield(L, -2, "lua_version");
  return 1;
}
