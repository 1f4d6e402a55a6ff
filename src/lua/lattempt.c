/* Lua binding: one lock attempt (one node's life) per userdata
 * (zklock.attempt, made by client:_lock), and the plain boxes that give
 * recipe objects (zklock.mutex...) userdata identity and a __gc that
 * LuaJIT honours. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lbind.h"

typedef struct { zkl_attempt *l; } lattempt_box;

/* max_hold at idx (none: 0), however it comes in: client:_lock, relock,
 * pass.  The core sets it (hold_limit); the binding only checks it. */
static double lattempt_opt_max_hold(lua_State *L, int idx) {
  double s = luaL_optnumber(L, idx, 0);
  luaL_argcheck(L, s >= 0 && s < 1e9, idx,
                "max_hold must be a number of seconds >= 0");
  return s;
}

static const char *const lattempt_status[] = { "pending", "held", "done",
                                               "failed", "waiting" };

/* client:_lock(path, kind, max_leases, data, ignore [, max_hold])
 *   -> attempt */
static int lattempt_new(lua_State *L) {
  static const char *const kinds[] = { "mutex", "lease", "read", "write",
                                       "latch", NULL };
  zkl_client *c = zkl_checkclient(L, 1);
  const char *path = zkl_checkpath(L, 2);
  int kind = luaL_checkoption(L, 3, "mutex", kinds);
  int max_leases = lua_isnoneornil(L, 4) ? 1
                   : zkl_checkrange(L, 4, 1, 0x7fffffff, "max_leases");
  size_t dlen = 0;
  const char *data = zkl_checkdata(L, 5, c, &dlen, 1, "");
  const char *ignore = luaL_optstring(L, 6, NULL);
  double max_hold;
  zkl_error err;
  lattempt_box *b;
  /* ignore: a child's name (our own write node), not a path */
  luaL_argcheck(L, !ignore || (*ignore && !strchr(ignore, '/') &&
                               strlen(ignore) < 256), 6,
                "node name expected");
  max_hold = lattempt_opt_max_hold(L, 7);
  b = (lattempt_box *)lua_newuserdata(L, sizeof *b);
  b->l = NULL;
  luaL_setmetatable(L, ZKL_ATTEMPT_MT);
  b->l = zkl_attempt_new(c, path, kind, max_leases, data, (int)dlen, ignore,
                         &err);
  if (!b->l) return luaL_error(L, "zklock: %s", err.msg);
  if (max_hold > 0) zkl_attempt_max_hold(b->l, max_hold);
  return 1;
}

static zkl_attempt *lattempt_check(lua_State *L) {
  lattempt_box *b = (lattempt_box *)luaL_checkudata(L, 1, ZKL_ATTEMPT_MT);
  luaL_argcheck(L, b->l != NULL, 1, "lock attempt is gone");
  zkl_checkfork(L, zkl_attempt_client(b->l), "lock");
  return b->l;
}

/* attempt:start() -> true | nil, msg, code */
static int lattempt_start(lua_State *L) {
  zkl_error err;
  if (!zkl_attempt_start(lattempt_check(L), &err)) return zkl_pusherr(L, &err);
  lua_pushboolean(L, 1);
  return 1;
}

/* attempt:poll() -> status, gen [, msg, code] */
static int lattempt_poll(lua_State *L) {
  zkl_error err;
  unsigned long gen;
  int st = zkl_attempt_poll(lattempt_check(L), &gen, &err);
  lua_pushstring(L, lattempt_status[st]);
  lua_pushnumber(L, (lua_Number)gen);
  if (st != ZKL_FAILED) return 2;
  lua_pushstring(L, err.msg);
  lua_pushstring(L, zkl_code_name(err.code));
  return 4;
}

static int lattempt_release(lua_State *L) {
  zkl_attempt_release(lattempt_check(L));
  return 0;
}

static int lattempt_held(lua_State *L) {
  lua_pushboolean(L, zkl_attempt_held(lattempt_check(L)));
  return 1;
}

/* attempt:overdue() -> past its max_hold */
static int lattempt_overdue(lua_State *L) {
  lua_pushboolean(L, zkl_attempt_overdue(lattempt_check(L)));
  return 1;
}

/* attempt:extend(seconds) -> true (the hold that is on now ends seconds
 * from now; math.huge, or 1e9 and more: never) | false (not held now:
 * nothing changed).  docs/design.md, section 9.6; lock/extend.lua checks
 * the argument's words first. */
static int lattempt_extend(lua_State *L) {
  zkl_attempt *l = lattempt_check(L);
  double s = luaL_checknumber(L, 2);
  luaL_argcheck(L, s > 0, 2, "extend must be a number of seconds > 0");
  lua_pushboolean(L, zkl_attempt_extend(l, s));
  return 1;
}

/* attempt:info() -> node name | nil, czxid | nil */
static int lattempt_info(lua_State *L) {
  char node[200];
  int64_t czxid;
  if (!zkl_attempt_info(lattempt_check(L), node, sizeof node, &czxid)) {
    lua_pushnil(L);
    lua_pushnil(L);
    return 2;
  }
  lua_pushstring(L, node);
  zkl_pushint64(L, czxid);
  return 2;
}

/* attempt:ahead() -> nodes ahead of ours at the first listing (0: held
 * at once), or nil before it */
static int lattempt_ahead(lua_State *L) {
  int ahead = zkl_attempt_ahead(lattempt_check(L));
  if (ahead < 0) lua_pushnil(L); else lua_pushinteger(L, ahead);
  return 1;
}

/* attempt:read_with(path): before start, read `path` with the acquire
 * (docs/design.md, section 4.12) */
static int lattempt_read_with(lua_State *L) {
  zkl_attempt *l = lattempt_check(L);
  const char *path = zkl_checkpath(L, 2);
  zkl_error err;
  if (!zkl_attempt_read_with(l, path, &err))
    return luaL_error(L, "zklock: %s", err.msg);
  return 0;
}

/* attempt:read_result() -> data, version | nil (no node) | nil, msg, code */
static int lattempt_read_result(lua_State *L) {
  zkl_attempt *l = lattempt_check(L);
  int len = 0, cap, found;
  int64_t version = 0;
  char *buf;
  zkl_error err;
  found = zkl_attempt_read_result(l, NULL, &len, &version, &err); /* length */
  if (found < 0) return zkl_pusherr(L, &err);
  if (found == 0) {
    lua_pushnil(L);
    return 1;
  }
  /* a buffer Lua owns: nothing leaks if pushing raises */
  cap = len;
  buf = (char *)lua_newuserdata(L, cap > 0 ? (size_t)cap : 1);
  found = zkl_attempt_read_result(l, buf, &len, &version, &err);
  if (found < 0) return zkl_pusherr(L, &err);
  lua_pushlstring(L, buf, (size_t)(len < cap ? len : cap));
  zkl_pushint64(L, version);
  return 2;
}

/* attempt:release_write(path, data) -> true | nil, msg, code: end the hold
 * with one multi-op writing `data` to `path` */
static int lattempt_release_write(lua_State *L) {
  zkl_attempt *l = lattempt_check(L);
  const char *path = zkl_checkpath(L, 2);
  size_t len = 0;
  const char *data = zkl_checkdata(L, 3, zkl_attempt_client(l), &len, 0, NULL);
  zkl_error err;
  if (!zkl_attempt_release_write(l, path, data, (int)len, &err))
    return zkl_pusherr(L, &err);
  lua_pushboolean(L, 1);
  return 1;
}

/* attempt:write_result() -> version, zxid | nil, msg, code */
static int lattempt_write_result(lua_State *L) {
  int64_t version = 0, zxid = 0;
  zkl_error err;
  if (!zkl_attempt_write_result(lattempt_check(L), &version, &zxid, &err))
    return zkl_pusherr(L, &err);
  zkl_pushint64(L, version);
  zkl_pushint64(L, zxid);
  return 2;
}

/* attempt:linger(seconds) -> true (the node lingers) | false (released) */
static int lattempt_linger(lua_State *L) {
  zkl_attempt *l = lattempt_check(L);
  double s = luaL_checknumber(L, 2);
  luaL_argcheck(L, s > 0 && s < 1e9, 2, "linger must be seconds > 0");
  lua_pushboolean(L, zkl_attempt_linger(l, s));
  return 1;
}

/* attempt:relock([max_hold [, may_wait]]) -> true (held again, no
 * request) | false (given up) | "listing" (may_wait: not known yet) */
static int lattempt_relock(lua_State *L) {
  zkl_attempt *l = lattempt_check(L);
  double max_hold = lattempt_opt_max_hold(L, 2);
  int r = zkl_attempt_relock(l, max_hold, lua_toboolean(L, 3));
  if (r < 0) lua_pushliteral(L, "listing");
  else lua_pushboolean(L, r);
  return 1;
}

/* attempt:watch_contenders(): a hold that will linger watches its
 * directory now (docs/design.md, section 4.13) */
static int lattempt_watch_contenders(lua_State *L) {
  zkl_attempt_watch_contenders(lattempt_check(L));
  return 0;
}

/* attempt:pass([max_hold]) -> true when held and passed to another waiter
 * of this client, the node kept (docs/design.md, section 16) */
static int lattempt_pass(lua_State *L) {
  zkl_attempt *l = lattempt_check(L);
  lua_pushboolean(L, zkl_attempt_pass(l, lattempt_opt_max_hold(L, 2)));
  return 1;
}

/* attempt:revoke_asked() -> true when our node was asked to revoke (read
 * as "__REVOKE__" while held and revocable): not to be passed on */
static int lattempt_revoke_asked(lua_State *L) {
  lua_pushboolean(L, zkl_attempt_revoke_asked(lattempt_check(L)));
  return 1;
}

/* attempt:gone_first() -> true when our release's delete found our node
 * deleted by someone else (a hold lost, noticed at its release) */
static int lattempt_gone_first(lua_State *L) {
  lua_pushboolean(L, zkl_attempt_gone_first(lattempt_check(L)));
  return 1;
}

/* attempt:contenders() -> contended, listed: another node seen in the
 * directory since watch_contenders; listed: nil (no watch), false (its
 * first listing is out), true (the last one answered), "changed" (the
 * directory changed since: its listing is out) */
static int lattempt_contenders(lua_State *L) {
  int listed;
  lua_pushboolean(L, zkl_attempt_contenders(lattempt_check(L), &listed));
  if (listed < 0) lua_pushnil(L);
  else if (listed == 2) lua_pushliteral(L, "changed");
  else lua_pushboolean(L, listed);
  return 2;
}

/* attempt:rest_on(write_attempt | nil): a downgraded read holds only
 * while that write attempt (of the same client) does */
static int lattempt_rest_on(lua_State *L) {
  zkl_attempt *l = lattempt_check(L), *w = NULL;
  if (!lua_isnoneornil(L, 2)) {
    lattempt_box *b = (lattempt_box *)luaL_checkudata(L, 2, ZKL_ATTEMPT_MT);
    luaL_argcheck(L, b->l != NULL, 2, "lock attempt is gone");
    luaL_argcheck(L, zkl_attempt_client(b->l) == zkl_attempt_client(l) &&
                  b->l != l, 2, "another attempt of the same client expected");
    w = b->l;
  }
  zkl_attempt_rest_on(l, w);
  return 0;
}

/* attempt:serial() -> n: tells this attempt's events (client:_events()
 * entries' third field) from those of the client's other attempts */
static int lattempt_serial(lua_State *L) {
  lua_pushnumber(L, (lua_Number)zkl_attempt_serial(lattempt_check(L)));
  return 1;
}

/* attempt:notify_held(): queue a "held" event when it comes to hold */
static int lattempt_notify_held(lua_State *L) {
  zkl_attempt_notify_held(lattempt_check(L));
  return 0;
}

/* attempt:ttl(seconds, by_id): before start, a mutex's node is
 * persistent with that TTL, renewed, and (by_id) named after the
 * participant id (docs/design.md, section 4.15) */
static int lattempt_ttl(lua_State *L) {
  zkl_attempt *l = lattempt_check(L);
  double s = luaL_checknumber(L, 2);
  int by_id = lua_toboolean(L, 3);
  zkl_error err;
  luaL_argcheck(L, s >= 0.001 && s < 1e9, 2,
                "ttl must be a number of seconds > 0");
  if (!zkl_attempt_ttl(l, s, by_id, &err))
    return luaL_error(L, "zklock: %s", err.msg);
  return 0;
}

/* attempt:revocable(): watch our node for revocation requests */
static int lattempt_revocable(lua_State *L) {
  zkl_attempt_revocable(lattempt_check(L));
  return 0;
}

/* attempt:_wake(id) -> gen: from now on a change of this attempt queues
 * `id` on the client's ready list (OpenResty waiter); the client's change
 * counter read at the same moment tells whether anything moved before. */
static int lattempt_wake(lua_State *L) {
  zkl_attempt *l = lattempt_check(L);
  unsigned id = (unsigned)luaL_checkinteger(L, 2);
  lua_pushnumber(L, (lua_Number)zkl_attempt_set_wake(l, id));
  return 1;
}

static int lattempt_gc(lua_State *L) {
  lattempt_box *b = (lattempt_box *)luaL_checkudata(L, 1, ZKL_ATTEMPT_MT);
  if (b->l) {
    zkl_attempt *l = b->l;
    b->l = NULL;
    if (!zkl_client_forked(zkl_attempt_client(l))) zkl_attempt_drop(l);
  }
  return 0;
}

static int lattempt_tostring(lua_State *L) {
  lattempt_box *b = (lattempt_box *)luaL_checkudata(L, 1, ZKL_ATTEMPT_MT);
  if (!b->l) {
    lua_pushfstring(L, "zklock.attempt{gone}: %p", (void *)b);
  } else if (zkl_client_forked(zkl_attempt_client(b->l))) {
    /* (its mutex is the parent's) */
    lua_pushfstring(L, "zklock.attempt{%s, forked}: %p",
                    zkl_attempt_path(b->l), (void *)b);
  } else {
    char node[200];
    int64_t czxid;
    if (!zkl_attempt_info(b->l, node, sizeof node, &czxid))
      snprintf(node, sizeof node, "-");
    lua_pushfstring(L, "zklock.attempt{%s/%s}: %p", zkl_attempt_path(b->l),
                    node, (void *)b);
  }
  return 1;
}

/* core.box(mt, fields) -> userdata with metatable mt and fields as its
 * user value; core.unbox(u) -> fields.  Recipe objects are such boxes: a
 * userdata identity, Lua methods in mt. */
static int lattempt_boxnew(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
#if LUA_VERSION_NUM >= 504
  lua_newuserdatauv(L, 0, 1);
#else
  lua_newuserdata(L, 0);
#endif
  lua_pushvalue(L, 2);
  zkl_setuservalue(L, -2);
  lua_pushvalue(L, 1);
  lua_setmetatable(L, -2);
  return 1;
}

static int lattempt_unbox(lua_State *L) {
  if (lua_type(L, 1) != LUA_TUSERDATA) {
    lua_pushnil(L);
    return 1;
  }
  zkl_getuservalue(L, 1);
  if (!lua_istable(L, -1)) lua_pushnil(L);
  return 1;
}

void zkl_open_attempt(lua_State *L) {
  static const luaL_Reg methods[] = {
    { "start", lattempt_start },
    { "poll", lattempt_poll },
    { "release", lattempt_release },
    { "held", lattempt_held },
    { "overdue", lattempt_overdue },
    { "extend", lattempt_extend },
    { "info", lattempt_info },
    { "ahead", lattempt_ahead },
    { "revocable", lattempt_revocable },
    { "ttl", lattempt_ttl },
    { "notify_held", lattempt_notify_held },
    { "serial", lattempt_serial },
    { "rest_on", lattempt_rest_on },
    { "read_with", lattempt_read_with },
    { "linger", lattempt_linger },
    { "relock", lattempt_relock },
    { "watch_contenders", lattempt_watch_contenders },
    { "pass", lattempt_pass },
    { "contenders", lattempt_contenders },
    { "revoke_asked", lattempt_revoke_asked },
    { "gone_first", lattempt_gone_first },
    { "read_result", lattempt_read_result },
    { "release_write", lattempt_release_write },
    { "write_result", lattempt_write_result },
    { "_wake", lattempt_wake },
    { NULL, NULL }
  };
  static const luaL_Reg meta[] = {
    { "__gc", lattempt_gc },
    { "__tostring", lattempt_tostring },
    { NULL, NULL }
  };
  static const luaL_Reg funcs[] = {
    { "box", lattempt_boxnew },
    { "unbox", lattempt_unbox },
    { NULL, NULL }
  };
  zkl_setmeta(L, ZKL_ATTEMPT_MT, methods, meta);
  luaL_setfuncs(L, funcs, 0);
  luaL_getmetatable(L, ZKL_CLIENT_MT); /* client:_lock */
  lua_getfield(L, -1, "__index");
  lua_pushcfunction(L, lattempt_new);
  lua_setfield(L, -2, "_lock");
  lua_pop(L, 2);
}
