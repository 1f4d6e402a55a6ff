/* Lua binding: the client userdata (zklock.client): connect, close,
 * state, the wake-up socket and the callback queue Lua drains. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lbind.h"

static const char *const lclient_states[] = {
  "connecting", "connected", "expired", "auth_failed", "closed", "no_chroot",
  "tls_failed"
};

static zkl_client_box *lclient_box(lua_State *L, int idx) {
  return (zkl_client_box *)luaL_checkudata(L, idx, ZKL_CLIENT_MT);
}

/* An ACL list { { scheme, id, perms }, ... } at idx as a vector whose
 * strings are the table's (a scratch copy on the Lua stack: the client
 * gets its own), or an argument error. */
static void lclient_acl_list(lua_State *L, int idx, struct ACL_vector *v) {
  int i, n = (int)zkl_rawlen(L, idx);
  const char *why = NULL;
  if (n < 1 || n > 64) luaL_argerror(L, idx, "acl list must hold 1 to 64 "
                                     "entries");
  v->data = (struct ACL *)lua_newuserdata(L, sizeof *v->data * (size_t)n);
  v->count = n;
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

/* A string field of the table at idx, or NULL when absent; *len its
 * length.  The string lives as long as the table holds it. */
static const char *lclient_field(lua_State *L, int idx, const char *k,
                                 size_t *len) {
  const char *v = NULL;
  lua_pushstring(L, k);
  lua_rawget(L, idx); /* (raw: what the table holds, and keeps alive) */
  if (lua_type(L, -1) == LUA_TSTRING) v = lua_tolstring(L, -1, len);
  else if (!lua_isnil(L, -1))
    luaL_error(L, "secure option '%s' must be a string", k);
  lua_pop(L, 1); /* (still referenced by the table) */
  return v;
}

/* The secure table at idx (zklock.connect's tls and sasl, checked and
 * flattened by runtime.lua) as options; 0 when nil. */
static int lclient_secure(lua_State *L, int idx, zkl_secure_opts *o) {
  memset(o, 0, sizeof *o);
  if (lua_isnoneornil(L, idx)) return 0;
  luaL_checktype(L, idx, LUA_TTABLE);
  o->ca = lclient_field(L, idx, "ca", NULL);
  o->cert = lclient_field(L, idx, "cert", NULL);
  o->key = lclient_field(L, idx, "key", NULL);
  o->key_password = lclient_field(L, idx, "key_password", NULL);
  o->mechanism = lclient_field(L, idx, "mechanism", NULL);
  o->user = lclient_field(L, idx, "user", NULL);
  o->password = lclient_field(L, idx, "password", &o->password_len);
  o->realm = lclient_field(L, idx, "realm", NULL);
  o->service = lclient_field(L, idx, "service", NULL);
  o->server = lclient_field(L, idx, "server", NULL);
  lua_pushstring(L, "no_host_check");
  lua_rawget(L, idx);
  o->no_host_check = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (o->ca || o->cert || o->key) {
    if (!o->ca || !o->cert != !o->key || (o->key_password && !o->key))
      luaL_argerror(L, idx, "tls needs ca, and cert with key or neither");
    /* the C client takes them as one "ca,cert,key,password" string */
    if (strchr(o->ca, ',') || (o->cert && strchr(o->cert, ',')) ||
        (o->key && strchr(o->key, ',')) ||
        (o->key_password && strchr(o->key_password, ',')))
      luaL_argerror(L, idx, "tls file names and key_password must not "
                    "contain ','");
  }
  return o->ca || o->mechanism;
}

/* core.features() -> { tls = bool, tls_verify_host = bool, sasl = bool,
 * io_completions = bool, follow_ensemble = bool }:
 * what this build and the C client it is linked with can do */
static int lclient_features(lua_State *L) {
  lua_createtable(L, 0, 3);
  lua_pushboolean(L, zkl_tls_available());
  lua_setfield(L, -2, "tls");
  lua_pushboolean(L, zkl_tls_peer());
  lua_setfield(L, -2, "tls_verify_host");
  lua_pushboolean(L, zkl_sasl_available());
  lua_setfield(L, -2, "sasl");
  lua_pushboolean(L, zkl_io_completions());
  lua_setfield(L, -2, "io_completions");
  lua_pushboolean(L, zkl_follow_default());
  lua_setfield(L, -2, "follow_ensemble");
  return 1;
}

/* core.connect(hosts, timeout_ms, acl, renew [, max_data [, secure]])
 *   -> client | nil, msg, code;  acl: 0 open, 1 creator, 2 read, or a
 * list; secure: { ca, cert, key, key_password, mechanism, user, password,
 * realm, service, server }, each a string or nil.
 * Does not wait: zklock.connect waits for the first connection. */
static int lclient_new(lua_State *L) {
  const char *hosts = zkl_checkhosts(L, 1);
  zkl_secure_opts sec;
  int secure;
  lua_settop(L, 6); /* (the box pushed below is then index 7, not 3) */
  secure = lclient_secure(L, 6, &sec);
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
  b->rfd = -1;
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
  b->c = zkl_client_new(hosts, timeout_ms, &acl, renew, max_data,
                        secure ? &sec : NULL, &err);
  if (!b->c) return zkl_pusherr(L, &err);
  return 1;
}

/* Idempotent: close() and __close come here (__gc too, but in a forked
 * child, where the parent's session is left alone). */
static int lclient_close(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  if (b->c) zkl_checkfork(L, b->c, NULL);
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
  if (b->c && zkl_client_forked(b->c)) b->c = NULL;
  if (b->rfd >= 0) close(b->rfd);
  b->rfd = -1;
  return lclient_close(L);
}

static int lclient_state(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  if (!b->c) { lua_pushstring(L, "closed"); return 1; }
  zkl_checkfork(L, b->c, NULL);
  lua_pushstring(L, lclient_states[zkl_client_state(b->c, NULL)]);
  return 1;
}

/* client:_poll() -> state, gen */
static int lclient_poll(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  unsigned long gen;
  int st = zkl_client_state(c, &gen);
  lua_pushstring(L, lclient_states[st]);
  lua_pushnumber(L, (lua_Number)gen);
  return 2;
}

/* client:_wait(gen [, timeout]) -> gen: sleeps until anything changes,
 * at most timeout seconds (nil: no limit; <= 0, a deadline already past:
 * no sleep at all) */
static int lclient_wait(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  unsigned long gen = (unsigned long)luaL_checknumber(L, 2);
  double timeout = luaL_optnumber(L, 3, ZKL_FOREVER);
  luaL_argcheck(L, timeout == timeout, 3, "timeout is NaN");
  lua_pushnumber(L, (lua_Number)zkl_client_wait(c, gen, timeout));
  return 1;
}

/* client:_hint() -> nil | msg, code: why a first connection is late,
 * when the diagnosis found it (zkl_client_hint) */
static int lclient_hint(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  zkl_error err;
  if (!zkl_client_hint(c, &err)) return 0;
  lua_pushstring(L, err.msg);
  lua_pushstring(L, zkl_code_name(err.code));
  return 2;
}

/* client:_failure() -> nil | msg, code: why the client takes no requests
 * (expired, auth failed, no chroot, closed) */
static int lclient_failure(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  zkl_error err;
  if (!b->c) {
    lua_pushstring(L, "client is closed");
    lua_pushstring(L, zkl_code_name(ZKL_ECLOSED));
    return 2;
  }
  zkl_checkfork(L, b->c, NULL);
  if (!zkl_client_failure(b->c, &err)) { lua_pushnil(L); return 1; }
  lua_pushstring(L, err.msg);
  lua_pushstring(L, zkl_code_name(err.code));
  return 2;
}

static int lclient_session_id(lua_State *L) {
  int64_t id = zkl_client_session_id(zkl_checkclient(L, 1));
  char buf[24];
  if (id == 0) { lua_pushnil(L); return 1; }
  snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)id);
  lua_pushstring(L, buf);
  return 1;
}

/* negotiated session timeout, seconds (0 once closed) */
static int lclient_timeout(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  if (!b->c) { lua_pushnumber(L, 0); return 1; }
  zkl_checkfork(L, b->c, NULL);
  lua_pushnumber(L, zkl_client_timeout_ms(b->c) / 1000.0);
  return 1;
}

/* client:_limits() -> max_data, chroot (nil: none); nothing once closed:
 * the client's settings, kept here only (zklock.runtime asks) */
static int lclient_limits(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  const char *chroot;
  if (!b->c || zkl_client_forked(b->c)) return 0; /* closed: none */
  chroot = zkl_client_chroot(b->c);
  lua_pushinteger(L, zkl_client_max_data(b->c));
  if (chroot) lua_pushstring(L, chroot);
  else lua_pushnil(L);
  return 2;
}

static int lclient_stats(lua_State *L) {
  zkl_stats s;
  zkl_client_stats(zkl_checkclient(L, 1), &s);
  lua_createtable(L, 0, 6);
  if (s.since_heard >= 0) { /* (none yet: absent) */
    lua_pushnumber(L, (lua_Number)s.since_heard);
    lua_setfield(L, -2, "since_contact");
  }
  lua_pushinteger(L, (lua_Integer)s.sessions);
  lua_setfield(L, -2, "renewed");
  lua_pushinteger(L, (lua_Integer)s.lost);
  lua_setfield(L, -2, "lost");
  lua_pushnumber(L, (lua_Number)s.watch_events);
  lua_setfield(L, -2, "watch_events");
  lua_pushnumber(L, (lua_Number)s.own_events);
  lua_setfield(L, -2, "own_events");
  lua_pushnumber(L, (lua_Number)s.requests);
  lua_setfield(L, -2, "requests");
  return 1;
}

static int lclient_tostring(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  int st = ZKL_CLOSED;
  if (b->c && !zkl_client_forked(b->c)) st = zkl_client_state(b->c, NULL);
  lua_pushfstring(L, "zklock.client{%s}: %p", lclient_states[st], (void *)b);
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

/* client:_events() -> { {type, path [, attempt]}... } | nil: what Lua
 * must call back; attempt: the serial of the lock attempt it is about
 * (attempt:serial()), absent for a state notice.  (Taken out of the core
 * first: pushing may run a __gc.) */
static int lclient_events(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  zkl_event *first;
  const zkl_event *e;
  int i = 0;
  if (!b->c) { lua_pushnil(L); return 1; } /* closed: nothing more to run */
  zkl_checkfork(L, b->c, NULL);
  first = zkl_client_take_events(b->c);
  if (!first) { lua_pushnil(L); return 1; }
  lua_newtable(L);
  for (e = first; e;) {
    int type;
    const char *path;
    unsigned long attempt;
    e = zkl_event_read(e, &type, &path, &attempt);
    lua_createtable(L, 3, 0);
    lua_pushstring(L, type == ZKL_EV_REVOKE ? "revoke"
                      : type == ZKL_EV_LOST ? "lost"
                      : type == ZKL_EV_STATE ? "state"
                      : type == ZKL_EV_HELD ? "held" : "?");
    lua_rawseti(L, -2, 1);
    lua_pushstring(L, path);
    lua_rawseti(L, -2, 2);
    if (attempt) {
      lua_pushnumber(L, (lua_Number)attempt);
      lua_rawseti(L, -2, 3);
    }
    lua_rawseti(L, -2, ++i);
  }
  zkl_events_free(first);
  return 1;
}

/* client:_wake_listen() -> path | nil, msg, code */
static int lclient_wake_listen(lua_State *L) {
  zkl_error err;
  const char *path = zkl_client_wake_listen(zkl_checkclient(L, 1), &err);
  if (!path) return zkl_pusherr(L, &err);
  lua_pushstring(L, path);
  return 1;
}

/* client:_wake_accept() -> true | nil, msg, code */
static int lclient_wake_accept(lua_State *L) {
  zkl_error err;
  if (!zkl_client_wake_accept(zkl_checkclient(L, 1), &err))
    return zkl_pusherr(L, &err);
  lua_pushboolean(L, 1);
  return 1;
}

/* client:fd() -> descriptor | nil, msg, code: the reading end of the
 * wake-up socket for an event loop (docs/api.md, "Waiting in an event
 * loop"); the same one on every call */
static int lclient_fd(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  zkl_error err;
  if (b->rfd < 0) {
    int fd = zkl_client_wake_pair(zkl_checkclient(L, 1), &err);
    if (fd < 0) return zkl_pusherr(L, &err);
    b->rfd = fd;
  }
  lua_pushinteger(L, b->rfd);
  return 1;
}

/* client:_drain() -> bytes: empties zk:fd()'s socket; nil without one.
 * A forked child reads nothing: the socket is its parent's too, and a
 * byte taken here would never wake the parent. */
static int lclient_drain(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  char buf[256];
  ssize_t n;
  lua_Integer total = 0;
  if (b->rfd < 0) { lua_pushnil(L); return 1; }
  if (!(b->c && zkl_client_forked(b->c)))
    while ((n = recv(b->rfd, buf, sizeof buf, MSG_DONTWAIT)) > 0) total += n;
  lua_pushinteger(L, total);
  return 1;
}

/* client:_wake_by(t): a byte on the wake-up socket at monotonic time t
 * (replacing the time set before; 0: none).  A closed client, or one
 * inherited by a forked child (no timer thread there): nothing. */
static int lclient_wake_by(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  double at = luaL_checknumber(L, 2);
  if (b->c && !zkl_client_forked(b->c)) zkl_client_wake_by(b->c, at);
  return 0;
}

/* client:_ready() -> { wake ids }, all, since: takes what changed since
 * the last call and lets the next change write to the wake-up socket
 * again; `since` is when the first of those changes happened (monotonic),
 * or nil. */
static int lclient_ready(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  unsigned *ids;
  int i, n, all, pending;
  double since;
  if (!b->c) { lua_newtable(L); lua_pushboolean(L, 1); return 2; }
  zkl_checkfork(L, b->c, NULL);
  pending = zkl_client_take_ready(b->c, &ids, &n, &all, &since);
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

/* client:_self_delay(seconds): connect's self_watch_delay (>= 0) */
static int lclient_self_delay(lua_State *L) {
  zkl_client *c = zkl_checkclient(L, 1);
  double s = luaL_checknumber(L, 2);
  luaL_argcheck(L, s >= 0 && s < 1e9, 2, "seconds >= 0 expected");
  zkl_client_self_delay(c, s);
  return 0;
}

/* client:_follow(on): connect's follow_ensemble (docs/api.md) */
static int lclient_follow(lua_State *L) {
  zkl_client_follow(zkl_checkclient(L, 1), lua_toboolean(L, 2));
  return 0;
}

/* client:servers() -> the servers it uses now ("host:port,...", no
 * chroot: the connect string's, or the ensemble's once followed), and how
 * many times following the ensemble moved them; nothing once closed */
static int lclient_servers(lua_State *L) {
  zkl_client_box *b = lclient_box(L, 1);
  unsigned long moves = 0;
  char *s;
  if (!b->c || zkl_client_forked(b->c)) return 0;
  s = zkl_client_servers(b->c, &moves);
  if (!s) return luaL_error(L, "out of memory");
  lua_pushstring(L, s);
  free(s);
  lua_pushinteger(L, (lua_Integer)moves);
  return 2;
}

/* client:_want_state(on): queue connection-state notices, or stop */
static int lclient_want_state(lua_State *L) {
  zkl_client_want_state(zkl_checkclient(L, 1), lua_toboolean(L, 2));
  return 0;
}

static int lclient_is_client(lua_State *L) {
  lua_pushboolean(L, luaL_testudata(L, 1, ZKL_CLIENT_MT) != NULL);
  return 1;
}

void zkl_open_client(lua_State *L) {
  static const luaL_Reg methods[] = {
    { "close", lclient_close },
    { "state", lclient_state },
    { "session_id", lclient_session_id },
    { "session_timeout", lclient_timeout },
    { "_poll", lclient_poll },
    { "_failure", lclient_failure },
    { "_hint", lclient_hint },
    { "_wait", lclient_wait },
    { "_stats", lclient_stats },
    { "_limits", lclient_limits },
    { "_add_auth", lclient_add_auth },
    { "_events", lclient_events },
    { "_wake_listen", lclient_wake_listen },
    { "_wake_accept", lclient_wake_accept },
    { "_ready", lclient_ready },
    { "fd", lclient_fd },
    { "_drain", lclient_drain },
    { "_wake_by", lclient_wake_by },
    { "_want_state", lclient_want_state },
    { "_self_delay", lclient_self_delay },
    { "_follow", lclient_follow },
    { "servers", lclient_servers },
    { NULL, NULL }
  };
  static const luaL_Reg meta[] = {
    { "__gc", lclient_gc },
    { "__close", lclient_close },
    { "__tostring", lclient_tostring },
    { NULL, NULL }
  };
  static const luaL_Reg funcs[] = {
    { "connect", lclient_new },
    { "features", lclient_features },
    { "is_client", lclient_is_client },
    { NULL, NULL }
  };
  zkl_setmeta(L, ZKL_CLIENT_MT, methods, meta);
  luaL_setfuncs(L, funcs, 0);
  luaL_getmetatable(L, ZKL_CLIENT_MT);
  lua_getfield(L, -1, "__index");
  lua_setfield(L, -3, "client_methods"); /* init.lua adds Lua methods */
  lua_pop(L, 1);
}
