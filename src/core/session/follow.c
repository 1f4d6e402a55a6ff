/* Following the ensemble (docs/design.md, section 18): each connection
 * reads /zookeeper/config with a watch, and a configuration whose members
 * differ from the client's servers moves them (zoo_set_servers: the
 * session and its chroot stay).  ZooKeeper's threads only read the node
 * and keep the new list (follow_cb); the timer thread applies it
 * (follow_apply): the C client's reconnection is not a callback's to
 * start.  What the list is, is base/ensemble.c's. */
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session.h"

static void follow_watcher(zhandle_t *zh, int type, int state,
                           const char *path, void *ctx);

/* The C client zklock builds moves on its IO thread, ending the connection
 * as a lost one (tools/zkclient-follow.patch); the library's own
 * zoo_set_servers closes the socket from this thread, and what was in
 * flight on it may go unanswered (Debian's library: make ZK=system). */
#ifdef ZOO_ZKLOCK_SET_SERVERS
#define FOLLOW_SET_SERVERS zoo_zklock_set_servers
#else
#define FOLLOW_SET_SERVERS zoo_set_servers
#endif

/* The two reads of /zookeeper/config (zkl_req kind): a connection's first,
 * without a watch, which leaves a server without dynamic configuration (a
 * standalone one, members without client addresses) with no watch of
 * ours; and, only for a configuration worth following, the read with a
 * watch, whose answers are applied. */
enum { FOLLOW_PROBE, FOLLOW_WATCHED };

static void follow_send(zkl_client *c, zhandle_t *zh, int kind);

/* The watched read's answer, parsed (n: zkl_config_hosts'), kept for the
 * timer thread when it is newer than the one applied and any kept. */
static void follow_keep(zkl_client *c, char *hosts, int n,
                        uint64_t version) {
  char why[256];
  const char *bad = n > 0 ? zkl_hosts_problem(hosts, strlen(hosts), why,
                                             sizeof why) : NULL;
  if (bad) {
    char line[512];
    snprintf(line, sizeof line, "ZOO_WARN@zklock_follow@0: the "
             "ensemble's configuration names servers the client cannot "
             "use (%.300s): the servers stay as they are", bad);
    zkl_log_note(ZKL_LOG_WARN, line);
  } else if (n > 0 && version > c->cfg_version &&
             (!c->cfg_pending || version > c->cfg_pending_version)) {
    free(c->cfg_pending);
    c->cfg_pending = hosts;
    c->cfg_pending_version = version;
    hosts = NULL;
    pthread_cond_signal(&c->tcv); /* the timer applies it */
  } else if (n < 0) {
    zkl_log_note(ZKL_LOG_WARN, "ZOO_WARN@zklock_follow@0: the ensemble's "
                 "configuration (/zookeeper/config) does not parse: "
                 "the servers stay as they are");
  }
  free(hosts);
}

/* The answer to either read (an older epoch's: ignored).  The first read
 * of a configuration that names members, or does not parse (said by the
 * watched read), asks for the watched one. */
static void follow_cb(int rc, const char *v, int vlen, const struct Stat *st,
                      const void *data) {
  zkl_req *r = (zkl_req *)data;
  zkl_client *c = r->c;
  (void)st;
  pthread_mutex_lock(&c->mu);
  if ((unsigned long)r->epoch == c->n_sessions) {
    c->cfg_out = 0;
    zkl_client_heard(c, r->sent, rc);
    if (rc == ZOK && c->follow && v && vlen > 0) {
      size_t size = (size_t)vlen + 2;
      char *hosts = malloc(size);
      uint64_t version;
      int n = hosts ? zkl_config_hosts(v, (size_t)vlen, hosts, size,
                                       &version) : -1;
      if (r->kind == FOLLOW_WATCHED) {
        follow_keep(c, hosts, n, version);
      } else {
        free(hosts);
        if (hosts && n != 0 && c->zh && c->state == ZKL_CONNECTED)
          follow_send(c, c->zh, FOLLOW_WATCHED);
      }
    }
    if (c->cfg_again && c->zh && c->state == ZKL_CONNECTED) {
      c->cfg_again = 0;
      follow_send(c, c->zh, FOLLOW_WATCHED);
    }
  }
  zkl_req_done(r);
  pthread_mutex_unlock(&c->mu);
}

/* Sends a read (mu held; any thread with the mutex: a completion, the
 * watch).  Asynchronous: allowed in a callback.  One at a time: a watched
 * read asked for while one is out goes once it answers; a first read is
 * not needed then. */
static void follow_send(zkl_client *c, zhandle_t *zh, int kind) {
  zkl_req *r;
  int rc;
  if (!c->follow || !zh || c->closing) return;
  if (c->cfg_out) {
    if (kind == FOLLOW_WATCHED) c->cfg_again = 1;
    return;
  }
  r = zkl_req_new(c, NULL, (int)c->n_sessions, kind);
  if (!r) return; /* (out of memory: the next connection reads it) */
  /* (the asynchronous calls read /zookeeper/config past the chroot; the
   * synchronous ones do not) */
  rc = kind == FOLLOW_WATCHED
       ? zoo_awgetconfig(zh, follow_watcher, c, follow_cb, r)
       : zoo_agetconfig(zh, 0, follow_cb, r);
  if (rc != ZOK) {
    zkl_req_done(r);
    return;
  }
  c->cfg_out = 1;
}

void follow_read(zkl_client *c, zhandle_t *zh) {
  follow_send(c, zh, FOLLOW_PROBE);
}

/* A connection's first answered request (liveness.c): the server takes
 * ours, so the read goes now.  Not before: a server that requires
 * authentication closes the session of a client whose first request comes
 * unauthenticated, and that request must be the user's, which hears why
 * (no_auth), not ours. */
void follow_answered(zkl_client *c) {
  if (!c->cfg_wanted || c->state != ZKL_CONNECTED) return;
  c->cfg_wanted = 0;
  /* (a TLS client keeps its servers: the configuration names the members'
   * plaintext client ports, not their secure ones) */
  if (c->secure && c->secure->tls) return;
  follow_read(c, c->zh);
}

/* The configuration changed: read it again (and so watch it again). */
static void follow_watcher(zhandle_t *zh, int type, int state,
                           const char *path, void *ctx) {
  zkl_client *c = ctx;
  (void)state; (void)path; /* (the path may come back mangled under a
                            * chroot: the watch is known by its ctx) */
  if (type != ZOO_CHANGED_EVENT && type != ZOO_CREATED_EVENT) return;
  pthread_mutex_lock(&c->mu);
  if (zh == c->zh && !c->renewing && c->state == ZKL_CONNECTED)
    follow_send(c, zh, FOLLOW_WATCHED);
  pthread_mutex_unlock(&c->mu);
}

/* Is every host:port of list a in list b (comma-separated)? */
static int follow_within(const char *a, const char *b) {
  const char *p = a;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    const char *q = b;
    int found = 0;
    while (*q && !found) {
      const char *qe = strchr(q, ',');
      size_t m = qe ? (size_t)(qe - q) : strlen(q);
      found = m == n && memcmp(p, q, n) == 0;
      q = qe ? qe + 1 : q + m;
    }
    if (!found) return 0;
    p = e ? e + 1 : p + n;
  }
  return 1;
}

const char *follow_connect_string(const zkl_client *c) {
  return c->followed ? c->followed : c->hosts;
}

/* The servers of the connect string s (its chroot cut), a new string. */
static char *follow_servers_of(const char *s) {
  const char *slash = strchr(s, '/');
  size_t n = slash ? (size_t)(slash - s) : strlen(s);
  char *out = malloc(n + 1);
  if (out) {
    memcpy(out, s, n);
    out[n] = '\0';
  }
  return out;
}

/* Does every host:port of list resolve?  The C client resolves the list
 * it is given on its IO thread, after zoo_zklock_set_servers returned,
 * and a list none of whose names resolves would leave it nowhere to go:
 * a list is applied only when all of them do.  Blocks (name resolution):
 * the timer thread's, without the mutex. */
static int follow_resolves(const char *list) {
  const char *p = list;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    char host[300];
    const char *colon;
    struct addrinfo hints, *res = NULL;
    int rc;
    if (n >= sizeof host) return 0;
    memcpy(host, p, n);
    host[n] = '\0';
    colon = strrchr(host, ':'); /* (as the C client splits it) */
    if (!colon) return 0;
    host[colon - host] = '\0';
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(host, colon + 1, &hints, &res);
    if (res) freeaddrinfo(res);
    if (rc != 0) return 0;
    p = e ? e + 1 : p + n;
  }
  return 1;
}

/* Timer thread, mu held on entry and return (dropped meanwhile: the C
 * client resolves the names).  Only the timer thread replaces c->zh, and
 * zkl_client_close joins it first: the handle stays while it runs. */
void follow_apply(zkl_client *c) {
  char *hosts = c->cfg_pending, *now_servers, *full = NULL;
  uint64_t version = c->cfg_pending_version;
  zhandle_t *zh = c->zh;
  size_t n;
  int rc;
  c->cfg_pending = NULL;
  if (!hosts) return;
  if (!c->follow || c->closing || !zh || version <= c->cfg_version) {
    free(hosts);
    return;
  }
  now_servers = follow_servers_of(follow_connect_string(c));
  if (now_servers && follow_within(hosts, now_servers) &&
      follow_within(now_servers, hosts)) { /* the same members */
    c->cfg_version = version;
    free(now_servers);
    free(hosts);
    return;
  }
  free(now_servers);
  n = strlen(hosts) + (c->chroot ? strlen(c->chroot) : 0) + 1;
  full = malloc(n);
  if (!full) {
    free(hosts);
    return;
  }
  snprintf(full, n, "%s%s", hosts, c->chroot ? c->chroot : "");
  pthread_mutex_unlock(&c->mu);
  rc = !follow_resolves(hosts) ? ZBADARGUMENTS
     : FOLLOW_SET_SERVERS(zh, hosts); /* (no chroot: the handle keeps its) */
  pthread_mutex_lock(&c->mu);
  if (rc != ZOK) {
    c->cfg_version = version; /* (refused: not tried again) */
    char line[512];
    snprintf(line, sizeof line, "ZOO_WARN@zklock_follow@0: the ensemble's "
             "configuration %llx names servers %.300s, which the client "
             "refused (%s): the servers stay as they are",
             (unsigned long long)version, hosts,
             rc == ZBADARGUMENTS ? "a name does not resolve" : zerror(rc));
    zkl_log_note(ZKL_LOG_WARN, line);
    free(full);
  } else {
    char line[640];
    free(c->followed);
    c->followed = full; /* (for a new session after an expiry) */
    c->cfg_version = version;
    c->n_followed++;
    snprintf(line, sizeof line, "ZOO_INFO@zklock_follow@0: following the "
             "ensemble: configuration %llx, servers now %.500s",
             (unsigned long long)version, hosts);
    zkl_log_note(ZKL_LOG_INFO, line);
    if (c->want_state) zkl_event_push(c, ZKL_EV_STATE, "servers", 0);
    c->ready_all = 1;
    zkl_client_changed(c);
  }
  free(hosts);
}

/* ---- the Lua thread ----------------------------------------------------- */

void zkl_client_follow(zkl_client *c, int on) {
  pthread_mutex_lock(&c->mu);
  c->follow = on != 0;
  if (!on) {
    free(c->cfg_pending);
    c->cfg_pending = NULL;
  }
  pthread_mutex_unlock(&c->mu);
}

char *zkl_client_servers(zkl_client *c, unsigned long *moves) {
  char *s;
  pthread_mutex_lock(&c->mu);
  s = follow_servers_of(follow_connect_string(c));
  if (moves) *moves = c->n_followed;
  pthread_mutex_unlock(&c->mu);
  return s;
}
