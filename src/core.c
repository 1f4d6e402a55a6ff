/* luaopen_zklock_core: the only exported symbol. */
#include <stdlib.h>
#include <string.h>

#include "lbind.h"

__attribute__((visibility("default"))) int luaopen_zklock_core(lua_State *L);

int luaopen_zklock_core(lua_State *L) {
  const char *lv = getenv("ZKLOCK_LOG_LEVEL");
  int i;
  /* the C client logs INFO to stderr by default; zklock reports failures
   * as return values, so its log stays off unless ZKLOCK_LOG_LEVEL asks */
  zoo_set_debug_level(!lv ? (ZooLogLevel)0
                      : strcmp(lv, "debug") == 0 ? ZOO_LOG_LEVEL_DEBUG
                      : strcmp(lv, "info") == 0 ? ZOO_LOG_LEVEL_INFO
                      : strcmp(lv, "warn") == 0 ? ZOO_LOG_LEVEL_WARN
                      : strcmp(lv, "error") == 0 ? ZOO_LOG_LEVEL_ERROR
                      : (ZooLogLevel)0);
  lua_newtable(L);
  zkl_open_client(L);
  zkl_open_lock(L);
  zkl_open_proxy(L);
  lua_newtable(L); /* errors: code -> code */
  for (i = 1; i < ZKL_NCODES; i++) {
    lua_pushstring(L, zkl_code_name(i));
    lua_pushstring(L, zkl_code_name(i));
    lua_settable(L, -3);
  }
  lua_setfield(L, -2, "errors");
  lua_pushstring(L, LUA_VERSION);
  lua_setfield(L, -2, "lua_version");
  return 1;
}
