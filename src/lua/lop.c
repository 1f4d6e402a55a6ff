/* Lua binding: ops (zklock.op), the one-shot tasks Lua polls for, and the
 * client methods that start them (client:_children, _create, _delete,
 * _set, _fenced, _get, _wait_gone, _db). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lbind.h"

typedef struct { zkl_op *op; } lop_box;

static lop_box *lop_check(lua_State *L) {
  lop_box *b = (lop_box *)luaL_checkudata(L, 1, ZKL_OP_MT);
  luaL_argcheck(L, b->op != NULL, 1, "operation is gone");
  zkl_checkfork(L, zkl_op_client(b->op), NULL);
  return b;
}

/* op:poll() -> "pending" | "done", gen */
static int lop_poll(lua_State *L) {
  lop_box *b = lop_check(L);
  unsigned long gen;
  lua_pushstring(L, zkl_op_poll(b->op, &gen) ? "done" : "pending");
  lua_pushnumber(L, (lua_Number)gen);
  return 2;
}

/* The records of a holders op: { {node=, id=, token=, session=}... } */
static int lop_holders_result(lua_State *L, zkl_op *op) {
  zkl_holder *h;
  int n, i, k = 0;
  zkl_error err;
  char sid[24];
  if (!zkl_op_take_holders(op, &h, &n, &err)) return zkl_pusherr(L, &err);
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    if (!h[i].present) continue; /* (it went meanwhile) */
    lua_createtable(L, 0, 4);
    lua_pushstring(L, h[i].node);
    lua_setfield(L, -2, "node");
    lua_pushlstring(L, h[i].data ? h[i].data : "", (size_t)h[i].datalen);
    lua_setfield(L, -2, "id");
    zkl_pushint64(L, h[i].czxid);
    lua_setfield(L, -2, "token");
    snprintf(sid, sizeof sid, "0x%llx", (unsigned long long)h[i].session);
    lua_pushstring(L, sid);
    lua_setfield(L, -2, "session");
    lua_rawseti(L, -2, ++k);
  }
  zkl_holders_free(h, n);
  return 1;
}

/* op:result() -> names (listing) | data, version (get) | records (holders)
 *   | version, zxid (fenced) | true, created/deleted | nil, msg, code
 * (taken out of the op first, pushed after: pushing may run a __gc that
 * needs the core) */
static int lop_result(lua_State *L) {
  lop_box *b = lop_check(L);
  int kind = zkl_op_kind(b->op), i;
  zkl_op_result res;
  if (kind == ZKL_OP_HOLDERS) return lop_holders_result(L, b->op);
  zkl_op_take(b->op, &res);
  if (!res.done || res.err.code != ZKL_OK) {
    if (!res.done) zkl_seterr(&res.err, ZKL_ETIMEOUT, "not done");
    zkl_op_result_free(&res);
    return zkl_pusherr(L, &res.err);
  }
  switch (kind) {
  case ZKL_OP_GET:
    lua_pushlstring(L, res.data ? res.data : "", (size_t)res.datalen);
    lua_pushinteger(L, res.result);
    break;
  case ZKL_OP_FENCED:
    lua_pushinteger(L, res.result);
    zkl_pushint64(L, res.zxid);
    break;
  case ZKL_OP_CHILDREN:
    lua_createtable(L, res.n, 0);
    for (i = 0; i < res.n; i++) {
      lua_pushstring(L, res.names[i]);
      lua_rawseti(L, -2, i + 1);
    }
    break;
  default:
    lua_pushboolean(L, 1);
    lua_pushboolean(L, res.result);
    break;
  }
  zkl_op_result_free(&res);
  return kind == ZKL_OP_CHILDREN ? 1 : 2;
}

/* op:_wake(id) -> gen: see attempt:_wake */
static int lop_wake(lua_State *L) {
  zkl_op *op = lop_check(L)->op;
  unsigned id = (unsigned)luaL_checkinteger(L, 2);
  lua_pushnumber(L, (lua_Number)zkl_op_set_wake(op, id));
  return 1;
}

/* op:cancel() -> true when it stopped the op, false when it had finished */
static int lop_cancel(lua_State *L) {
  lua_pushboolean(L, zkl_op_cancel(lop_check(L)->op));
  return 1;
}

/* op:_fire() -> true when it fired the signal (client:_signal) */
static int lop_fire(lua_State *L) {
  lua_pushboolean(L, zkl_op_fire(lop_check(L)->op));
  return 1;
}

static int lop_gc(lua_State *L) {
  lop_box *b = (lop_box *)luaL_checkudata(L, 1, ZKL_OP_MT);
  if (b->op) {
    zkl_op *op = b->op;
    b->op = NULL;
    if (!zkl_client_forked(zkl_op_client(op))) zkl_op_drop(op);
  }
  return 0;
}

/* The box first (allocating it may raise), the op after: an op started
 * always has a box to let go of it.  b is on top of the stack. */
static lop_box *lop_box_new(lua_State *L) {
  lop_box *b = (lop_box *)lua_newuserdata(L, sizeof *b);
  b->op = NULL;
  luaL_setmetatable(L, ZKL_OP_MT);
  return b;
}

static int lop_push(lua_State *L, lop_box *b, zkl_op *op,
                    const zkl_error *err) {
  if (!op) { lua_pop(L, 1); return zkl_pusherr(L, err); }
  b->op = op;
  return 1;
}

/* client:_children(path, markers) -> op | nil, msg, code */
static int lop_children(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  const char *path = zkl_checkpath(L, 2);
  const char *const *markers = zkl_checkmarkers(L, 3, NULL);
  zkl_error err;
  lop_box *b = lop_box_new(L);
  return lop_push(L, b, zkl_op_children(c, path, markers, &err), &err);
}

/* client:_create(path, data|nil, "persistent"|"ephemeral") -> op */
static int lop_create(lua_State *L) {
  static const char *const modes[] = { "persistent", "ephemeral", NULL };
  zkl_client *c = zkl_checkclient(L, 1);
  const char *path = zkl_checkpath(L, 2);
  size_t len = 0;
  const char *data = zkl_checkdata(L, 3, c, &len, 1, NULL);
  int mode = luaL_checkoption(L, 4, "persistent", modes);
  zkl_error err;
  lop_box *b = lop_box_new(L);
  return lop_push(L, b, zkl_op_create(c, path, data, (int)len,
                                      mode ? ZOO_EPHEMERAL : 0, &err), &err);
}

static int lop_delete(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  const char *path = zkl_checkpath(L, 2);
  zkl_error err;
  lop_box *b = lop_box_new(L);
  return lop_push(L, b, zkl_op_delete(c, path, &err), &err);
}

/* client:_set(path, data [, create]) -> op: create (with its parents)
 * when missing, if asked */
static int lop_set(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  const char *path = zkl_checkpath(L, 2);
  size_t len;
  const char *data = zkl_checkdata(L, 3, c, &len, 0, NULL);
  int create = lua_toboolean(L, 4);
  zkl_error err;
  lop_box *b = lop_box_new(L);
  return lop_push(L, b, zkl_op_set(c, path, data, (int)len, create, &err),
                  &err);
}

/* client:_fenced(lock_node, path, data [, expect]) -> op; expect: the data
 * version path must still have, or -2: that it must not exist (else
 * bad_version); none: set or create */
static int lop_fenced(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  const char *node = zkl_checkpath(L, 2);
  const char *path = zkl_checkpath(L, 3);
  size_t len;
  const char *data = zkl_checkdata(L, 4, c, &len, 0, NULL);
  lua_Integer expect = luaL_optinteger(L, 5, ZKL_ANY_VERSION);
  zkl_error err;
  lop_box *b;
  luaL_argcheck(L, expect >= ZKL_ABSENT && expect <= 0x7fffffff, 5,
                "a data version, or -2 (absent), expected");
  b = lop_box_new(L);
  return lop_push(L, b, zkl_op_fenced(c, node, path, data, (int)len,
                                      (int)expect, &err), &err);
}

static int lop_get(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  const char *path = zkl_checkpath(L, 2);
  zkl_error err;
  lop_box *b = lop_box_new(L);
  return lop_push(L, b, zkl_op_get(c, path, &err), &err);
}

/* client:_signal() -> op, done once fired (docs/design.md, section 16) */
static int lop_signal(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  zkl_error err;
  lop_box *b = lop_box_new(L);
  return lop_push(L, b, zkl_op_signal(c, &err), &err);
}

static int lop_wait_gone(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  const char *path = zkl_checkpath(L, 2);
  zkl_error err;
  lop_box *b = lop_box_new(L);
  return lop_push(L, b, zkl_op_wait_gone(c, path, &err), &err);
}

/* client:_holders(dir, family [, max_leases, which, all, sync]) -> op: the
 * holders ("read"/"write": of that kind only; all: every contender) */
static int lop_holders(lua_State *L) {
  static const char *const kinds[] = { "any", "read", "write", NULL };
  zkl_client *c = zkl_checkclient(L, 1);
  const char *dir = zkl_checkpath(L, 2);
  int family;
  const char *const *markers = zkl_checkmarkers(L, 3, &family);
  int max = lua_isnoneornil(L, 4) ? 1
            : zkl_checkrange(L, 4, 1, 0x7fffffff, "max_leases");
  int which = luaL_checkoption(L, 5, "any", kinds) - 1;
  int all = lua_toboolean(L, 6);
  int sync = lua_toboolean(L, 7);
  zkl_error err;
  lop_box *b;
  luaL_argcheck(L, markers != NULL, 3, "a marker family expected");
  b = lop_box_new(L);
  return lop_push(L, b, zkl_op_holders(c, dir, family, max, which, all, sync,
                                       &err), &err);
}

/* client:_db("enter"|"leave", path, our_node_path, members) -> op */
static int lop_db(lua_State *L) {
  static const char *const kinds[] = { "enter", "leave", NULL };
  zkl_client *c = zkl_checkclient(L, 1);
  int leave = luaL_checkoption(L, 2, NULL, kinds);
  const char *path = zkl_checkpath(L, 3);
  const char *ours = zkl_checkpath(L, 4);
  int members = lua_isnoneornil(L, 5) ? 1
                : zkl_checkrange(L, 5, 1, 0x7fffffff, "members");
  size_t n = strlen(path);
  zkl_error err;
  lop_box *b;
  /* our member node is a child of the barrier: "<path>/<name>" */
  luaL_argcheck(L, strncmp(ours, path, n) == 0 && ours[n] == '/' &&
                !strchr(ours + n + 1, '/'), 4,
                "member node must be a child of the barrier's path");
  b = lop_box_new(L);
  return lop_push(L, b, leave ? zkl_op_db_leave(c, path, ours, &err)
                              : zkl_op_db_enter(c, path, ours, members, &err),
                  &err);
}

void zkl_open_op(lua_State *L) {
  static const luaL_Reg methods[] = {
    { "poll", lop_poll },
    { "result", lop_result },
    { "cancel", lop_cancel },
    { "_wake", lop_wake },
    { "_fire", lop_fire },
    { NULL, NULL }
  };
  static const luaL_Reg meta[] = {
    { "__gc", lop_gc },
    { NULL, NULL }
  };
  static const luaL_Reg client_methods[] = {
    { "_children", lop_children },
    { "_create", lop_create },
    { "_delete", lop_delete },
    { "_set", lop_set },
    { "_fenced", lop_fenced },
    { "_get", lop_get },
    { "_wait_gone", lop_wait_gone },
    { "_db", lop_db },
    { "_holders", lop_holders },
    { "_signal", lop_signal },
    { NULL, NULL }
  };
  zkl_setmeta(L, ZKL_OP_MT, methods, meta);
  luaL_getmetatable(L, ZKL_CLIENT_MT);
  lua_getfield(L, -1, "__index");
  luaL_setfuncs(L, client_methods, 0);
  lua_pop(L, 2);
}
