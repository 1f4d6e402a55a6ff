/* Lua binding of the pure name functions (core/base/names.c): lock order,
 * holders, and the read/write lock's downgrade check, so that Lua never
 * spells a marker or repeats who holds. */
#include "lbind.h"

/* The strings of the table at idx, sorted as contenders of `markers`
 * (scratch arrays on the Lua stack); returns their count. */
static int lnames_sorted(lua_State *L, int idx, const char *const *markers,
                         zkl_entry **out) {
  int i, n;
  const char **names;
  luaL_checktype(L, idx, LUA_TTABLE);
  n = (int)zkl_rawlen(L, idx);
  names = (const char **)lua_newuserdata(L, sizeof *names * (size_t)(n + 1));
  *out = (zkl_entry *)lua_newuserdata(L, sizeof **out * (size_t)(n + 1));
  for (i = 0; i < n; i++) {
    lua_rawgeti(L, idx, i + 1);
    luaL_argcheck(L, lua_type(L, -1) == LUA_TSTRING, idx, "strings expected");
    names[i] = lua_tostring(L, -1);
    lua_pop(L, 1); /* the table keeps the string alive */
  }
  return zkl_names_sort((char *const *)names, n, markers, *out);
}

/* core.sort_names({names}, family) -> { {name=, seq=}... } in lock order */
static int lnames_sort(lua_State *L) {
  const char *const *markers = zkl_checkmarkers(L, 2, NULL);
  zkl_entry *e;
  int i, k;
  luaL_argcheck(L, markers != NULL, 2, "a marker family expected");
  k = lnames_sorted(L, 1, markers, &e);
  lua_createtable(L, k, 0);
  for (i = 0; i < k; i++) {
    lua_createtable(L, 0, 2);
    lua_pushstring(L, e[i].name);
    lua_setfield(L, -2, "name");
    lua_pushnumber(L, (lua_Number)e[i].seq);
    lua_setfield(L, -2, "seq");
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* core.holders({names}, family [, max_leases]) -> { names of the holders,
 * in order }: by the rule each lock attempt applies to itself */
static int lnames_holders(lua_State *L) {
  int family, i, k, n;
  const char *const *markers = zkl_checkmarkers(L, 2, &family);
  int max = lua_isnoneornil(L, 3) ? 1
            : zkl_checkrange(L, 3, 1, 0x7fffffff, "max_leases");
  zkl_entry *e;
  int *idx;
  luaL_argcheck(L, markers != NULL, 2, "a marker family expected");
  n = lnames_sorted(L, 1, markers, &e);
  idx = (int *)lua_newuserdata(L, sizeof *idx * (size_t)(n + 1));
  k = zkl_names_holders(family, max, e, n, idx);
  lua_createtable(L, k, 0);
  for (i = 0; i < k; i++) {
    lua_pushstring(L, e[idx[i]].name);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* core.blocker({names}, kind, ours [, ignore]) -> name | false, sole,
 * ahead (the nodes ahead that hold it back); or
 * nil when ours is not among the names: whom a lock attempt of `kind`
 * ("mutex", "read", "write", "latch") with node `ours` waits for, as the
 * completion thread decides it (one pass, unsorted: zkl_names_scan) */
static int lnames_blocker(lua_State *L) {
  static const char *const kinds[] = { "mutex", "lease", "read", "write",
                                       "latch", NULL };
  static const int kind_of[] = { ZKL_KIND_MUTEX, ZKL_KIND_LEASE,
                                 ZKL_KIND_READ, ZKL_KIND_WRITE,
                                 ZKL_KIND_LATCH };
  int i, n, kind, ahead;
  const char **names, *blocker;
  const char *ours, *ignore;
  luaL_checktype(L, 1, LUA_TTABLE);
  kind = kind_of[luaL_checkoption(L, 2, NULL, kinds)];
  ours = luaL_checkstring(L, 3);
  ignore = luaL_optstring(L, 4, NULL);
  luaL_argcheck(L, kind != ZKL_KIND_LEASE, 2, "a lease is counted, not "
                "ordered");
  n = (int)zkl_rawlen(L, 1);
  names = (const char **)lua_newuserdata(L, sizeof *names * (size_t)(n + 1));
  for (i = 0; i < n; i++) {
    lua_rawgeti(L, 1, i + 1);
    luaL_argcheck(L, lua_type(L, -1) == LUA_TSTRING, 1, "strings expected");
    names[i] = lua_tostring(L, -1);
    lua_pop(L, 1); /* the table keeps the string alive */
  }
  if (!zkl_names_scan(kind, (char *const *)names, n, ours, ignore, &blocker,
                      &ahead)) {
    lua_pushnil(L);
    return 1;
  }
  if (blocker) lua_pushstring(L, blocker); else lua_pushboolean(L, 0);
  lua_pushboolean(L, ahead == 1);
  lua_pushinteger(L, ahead);
  return 3;
}

/* core.writer_between({names}, w, r) -> boolean: a writer's node sorts
 * between our write node w and our read node r (names of a read/write
 * lock's directory; w or r may be nil) */
static int lnames_writer_between(lua_State *L) {
  const char *w = luaL_optstring(L, 2, NULL), *r = luaL_optstring(L, 3, NULL);
  zkl_entry *e;
  int n = lnames_sorted(L, 1, zkl_markers(ZKL_FAMILY_RW), &e);
  lua_pushboolean(L, zkl_names_writer_between(e, n, w, r) == 1);
  return 1;
}

/* core.uuid() -> a random (v4) uuid */
static int lnames_uuid(lua_State *L) {
  char u[40];
  if (!zkl_uuid(u))
    return luaL_error(L, "zklock: no random bytes (getrandom and "
                      "/dev/urandom both failed)");
  lua_pushstring(L, u);
  return 1;
}


/* core.config_hosts(data) -> hosts, count, version: the client addresses
 * of an ensemble's configuration (the data of /zookeeper/config) as a
 * connect string (nil when no member has one), how many, and the
 * configuration's version (a hex string, exact under LuaJIT too); nil,
 * message when it does not parse (core/base/ensemble.c). */
static int lnames_config_hosts(lua_State *L) {
  size_t len;
  const char *data = luaL_checklstring(L, 1, &len);
  size_t size = len + 2; /* (every member adds at most its own line) */
  char *out = (char *)lua_newuserdata(L, size);
  uint64_t version;
  char hex[17];
  int n = zkl_config_hosts(data, len, out, size, &version);
  if (n < 0) {
    lua_pushnil(L);
    lua_pushliteral(L, "ensemble configuration does not parse");
    return 2;
  }
  if (n > 0) lua_pushstring(L, out);
  else lua_pushnil(L);
  lua_pushinteger(L, n);
  snprintf(hex, sizeof hex, "%llx", (unsigned long long)version);
  lua_pushstring(L, hex);
  return 3;
}

void zkl_open_names(lua_State *L) {
  static const luaL_Reg funcs[] = {
    { "sort_names", lnames_sort },
    { "holders", lnames_holders },
    { "blocker", lnames_blocker },
    { "writer_between", lnames_writer_between },
    { "uuid", lnames_uuid },
    { "config_hosts", lnames_config_hosts },
    { NULL, NULL }
  };
  luaL_setfuncs(L, funcs, 0);
}
