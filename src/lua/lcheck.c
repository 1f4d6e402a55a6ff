/* Argument checks of the binding: paths, connect strings, data, marker
 * families, and the client a call is made on (open, same process).  Why a
 * path or connect string is refused is core/base/paths.c's to say; this file
 * words the message ("reason: what was given") for the binding's own
 * checks and for zklock.runtime's (core.path_problem). */
#include <string.h>
#include <unistd.h>

#include "lbind.h"

/* Pushes "reason: s" (just the reason for an empty s; the string shows up
 * to its first NUL) and returns it. */
static const char *lcheck_push(lua_State *L, const char *why, const char *s,
                               size_t len) {
  return len ? lua_pushfstring(L, "%s: %s", why, s)
             : lua_pushfstring(L, "%s", why);
}

/* The message for the path at idx (a string) when refused (pushed), or
 * NULL (nothing pushed); max: its longest length (0: ZKL_PATH_MAX). */
static const char *lcheck_path(lua_State *L, int idx, size_t max) {
  size_t len;
  const char *p = lua_tolstring(L, idx, &len), *why;
  char buf[128];
  why = zkl_path_problem(p, len, max, buf, sizeof buf);
  return why ? lcheck_push(L, why, p, len) : NULL;
}

static const char *lcheck_hosts(lua_State *L, int idx) {
  size_t len;
  const char *h = lua_tolstring(L, idx, &len), *why;
  char buf[320];
  why = zkl_hosts_problem(h, len, buf, sizeof buf);
  return why ? lcheck_push(L, why, h, len) : NULL;
}

const char *zkl_checkpath(lua_State *L, int idx) {
  const char *p = luaL_checkstring(L, idx), *why = lcheck_path(L, idx, 0);
  if (why) luaL_argerror(L, idx, why);
  return p;
}

const char *zkl_checkhosts(lua_State *L, int idx) {
  const char *h = luaL_checkstring(L, idx), *why = lcheck_hosts(L, idx);
  if (why) luaL_argerror(L, idx, why);
  return h;
}

/* core.path_problem(path [, max]) -> nil | "reason: path": why ZooKeeper
 * would refuse the path (max: its longest length, default and at most
 * core.PATH_MAX).  zklock.runtime raises with it, as the caller's error. */
static int lcheck_path_problem(lua_State *L) {
  size_t max;
  luaL_checkstring(L, 1);
  max = lua_isnoneornil(L, 2) ? 0
        : (size_t)zkl_checkrange(L, 2, 2, ZKL_PATH_MAX, "max");
  if (!lcheck_path(L, 1, max)) lua_pushnil(L);
  return 1;
}

/* core.hosts_problem(hosts) -> nil | "reason: hosts" (a connect string) */
static int lcheck_hosts_problem(lua_State *L) {
  luaL_checkstring(L, 1);
  if (!lcheck_hosts(L, 1)) lua_pushnil(L);
  return 1;
}

void zkl_open_check(lua_State *L) {
  static const luaL_Reg funcs[] = {
    { "path_problem", lcheck_path_problem },
    { "hosts_problem", lcheck_hosts_problem },
    { NULL, NULL }
  };
  luaL_setfuncs(L, funcs, 0);
  lua_pushinteger(L, ZKL_PATH_MAX);
  lua_setfield(L, -2, "PATH_MAX");
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
