/* Lua binding: the client userdata, one-shot ops, test helpers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lbind.h"

static const char *const lclient_states[] = {
  "connecting", "connected", "expired", "auth_failed", "closed"
};

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
  if (d && *len > (size_t)c->max_data)
    luaL_argerror(L, idx, lua_pushfstring(L, "data of %I bytes is over the "
                  "client's limit of %d (max_data)", (lua_Integer)*len,
                  c->max_data));
  return d;
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

static zkl_client_box *lclient_box(lua_State *L, int idx) {
  return (zkl_client_box *)luaL_checkudata(L, idx, ZKL_CLIENT_MT);
}

static void lclient_checkfork(lua_State *L, zkl_client *c) {
  if (zkl_client_forked(c))
    luaL_error(L, "zklock: this client was opened in process %d and cannot "
               "be used in process %d (a forked child): connect again in "
               "the child (under nginx: in init_worker_by_lua*)",
               (int)c->pid, (int)getpid());
}

zkl_client *zkl_checkclient(lua_State *L, int idx) {
  zkl_client_box *b = lclient_box(L, idx);
  luaL_argcheck(L, b->c != NULL, idx, "client is closed");
  lclient_checkfork(L, b->c);
  return b->c;
}

/* An ACL list { { scheme, id, perms }, ... } at idx as a vector (owned by
 * the caller, freed by zkl_acl_free), or an argument error. */
static void lclient_acl_list(lua_State *L, int idx, struct ACL_vector *v) {
  int i, n = (int)zkl_rawlen(L, idx);
  const char *why = NULL;
  if (n < 1 || n > 64) luaL_argerror(L, idx, "acl list must hold 1 to 64 "
                                     "entries");
  v->data = (struct ACL *)lua_newuserdata(L, sizeof *v->data * (size_t)n);
  v->count = n; /* (a scratch copy: the client gets its own, malloc'd) */
  for (i = 0; i < n && !why; i++) {
    int perms = -1;
    lua_rawgeti(L, idx, i + 1);
    if (lua_type(L, -1) == LUA_TTABLE) {
      lua_rawgeti(L, -1, 1);
      lua_rawgeti(L, -2, 2);
      lua_rawgeti(L, -3, 3);
      if (lua_type(L, -3) == LUA_TSTRING && lua_type(L, -2) == LUA_TSTRING &&
          lua_type(L, -1) == LUA_TSTRING &&
          (perms = zkl_acl_perms(lua_tostring(L, -1))) > 0) {
        v->data[i].perms = perms;
        v->data[i].id.scheme = (char *)lua_tostring(L, -3);
        v->data[i].id.id = (char *)lua_tostring(L, -2);
      }
      lua_pop(L, 3);
    }
    lua_pop(L, 1); /* (the strings stay alive in the table) */
    if (perms <= 0) why = lua_pushfstring(L, "acl entry %d must be { scheme, "
                                          "id, perms } with perms made of "
                                          "'cdrwa'", i + 1);
  }
  if (why) luaL_argerror(L, idx, why);
}

/* core.connect(hosts, timeout_ms, acl, renew [, max_data]) -> client
 *   | nil, msg, code;  acl: 0 open, 1 creator, 2 read, or a list.
 * Does not wait: zklock.connect waits for the first connection. */
static int lclient_new(lua_State *L) {
  const char *hosts = luaL_checkstring(L, 1);
  int timeout_ms = zkl_checkrange(L, 2, 1, 0x7fffffff, "timeout_ms");
  int renew = lua_isnoneornil(L, 4) || lua_toboolean(L, 4);
  int max_data = lua_isnoneornil(L, 5) ? ZKL_DATA_DEFAULT
                 : zkl_checkrange(L, 5, 0, 0x7fffffff, "max_data");
  struct ACL_vector acl = { 0, NULL };
  zkl_error err;
  zkl_client_box *b;
  int ok;
  /* everything that may raise comes before the ACL is malloc'd: the box,
   * then the list's checks (its scratch copy lives on the Lua stack) */
  b = (zkl_client_box *)lua_newuserdata(L, sizeof *b);
  b->c = NULL;
  luaL_setmetatable(L, ZKL_CLIENT_MT);
  if (lua_type(L, 3) == LUA_TTABLE) {
    struct ACL_vector scratch;
    lclient_acl_list(L, 3, &scratch); /* (pushes the scratch copy) */
    ok = zkl_acl_copy(&scratch, &acl, &err);
    lua_pop(L, 1); /* the box is on top again */
  } else {
    int preset = lua_isnoneornil(L, 3) ? 0
                 : zkl_checkrange(L, 3, ZKL_ACL_OPEN, ZKL_ACL_READ, "acl");
    ok = zkl_acl_preset(preset, &acl, &err);
  }
  if (!ok) return zkl_pusherr(L, &err);
  b->c = zkl_client_new(hosts, timeout_ms, &acl, renew, &err);
  if (!b->c) return zkl_pusherr(L, &err);
  b->c->max_data = max_data;
  return 1;
}

/* Idempotent: close(), __gc and __close all come here.  A client collected
 * in a forked child only lets go of its memory's bookkeeping. */
static int lclient_close(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  if (b->c) lclient_checkfork(L, b->c);
  if (b->c) {
    zkl_client *c = b->c;
    b->c = NULL;
    zkl_client_close(c);
    zkl_client_unref(c);
  }
  return 0;
}

static int lclient_gc(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  if (b->c && zkl_client_forked(b->c)) {
    b->c = NULL; /* the parent's session: leave it alone */
    return 0;
  }
  if (b->c) {
    zkl_client *c = b->c;
    b->c = NULL;
    zkl_client_close(c);
    zkl_client_unref(c);
  }
  return 0;
}

static int lclient_state(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  int st;
  if (!b->c) { lua_pushstring(L, "closed"); return 1; }
  lclient_checkfork(L, b->c);
  pthread_mutex_lock(&b->c->mu);
  st = b->c->state;
  pthread_mutex_unlock(&b->c->mu);
  lua_pushstring(L, lclient_states[st]);
  return 1;
}

/* client:_poll() -> state, gen */
static int lclient_poll(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  int st;
  unsigned long gen;
  pthread_mutex_lock(&c->mu);
  st = c->state;
  gen = c->gen;
  pthread_mutex_unlock(&c->mu);
  lua_pushstring(L, lclient_states[st]);
  lua_pushnumber(L, (lua_Number)gen);
  return 2;
}

/* client:_wait(gen, timeout) -> gen: sleeps until anything changes */
static int lclient_wait(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  unsigned long gen = (unsigned long)luaL_checknumber(L, 2);
  double timeout = luaL_optnumber(L, 3, -1);
  luaL_argcheck(L, timeout == timeout, 3, "timeout is NaN");
  lua_pushnumber(L, (lua_Number)zkl_client_wait(c, gen, timeout));
  return 1;
}

static int lclient_session_id(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  long long id;
  char buf[24];
  pthread_mutex_lock(&c->mu);
  id = (long long)c->session_id;
  pthread_mutex_unlock(&c->mu);
  if (id == 0) { lua_pushnil(L); return 1; }
  snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)id);
  lua_pushstring(L, buf);
  return 1;
}

/* negotiated session timeout, seconds */
static int lclient_timeout(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  zkl_client *c = b->c;
  int ms;
  if (!c) { lua_pushnumber(L, 0); return 1; } /* closed */
  lclient_checkfork(L, c);
  pthread_mutex_lock(&c->mu);
  ms = c->timeout_ms;
  pthread_mutex_unlock(&c->mu);
  lua_pushnumber(L, ms / 1000.0);
  return 1;
}

static int lclient_stats(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  unsigned long w, r, s, lost, own;
  pthread_mutex_lock(&c->mu);
  own = c->n_own_events;
  w = c->n_watch_events;
  r = c->n_requests;
  s = c->n_sessions;
  lost = c->n_lost;
  pthread_mutex_unlock(&c->mu);
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, (lua_Integer)s);
  lua_setfield(L, -2, "renewed");
  lua_pushinteger(L, (lua_Integer)lost);
  lua_setfield(L, -2, "lost");
  lua_pushnumber(L, (lua_Number)w);
  lua_setfield(L, -2, "watch_events");
  lua_pushnumber(L, (lua_Number)own);
  lua_setfield(L, -2, "own_events");
  lua_pushnumber(L, (lua_Number)r);
  lua_setfield(L, -2, "requests");
  return 1;
}

static int lclient_tostring(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  int st = ZKL_CLOSED;
  if (b->c && !zkl_client_forked(b->c)) {
    pthread_mutex_lock(&b->c->mu);
    st = b->c->state;
    pthread_mutex_unlock(&b->c->mu);
  }
  lua_pushfstring(L, "zklock.client{%s}: %p", lclient_states[st], (void *)b);
  return 1;
}

/* ---- ops ----------------------------------------------------------------- */

typedef struct { zkl_op *op; } lclient_opbox;

static lclient_opbox *lclient_opbox_new(lua_State *L);
static int lclient_pushop(lua_State *L, lclient_opbox *b, zkl_op *op,
                          const zkl_error *err);

static const char *const *lclient_markers(lua_State *L, int idx) {
  static const char *const names[] = { "mutex", "lease", "rw", "all", NULL };
  switch (luaL_checkoption(L, idx, "mutex", names)) {
  case 1: return zkl_markers_lease;
  case 2: return zkl_markers_rw;
  case 3: return NULL; /* every child, unsorted */
  default: return zkl_markers_mutex;
  }
}

/* client:_children(path, markers) -> op | nil, msg, code */
static int lclient_children(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  const char *path = zkl_checkpath(L, 2);
  const char *const *markers = lclient_markers(L, 3);
  zkl_error err;
  lclient_opbox *b = lclient_opbox_new(L);

  return lclient_pushop(L, b, zkl_op_children(c, path, markers, &err), &err);
}

static lclient_opbox *lclient_checkop(lua_State *L) {
  lclient_opbox *b = (lclient_opbox *)luaL_checkudata(L, 1, ZKL_OP_MT);
  luaL_argcheck(L, b->op != NULL, 1, "operation is gone");
  lclient_checkfork(L, b->op->c);
  return b;
}

/* op:poll() -> "pending" | "done", gen */
static int lclient_op_poll(lua_State *L) {
  lclient_opbox *b = lclient_checkop(L);
  unsigned long gen;
  lua_pushstring(L, zkl_op_poll(b->op, &gen) ? "done" : "pending");
  lua_pushnumber(L, (lua_Number)gen);
  return 2;
}

/* op:result() -> names (listing) | data, version (get)
 *   | true, created/deleted | nil, msg, code
 * (the names are taken out under the mutex and pushed after it: pushing
 * may run a __gc that takes the same mutex) */
static int lclient_op_result(lua_State *L) {
  lclient_opbox *b = lclient_checkop(L);
  zkl_op *op = b->op;
  zkl_error e;
  char **names = NULL, *data = NULL;
  int i, n = 0, done, kind = op->kind, result, datalen = 0;
  long long zxid;
  pthread_mutex_lock(&op->c->mu);
  done = op->done;
  e = op->err;
  result = op->result;
  zxid = (long long)op->zxid;
  if (done && e.code == ZKL_OK && kind == ZKL_OP_CHILDREN) {
    names = op->names; /* the op is done: nobody else touches them */
    n = op->n;
    op->names = NULL;
    op->n = 0;
  }
  if (done && e.code == ZKL_OK && kind == ZKL_OP_GET) {
    data = op->data; /* likewise taken out */
    datalen = op->datalen;
    op->data = NULL;
    op->datalen = 0;
  }
  pthread_mutex_unlock(&op->c->mu);
  if (!done || e.code != ZKL_OK) {
    if (!done) zkl_seterr(&e, ZKL_ETIMEOUT, "not done");
    return zkl_pusherr(L, &e);
  }
  if (kind == ZKL_OP_GET) {
    lua_pushlstring(L, data ? data : "", (size_t)datalen);
    free(data);
    lua_pushinteger(L, result);
    return 2;
  }
  if (kind == ZKL_OP_FENCED) {
    lua_pushinteger(L, result);
    zkl_pushint64(L, zxid);
    return 2;
  }
  if (kind != ZKL_OP_CHILDREN) {
    lua_pushboolean(L, 1);
    lua_pushboolean(L, result);
    return 2;
  }
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    lua_pushstring(L, names[i]);
    lua_rawseti(L, -2, i + 1);
  }
  for (i = 0; i < n; i++) free(names[i]);
  free(names);
  return 1;
}

/* op:_wake(id) -> gen: see attempt:_wake */
static int lclient_op_wake(lua_State *L) {
  zkl_op *op = lclient_checkop(L)->op;
  unsigned id = (unsigned)luaL_checkinteger(L, 2);
  lua_pushnumber(L, (lua_Number)zkl_client_set_wake(op->c, &op->wake_id, id));
  return 1;
}

/* op:cancel() -> true when it stopped the op, false when it had finished */
static int lclient_op_cancel(lua_State *L) {
  lua_pushboolean(L, zkl_op_cancel(lclient_checkop(L)->op));
  return 1;
}

/* The box first (allocating it may raise), the op after: an op started
 * always has a box to let go of it.  b is on top of the stack. */
static lclient_opbox *lclient_opbox_new(lua_State *L) {
  lclient_opbox *b = (lclient_opbox *)lua_newuserdata(L, sizeof *b);
  b->op = NULL;
  luaL_setmetatable(L, ZKL_OP_MT);
  return b;
}

static int lclient_pushop(lua_State *L, lclient_opbox *b, zkl_op *op,
                          const zkl_error *err) {
  if (!op) { lua_pop(L, 1); return zkl_pusherr(L, err); }
  b->op = op;
  return 1;
}

/* client:_create(path, data|nil, "persistent"|"ephemeral") -> op */
static int lclient_create(lua_State *L) {
  static const char *const modes[] = { "persistent", "ephemeral", NULL };
  zkl_client *c = zkl_checkclient(L, 1);
  const char *path = zkl_checkpath(L, 2);
  size_t len = 0;
  const char *data = zkl_checkdata(L, 3, c, &len, 1, NULL);
  int mode = luaL_checkoption(L, 4, "persistent", modes);
  zkl_error err;
  lclient_opbox *b = lclient_opbox_new(L);

  return lclient_pushop(L, b, zkl_op_create(c, path, data, (int)len,
                                         mode ? ZOO_EPHEMERAL : 0, &err), &err);
}

static int lclient_delete(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  zkl_error err;
  lclient_opbox *b = lclient_opbox_new(L);

  return lclient_pushop(L, b, zkl_op_delete(c, zkl_checkpath(L, 2), &err), &err);
}

static int lclient_set(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  const char *path = zkl_checkpath(L, 2);
  size_t len;
  const char *data = zkl_checkdata(L, 3, c, &len, 0, NULL);
  zkl_error err;
  lclient_opbox *b = lclient_opbox_new(L);

  return lclient_pushop(L, b, zkl_op_set(c, path, data, (int)len, &err), &err);
}

/* client:_fenced(lock_node, path, data) -> op */
static int lclient_fenced(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  const char *node = zkl_checkpath(L, 2);
  const char *path = zkl_checkpath(L, 3);
  size_t len;
  const char *data = zkl_checkdata(L, 4, c, &len, 0, NULL);
  zkl_error err;
  lclient_opbox *b = lclient_opbox_new(L);

  return lclient_pushop(L, b, zkl_op_fenced(c, node, path, data, (int)len, &err),
                        &err);
}

static int lclient_get(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  zkl_error err;
  lclient_opbox *b = lclient_opbox_new(L);

  return lclient_pushop(L, b, zkl_op_get(c, zkl_checkpath(L, 2), &err), &err);
}

static int lclient_wait_gone(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  zkl_error err;
  lclient_opbox *b = lclient_opbox_new(L);

  return lclient_pushop(L, b, zkl_op_wait_gone(c, zkl_checkpath(L, 2), &err),
                        &err);
}

/* client:_db("enter"|"leave", path, our_node_path, members) -> op */
static int lclient_db(lua_State *L) {
  static const char *const kinds[] = { "enter", "leave", NULL };
  zkl_client *c = zkl_checkclient(L, 1);
  int kind = luaL_checkoption(L, 2, NULL, kinds);
  const char *path = zkl_checkpath(L, 3);
  const char *ours = zkl_checkpath(L, 4);
  int members = lua_isnoneornil(L, 5) ? 1
                : zkl_checkrange(L, 5, 1, 0x7fffffff, "members");
  size_t n = strlen(path);
  zkl_error err;
  /* our member node is a child of the barrier: "<path>/<name>" */
  luaL_argcheck(L, strncmp(ours, path, n) == 0 && ours[n] == '/' &&
                !strchr(ours + n + 1, '/'), 4,
                "member node must be a child of the barrier's path");
  lclient_opbox *b = lclient_opbox_new(L);

  return lclient_pushop(L, b, zkl_op_db(c, kind ? ZKL_OP_DB_LEAVE : ZKL_OP_DB_ENTER,
                                     path, ours, members, &err), &err);
}

/* client:_events() -> { {type, path}... } | nil: what Lua must call back */
static int lclient_events(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  zkl_client *c = b->c;
  zkl_event *e, *next;
  int i = 0;
  if (!c) { lua_pushnil(L); return 1; } /* closed: nothing more to run */
  lclient_checkfork(L, c);
  pthread_mutex_lock(&c->mu);
  e = c->ev_head;
  c->ev_head = c->ev_tail = NULL;
  c->n_events = 0;
  pthread_mutex_unlock(&c->mu);
  if (!e) { lua_pushnil(L); return 1; }
  lua_newtable(L);
  for (; e; e = next) {
    next = e->next;
    lua_createtable(L, 2, 0);
    lua_pushstring(L, e->type == ZKL_EV_REVOKE ? "revoke"
                      : e->type == ZKL_EV_LOST ? "lost" : "?");
    lua_rawseti(L, -2, 1);
    lua_pushstring(L, e->path);
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, ++i);
    free(e->path);
    free(e);
  }
  return 1;
}

static int lclient_op_gc(lua_State *L) {
  lclient_opbox *b = (lclient_opbox *)luaL_checkudata(L, 1, ZKL_OP_MT);
  if (b->op) {
    zkl_op *op = b->op;
    b->op = NULL;
    if (!zkl_client_forked(op->c)) zkl_op_drop(op);
  }
  return 0;
}

/* ---- helpers for zklock.testing and unit specs -------------------------- */

static int lclient_free_port(lua_State *L) {
  int p = zkl_free_port();
  if (p < 0) return luaL_error(L, "no free loopback port");
  lua_pushinteger(L, p);
  return 1;
}

/* core.four_letter(host, port, cmd [, timeout]) -> text | nil, msg, code */
static int lclient_four_letter(lua_State *L) {
  const char *host = luaL_checkstring(L, 1);
  int port = zkl_checkrange(L, 2, 1, 65535, "port");
  const char *cmd = luaL_checkstring(L, 3);
  double timeout = luaL_optnumber(L, 4, 2.0);
  luaL_argcheck(L, timeout >= 0 && timeout <= 3600, 4, "timeout out of range");
  zkl_error err;
  char *out = zkl_four_letter(host, port, cmd, timeout, &err);
  if (!out) return zkl_pusherr(L, &err);
  lua_pushstring(L, out);
  free(out);
  return 1;
}

/* core.sort_names({names}, markers) -> { {name=, seq=}... } in lock order */
static int lclient_sort_names(lua_State *L) {
  const char *const *markers;
  int i, n, k;
  const char **names;
  zkl_entry *e;
  luaL_checktype(L, 1, LUA_TTABLE);
  markers = lclient_markers(L, 2);
  n = (int)zkl_rawlen(L, 1);
  names = (const char **)lua_newuserdata(L, sizeof *names * (size_t)(n + 1));
  e = (zkl_entry *)lua_newuserdata(L, sizeof *e * (size_t)(n + 1));
  for (i = 0; i < n; i++) {
    lua_rawgeti(L, 1, i + 1);
    luaL_argcheck(L, lua_type(L, -1) == LUA_TSTRING, 1, "strings expected");
    names[i] = lua_tostring(L, -1);
    lua_pop(L, 1); /* the table keeps the string alive */
  }
  k = zkl_names_sort((char *const *)names, n, markers, e);
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

/* client:_add_auth(scheme, credential): sent now and on every reconnect */
static int lclient_add_auth(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  const char *scheme = luaL_checkstring(L, 2);
  size_t len;
  const char *cred = luaL_checklstring(L, 3, &len);
  zkl_error err;
  if (!zkl_client_add_auth(c, scheme, cred, (int)len, &err))
    return zkl_pusherr(L, &err);
  lua_pushboolean(L, 1);
  return 1;
}

/* client:_wake_listen() -> path | nil, msg, code */
static int lclient_wake_listen(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  zkl_error err;
  const char *path = zkl_client_wake_listen(c, &err);
  if (!path) return zkl_pusherr(L, &err);
  lua_pushstring(L, path);
  return 1;
}

/* client:_wake_accept() -> true | nil, msg, code */
static int lclient_wake_accept(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  zkl_error err;
  if (!zkl_client_wake_accept(c, &err)) return zkl_pusherr(L, &err);
  lua_pushboolean(L, 1);
  return 1;
}

/* client:_ready() -> { wake ids }, all, since: takes what changed since
 * the last call and lets the next change write to the wake-up socket
 * again; `since` is when the first of those changes happened (monotonic),
 * or nil.  The list is taken out under the mutex and pushed after it. */
static int lclient_ready(lua_State *L) {
  zkl_client_box *b = (zkl_client_box *)luaL_checkudata(L, 1, ZKL_CLIENT_MT);
  zkl_client *c = b->c;
  unsigned *ids;
  int i, n, all, pending;
  double since;
  if (!c) { lua_newtable(L); lua_pushboolean(L, 1); return 2; }
  lclient_checkfork(L, c);
  pthread_mutex_lock(&c->mu);
  pending = c->wake_pending;
  since = c->wake_since;
  ids = c->ready;
  n = c->n_ready;
  all = c->ready_all;
  c->ready = NULL;
  c->n_ready = c->cap_ready = 0;
  c->ready_all = 0;
  c->wake_pending = 0;
  pthread_mutex_unlock(&c->mu);
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    lua_pushinteger(L, (lua_Integer)ids[i]);
    lua_rawseti(L, -2, i + 1);
  }
  free(ids);
  lua_pushboolean(L, all);
  if (pending) lua_pushnumber(L, since); else lua_pushnil(L);
  return 3;
}

/* core.costatus(co): the plain status of a coroutine ("running",
 * "suspended", "normal", "dead"), whatever a host did to
 * coroutine.status (OpenResty answers "dead" for another request's). */
static int lclient_costatus(lua_State *L) {
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

static int lclient_pid(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)getpid());
  return 1;
}

/* Testing only: fork() and _exit(), to show what a forked child meets. */
static int lclient_fork(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)fork());
  return 1;
}

static int lclient_exit(lua_State *L) {
  _exit((int)luaL_optinteger(L, 1, 0));
  return 0;
}

static int lclient_waitpid(lua_State *L) {
  int status = 0;
  pid_t p = waitpid((pid_t)luaL_checkinteger(L, 1), &status, 0);
  if (p < 0) { lua_pushnil(L); return 1; }
  lua_pushinteger(L, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  return 1;
}

static int lclient_is_client(lua_State *L) {
  lua_pushboolean(L, luaL_testudata(L, 1, ZKL_CLIENT_MT) != NULL);
  return 1;
}

/* core.addr(v) -> "0x..." */
static int lclient_addr(lua_State *L) {
  luaL_checkany(L, 1);
  lua_pushfstring(L, "%p", lua_topointer(L, 1));
  return 1;
}

static int lclient_now(lua_State *L) {
  lua_pushnumber(L, zkl_now());
  return 1;
}

/* core.sleep(seconds): a blocking sleep without a child process (specs,
 * workers, zklock.testing; never used by the recipes themselves). */
static int lclient_sleep(lua_State *L) {
  double s = luaL_checknumber(L, 1);
  struct timespec ts;
  if (!(s > 0)) return 0;
  if (s > 86400) s = 86400;
  ts.tv_sec = (time_t)s;
  ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
  return 0;
}

static int lclient_set_log_level(lua_State *L) {
  static const char *const levels[] = { "none", "error", "warn", "info",
                                        "debug", NULL };
  int lv = luaL_checkoption(L, 1, NULL, levels);
  zoo_set_debug_level((ZooLogLevel)lv);
  return 0;
}

void zkl_open_client(lua_State *L) {
  static const luaL_Reg methods[] = {
    { "close", lclient_close },
    { "state", lclient_state },
    { "session_id", lclient_session_id },
    { "session_timeout", lclient_timeout },
    { "_poll", lclient_poll },
    { "_wait", lclient_wait },
    { "_stats", lclient_stats },
    { "_children", lclient_children },
    { "_add_auth", lclient_add_auth },
    { "_fenced", lclient_fenced },
    { "_create", lclient_create },
    { "_delete", lclient_delete },
    { "_set", lclient_set },
    { "_get", lclient_get },
    { "_wait_gone", lclient_wait_gone },
    { "_db", lclient_db },
    { "_events", lclient_events },
    { "_wake_listen", lclient_wake_listen },
    { "_wake_accept", lclient_wake_accept },
    { "_ready", lclient_ready },
    { NULL, NULL }
  };
  static const luaL_Reg meta[] = {
    { "__gc", lclient_gc },
    { "__close", lclient_close },
    { "__tostring", lclient_tostring },
    { NULL, NULL }
  };
  static const luaL_Reg op_methods[] = {
    { "poll", lclient_op_poll },
    { "result", lclient_op_result },
    { "cancel", lclient_op_cancel },
    { "_wake", lclient_op_wake },
    { NULL, NULL }
  };
  static const luaL_Reg op_meta[] = {
    { "__gc", lclient_op_gc },
    { NULL, NULL }
  };
  static const luaL_Reg funcs[] = {
    { "connect", lclient_new },
    { "free_port", lclient_free_port },
    { "four_letter", lclient_four_letter },
    { "sort_names", lclient_sort_names },
    { "now", lclient_now },
    { "sleep", lclient_sleep },
    { "costatus", lclient_costatus },
    { "pid", lclient_pid },
    { "addr", lclient_addr },
    { "is_client", lclient_is_client },
    { "_fork", lclient_fork },
    { "_exit", lclient_exit },
    { "_waitpid", lclient_waitpid },
    { "set_log_level", lclient_set_log_level },
    { NULL, NULL }
  };
  zkl_setmeta(L, ZKL_CLIENT_MT, methods, meta);
  zkl_setmeta(L, ZKL_OP_MT, op_methods, op_meta);
  luaL_setfuncs(L, funcs, 0);
  luaL_getmetatable(L, ZKL_CLIENT_MT);
  lua_getfield(L, -1, "__index");
  lua_setfield(L, -3, "client_methods"); /* init.lua adds Lua methods */
  lua_pop(L, 1);
}
