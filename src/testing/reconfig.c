/* Test equipment (zklock.testing.core.reconfig): a dynamic
 * reconfiguration of a test ensemble, as ZooKeeper's `reconfig` command
 * does it, through a session of its own logged in as the ensemble's super
 * user (zklock.testing's reconfigurable clusters have one):
 *
 *   tcore.reconfig(hosts, joining, leaving, password, timeout)
 *     -> the new configuration, or nil, message
 *
 * joining: "server.N=host:q:e:role;host:port[,...]" or nil; leaving:
 * "id[,id...]" or nil; both nil: the configuration is only read.  The synchronous C calls block the calling (Lua)
 * thread: a spec's, never a library's. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "testing.h" /* (and through it, zookeeper.h) */

static double reconfig_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void reconfig_nap(void) {
  struct timespec ts = { 0, 20 * 1000 * 1000 };
  nanosleep(&ts, NULL);
}

/* One try: 1 done (the new configuration in buf), 0 worth another try
 * (no connection, no quorum of the new configuration yet, another
 * reconfiguration running), -1 refused for good (*rc says why). */
static int reconfig_try(const char *hosts, const char *joining,
                        const char *leaving, const char *cred,
                        double deadline, char *buf, int *len, int *rc) {
  zhandle_t *zh = zookeeper_init(hosts, NULL, 10000, NULL, NULL, 0);
  struct Stat st;
  int n = *len;
  *rc = ZCONNECTIONLOSS;
  if (!zh) return 0;
  while (zoo_state(zh) != ZOO_CONNECTED_STATE && reconfig_now() < deadline)
    reconfig_nap();
  if (zoo_state(zh) != ZOO_CONNECTED_STATE) {
    zookeeper_close(zh);
    return 0;
  }
  if (!joining && !leaving) { /* only read it */
    *rc = zoo_getconfig(zh, 0, buf, &n, &st);
  } else {
    /* (sent before the reconfiguration, so answered before it) */
    zoo_add_auth(zh, "digest", cred, (int)strlen(cred), NULL, NULL);
    *rc = zoo_reconfig(zh, joining, leaving, NULL, -1, buf, &n, &st);
  }
  zookeeper_close(zh);
  if (*rc == ZOK) {
    *len = n;
    return 1;
  }
  if (*rc == ZNEWCONFIGNOQUORUM || *rc == ZRECONFIGINPROGRESS ||
      *rc == ZCONNECTIONLOSS || *rc == ZOPERATIONTIMEOUT)
    return 0;
  return -1;
}

static int ltesting_reconfig(lua_State *L) {
  const char *hosts = luaL_checkstring(L, 1);
  const char *joining = luaL_optstring(L, 2, NULL);
  const char *leaving = luaL_optstring(L, 3, NULL);
  const char *password = luaL_checkstring(L, 4);
  double timeout = luaL_optnumber(L, 5, 30);
  double deadline = reconfig_now() + timeout;
  char cred[256], buf[8192];
  int rc = ZOK, r;
  snprintf(cred, sizeof cred, "super:%s", password);
  zoo_set_debug_level((ZooLogLevel)0); /* (this module's own copy) */
  do {
    int len = (int)sizeof buf - 1;
    r = reconfig_try(hosts, joining, leaving, cred, deadline, buf, &len,
                     &rc);
    if (r == 1) {
      buf[len > 0 ? len : 0] = '\0';
      lua_pushstring(L, buf);
      return 1;
    }
    if (r < 0) break;
    reconfig_nap();
  } while (reconfig_now() < deadline);
  lua_pushnil(L);
  lua_pushfstring(L, "reconfig (joining %s, leaving %s): %s",
                  joining ? joining : "none", leaving ? leaving : "none",
                  zerror(rc));
  return 2;
}

void zkl_open_reconfig(lua_State *L) {
  lua_pushcfunction(L, ltesting_reconfig);
  lua_setfield(L, -2, "reconfig");
}
