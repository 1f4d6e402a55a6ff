/* Argument checks of the binding: paths, data, marker families, and the
 * client a call is made on (open, same process). */
#include <string.h>
#include <unistd.h>

#include "lbind.h"

const char *zkl_checkpath(lua_State *L, int idx) {
  size_t len, i;
  const char *p = luaL_checklstring(L, idx, &len), *why = NULL;
  if (len == 0 || p[0] != '/') why = "path must start with '/'";
  else if (len == 1) why = "path must not be the root";
  else if (len > ZKL_PATH_MAX) why = "path too long";
  else if (p[len - 1] == '/') why = "path must not end with '/'";
  else if (strlen(p) != len) why = "path contains a NUL byte";
  /* (as zklock's Lua checks: docs/limits.md) */
  for (i = 0; !why && i < len; i++) {
    /* (the C client refuses these, and its multi-op then frees twice) */
    if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
      why = "path contains a control character";
    if (p[i] != '/') continue;
    if (p[i + 1] == '/') why = "empty path component";
    else if (p[i + 1] == '.' &&
             (p[i + 2] == '/' || p[i + 2] == '\0' ||
              (p[i + 2] == '.' && (p[i + 3] == '/' || p[i + 3] == '\0'))))
      why = "relative path component";
  }
  if (why) luaL_argerror(L, idx, lua_pushfstring(L, "%s", why));
  return p;
}

const char *zkl_checkdata(lua_State *L, int idx, const zkl_client *c,
                          size_t *len, int opt, const char *def) {
  const char *d = opt ? luaL_optlstring(L, idx, def, len)
                      : luaL_checklstring(L, idx, len);
  int max = zkl_client_max_data(c);
  if (d && *len > (size_t)max)
    luaL_argerror(L, idx, lua_pushfstring(L, "data of %I bytes is over the "
                  "client's limit of %d (max_data)", (lua_Integer)*len, max));
  return d;
}

const char *const *zkl_checkmarkers(lua_State *L, int idx, int *family) {
  static const char *const names[] = { "mutex", "lease", "rw", "read",
                                       "write", "latch", "all", NULL };
  static const int families[] = { ZKL_FAMILY_MUTEX, ZKL_FAMILY_LEASE,
                                  ZKL_FAMILY_RW, ZKL_FAMILY_READ,
                                  ZKL_FAMILY_WRITE, ZKL_FAMILY_LATCH };
  int i = luaL_checkoption(L, idx, "mutex", names);
  if (i == 6) { if (family) *family = -1; return NULL; }
  if (family) *family = families[i];
  return zkl_markers(families[i]);
}

void zkl_checkfork(lua_State *L, zkl_client *c, const char *what) {
  if (zkl_client_forked(c)) {
    if (what)
      luaL_error(L, "zklock: this %s belongs to a client of process %d and "
                 "cannot be used in a forked child", what,
                 (int)zkl_client_pid(c));
    luaL_error(L, "zklock: this client was opened in process %d and cannot "
               "be used in process %d (a forked child): connect again in "
               "the child (under nginx: in init_worker_by_lua*)",
               (int)zkl_client_pid(c), (int)getpid());
  }
}

zkl_client *zkl_checkclient(lua_State *L, int idx) {
  zkl_client_box *b = (zkl_client_box *)luaL_checkudata(L, idx, ZKL_CLIENT_MT);
  luaL_argcheck(L, b->c != NULL, idx, "client is closed");
  zkl_checkfork(L, b->c, NULL);
  return b->c;
}
