/* The session: one zhandle, its state as the Lua side sees it, and the
 * condition variable every wait sleeps on.  ZooKeeper's threads only take
 * the mutex, advance C state and broadcast; they never touch Lua. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "zkl.h"

/* ---- errors ------------------------------------------------------------ */

static const char *const client_codes[] = {
  "ok",
#define ZKL_STR(n, s) s,
  ZKL_CODES(ZKL_STR)
#undef ZKL_STR
};

const char *zkl_code_name(int code) {
  if (code < 0 || code >= ZKL_NCODES) return "zk_error";
  return client_codes[code];
}

const char *zkl_rc_name(int rc) {
  switch (rc) {
  case ZOK: return "ZOK";
  case ZSYSTEMERROR: return "ZSYSTEMERROR";
  case ZRUNTIMEINCONSISTENCY: return "ZRUNTIMEINCONSISTENCY";
  case ZDATAINCONSISTENCY: return "ZDATAINCONSISTENCY";
  case ZCONNECTIONLOSS: return "ZCONNECTIONLOSS";
  case ZMARSHALLINGERROR: return "ZMARSHALLINGERROR";
  case ZUNIMPLEMENTED: return "ZUNIMPLEMENTED";
  case ZOPERATIONTIMEOUT: return "ZOPERATIONTIMEOUT";
  case ZBADARGUMENTS: return "ZBADARGUMENTS";
  case ZINVALIDSTATE: return "ZINVALIDSTATE";
  case ZNONODE: return "ZNONODE";
  case ZNOAUTH: return "ZNOAUTH";
  case ZBADVERSION: return "ZBADVERSION";
  case ZNOCHILDRENFOREPHEMERALS: return "ZNOCHILDRENFOREPHEMERALS";
  case ZNODEEXISTS: return "ZNODEEXISTS";
  case ZNOTEMPTY: return "ZNOTEMPTY";
  case ZSESSIONEXPIRED: return "ZSESSIONEXPIRED";
  case ZINVALIDCALLBACK: return "ZINVALIDCALLBACK";
  case ZINVALIDACL: return "ZINVALIDACL";
  case ZAUTHFAILED: return "ZAUTHFAILED";
  case ZCLOSING: return "ZCLOSING";
  case ZNOTHING: return "ZNOTHING";
  case ZSESSIONMOVED: return "ZSESSIONMOVED";
  default: return "ZAPIERROR";
  }
}

int zkl_code_from_rc(int rc) {
  switch (rc) {
  case ZOK: return ZKL_OK;
  case ZCONNECTIONLOSS: case ZOPERATIONTIMEOUT: case ZSESSIONMOVED:
    return ZKL_ECONNECTION_LOSS;
  case ZSESSIONEXPIRED: return ZKL_ESESSION_EXPIRED;
  case ZCLOSING: case ZINVALIDSTATE: return ZKL_ECLOSED;
  case ZNOAUTH: case ZAUTHFAILED: return ZKL_ENO_AUTH;
  case ZNONODE: return ZKL_ENO_NODE;
  case ZNODEEXISTS: return ZKL_ENODE_EXISTS;
  case ZNOTEMPTY: return ZKL_ENOT_EMPTY;
  default: return ZKL_EZK_ERROR;
  }
}

void zkl_seterr(zkl_error *e, int code, const char *fmt, ...) {
  va_list ap;
  if (!e) return;
  e->code = code;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
}

void zkl_seterr_rc(zkl_error *e, int rc, const char *what) {
  zkl_seterr(e, zkl_code_from_rc(rc), "%s: %s%s%s", zkl_rc_name(rc),
             zerror(rc), what ? " " : "", what ? what : "");
}

double zkl_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double zkl_bootnow(void) {
  struct timespec ts;
#ifdef CLOCK_BOOTTIME
  if (clock_gettime(CLOCK_BOOTTIME, &ts) == 0)
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
#endif
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A monotonic time (zkl_now's clock) as a timedwait deadline. */
static struct timespec client_abstime(double end) {
  struct timespec ts;
  ts.tv_sec = (time_t)end;
  ts.tv_nsec = (long)((end - (double)ts.tv_sec) * 1e9);
  if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
  return ts;
}

/* ---- requests ---------------------------------------------------------- */

zkl_req *zkl_req_new(zkl_client *c, zkl_lock *l, zkl_op *op, int epoch,
                     int kind) {
  zkl_req *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->c = c; r->l = l; r->op = op; r->epoch = epoch; r->kind = kind;
  r->sent = zkl_bootnow(); /* (compared with heard and expiry) */
  if (l) l->refs++;
  if (op) op->refs++;
  r->next = c->reqs;
  if (c->reqs) c->reqs->prev = r;
  c->reqs = r;
  if (l || op) c->n_requests++; /* (probes are not counted) */
  return r;
}

void zkl_req_done(zkl_req *r) {
  zkl_client *c = r->c;
  if (r->prev) r->prev->next = r->next; else c->reqs = r->next;
  if (r->next) r->next->prev = r->prev;
  if (r->l) zkl_lock_unref(r->l);
  if (r->op) zkl_op_unref(r->op);
  free(r);
}

/* ---- session ----------------------------------------------------------- */

void zkl_client_heard(zkl_client *c, double sent, int rc) {
  switch (rc) { /* what only a server's answer says (the library fails
                 * unanswered requests with whatever broke the connection) */
  case ZOK: case ZNONODE: case ZNODEEXISTS: case ZNOTEMPTY: case ZBADVERSION:
  case ZNOAUTH: case ZNOCHILDRENFOREPHEMERALS: case ZINVALIDACL:
  case ZBADARGUMENTS: case ZUNIMPLEMENTED:
    if (sent > c->heard) c->heard = sent;
    break;
  default:
    break;
  }
}

void zkl_client_kick(zkl_client *c) {
  if (!c->timer_idle) return; /* it wakes within a third of the timeout */
  c->timer_idle = 0;
  pthread_cond_signal(&c->tcv);
}

double zkl_client_expiry(const zkl_client *c) {
  return c->heard + c->timeout_ms / 1000.0;
}

double zkl_client_margin(const zkl_client *c) {
  return c->timeout_ms / 10000.0; /* a tenth of the session timeout */
}

void zkl_client_changed(zkl_client *c) {
  c->gen++;
  pthread_cond_broadcast(&c->cv);
  if (c->wake_fd >= 0 && !c->wake_pending) {
    char one = 1;
    ssize_t n;
    c->wake_since = zkl_now();
    n = send(c->wake_fd, &one, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n; /* EAGAIN: unread bytes wake the reader anyway */
    c->wake_pending = 1;
  }
}

#define ZKL_READY_MAX 65536

void zkl_client_touch(zkl_client *c, unsigned wake_id) {
  if (!wake_id || c->wake_fd < 0 || c->ready_all) return;
  if (c->n_ready == c->cap_ready) {
    int cap = c->cap_ready ? 2 * c->cap_ready : 64;
    unsigned *p = cap <= ZKL_READY_MAX
                    ? realloc(c->ready, (size_t)cap * sizeof *p) : NULL;
    if (!p) { c->ready_all = 1; return; }
    c->ready = p;
    c->cap_ready = cap;
  }
  c->ready[c->n_ready++] = wake_id;
}

unsigned long zkl_client_set_wake(zkl_client *c, unsigned *slot,
                                  unsigned id) {
  unsigned long gen;
  pthread_mutex_lock(&c->mu);
  *slot = id;
  gen = c->gen;
  pthread_mutex_unlock(&c->mu);
  return gen;
}

const char *zkl_client_wake_listen(zkl_client *c, zkl_error *err) {
  char dir[] = "/tmp/zklock-wake.XXXXXX";
  struct sockaddr_un sa;
  int fd;
  if (c->wake_fd >= 0 || c->wake_listen >= 0) {
    zkl_seterr(err, ZKL_EZK_ERROR, "the wake-up socket is already set up");
    return NULL;
  }
  if (!mkdtemp(dir)) {
    zkl_seterr(err, ZKL_EZK_ERROR, "mkdtemp: %s", strerror(errno));
    return NULL;
  }
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/s", dir);
  /* non-blocking: an accept with no connection pending fails at once
   * instead of blocking the nginx worker for ever */
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      listen(fd, 1) != 0 || !(c->wake_path = strdup(sa.sun_path))) {
    zkl_seterr(err, ZKL_EZK_ERROR, "wake-up socket %s: %s", sa.sun_path,
               strerror(errno));
    if (fd >= 0) close(fd);
    unlink(sa.sun_path);
    rmdir(dir);
    return NULL;
  }
  c->wake_listen = fd;
  return c->wake_path;
}

static void client_wake_unlisten(zkl_client *c) {
  if (c->wake_listen >= 0) close(c->wake_listen);
  c->wake_listen = -1;
  if (c->wake_path) {
    char *slash = strrchr(c->wake_path, '/');
    unlink(c->wake_path);
    if (slash) { *slash = 0; rmdir(c->wake_path); }
    free(c->wake_path);
    c->wake_path = NULL;
  }
}

int zkl_client_wake_accept(zkl_client *c, zkl_error *err) {
  int fd;
  if (c->wake_listen < 0) {
    zkl_seterr(err, ZKL_EZK_ERROR, "no wake-up socket is listening");
    return 0;
  }
  fd = accept4(c->wake_listen, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    zkl_seterr(err, ZKL_EZK_ERROR, "accept on the wake-up socket: %s",
               strerror(errno));
    client_wake_unlisten(c);
    return 0;
  }
  client_wake_unlisten(c);
  pthread_mutex_lock(&c->mu);
  c->wake_fd = fd;
  c->wake_pending = 0;
  c->ready_all = 1; /* whatever happened before: everyone looks again */
  zkl_client_changed(c);
  pthread_mutex_unlock(&c->mu);
  return 1;
}

int zkl_client_usable(zkl_client *c, zkl_error *err) {
  switch (c->state) {
  case ZKL_EXPIRED:
    zkl_seterr(err, ZKL_ESESSION_EXPIRED, "session expired");
    return 0;
  case ZKL_AUTH_FAILED:
    zkl_seterr(err, ZKL_ENO_AUTH, "authentication failed");
    return 0;
  case ZKL_CLOSED:
    zkl_seterr(err, ZKL_ECLOSED, "client is closed");
    return 0;
  }
  if (c->closing || !c->zh) {
    zkl_seterr(err, ZKL_ECLOSED, "client is closed");
    return 0;
  }
  return 1;
}

void zkl_event_push(zkl_client *c, int type, const char *path) {
  zkl_event *e = calloc(1, sizeof *e);
  if (!e) return;
  e->type = type;
  e->path = strdup(path);
  if (!e->path) { free(e); return; }
  if (c->ev_tail) c->ev_tail->next = e; else c->ev_head = e;
  c->ev_tail = e;
  c->n_events++;
}

static void client_free_events(zkl_client *c) {
  while (c->ev_head) {
    zkl_event *e = c->ev_head;
    c->ev_head = e->next;
    free(e->path);
    free(e);
  }
  c->ev_tail = NULL;
  c->n_events = 0;
}

static void client_watcher(zhandle_t *zh, int type, int state,
                           const char *path, void *ctx) {
  zkl_client *c = ctx;
  zkl_lock *l, *next;
  zkl_op *op, *onext;
  pthread_mutex_lock(&c->mu);
  if (zh == c->old_zh) { /* a session given up, being closed */
    pthread_mutex_unlock(&c->mu);
    return;
  }
  /* the new session's first events: wait until the timer thread has
   * stored its handle (zookeeper_init runs without the mutex) */
  while (c->renewing) pthread_cond_wait(&c->cv, &c->mu);
  if (zh != c->zh) {
    pthread_mutex_unlock(&c->mu);
    return;
  }
  if (type == ZOO_SESSION_EVENT) {
    c->ready_all = 1; /* every waiter sees the session's news */
    pthread_cond_signal(&c->tcv); /* probe now, or renew */
    if (state == ZOO_CONNECTED_STATE) {
      const clientid_t *id = zoo_client_id(zh);
      c->session_id = id ? id->client_id : 0;
      c->timeout_ms = zoo_recv_timeout(zh);
      c->probe_at = 0;
      if (c->state == ZKL_CONNECTING) {
        c->state = ZKL_CONNECTED;
        for (l = c->locks; l; l = next) {
          next = l->next;
          zkl_lock_on_connected(l);
        }
        for (op = c->ops; op; op = onext) {
          onext = op->next;
          zkl_op_on_connected(op);
        }
      }
    } else if (state == ZOO_CONNECTING_STATE ||
               state == ZOO_ASSOCIATING_STATE) {
      if (c->state == ZKL_CONNECTED) c->state = ZKL_CONNECTING;
    } else if (state == ZOO_EXPIRED_SESSION_STATE ||
               state == ZOO_AUTH_FAILED_STATE) {
      if (c->state != ZKL_CLOSED)
        c->state = state == ZOO_EXPIRED_SESSION_STATE ? ZKL_EXPIRED
                                                      : ZKL_AUTH_FAILED;
      for (l = c->locks; l; l = next) {
        next = l->next;
        zkl_lock_on_expired(l);
      }
      for (op = c->ops; op; op = onext) {
        onext = op->next;
        zkl_op_on_expired(op);
      }
    }
  } else if (path != NULL) {
    int about = 0; /* 3: something waited for it; 2, 1: our own node
                      (1: our own deletion: nothing to look at) */
    c->n_watch_events++;
    for (l = c->locks; l; l = next) {
      int a;
      next = l->next;
      a = zkl_lock_on_watch(l, type, path);
      if (a > about) about = a;
    }
    for (op = c->ops; op; op = onext) {
      onext = op->next;
      if (op->watch && strcmp(op->watch, path) == 0) {
        about = 3;
        zkl_op_on_watch(op);
      }
    }
    /* (one session gets one event per path: when our own node is also
     * the one a waiter of ours watched, it counts as that wake-up) */
    if (about == 1 || about == 2) c->n_own_events++;
    if (about == 1) { /* our own release: nobody need look again */
      pthread_mutex_unlock(&c->mu);
      return;
    }
  }
  zkl_client_changed(c);
  pthread_mutex_unlock(&c->mu);
}

/* The library resolves the connect string again every time its IO thread
 * polls: a getaddrinfo (with a netlink round trip) per wake-up, and a
 * glibc lock held at random moments, so that a process forking then (nginx
 * making its workers) hands the child a getaddrinfo that never returns.
 * Resolve on connection loss only. */
static void client_no_routine_dns(zhandle_t *zh) {
  zoo_set_servers_resolution_delay(zh, -1);
}

/* Requests the library still owed us once zookeeper_close returned (it may
 * drop them) are finished here as ZCLOSING, so every owner lets go. */
static void client_drain(zkl_client *c) {
  while (c->reqs) {
    zkl_req *r = c->reqs;
    if (r->l) zkl_lock_closing(r);
    else if (r->op) zkl_op_closing(r);
    zkl_req_done(r);
  }
  c->probe_out = 0;
}

static void client_probe_cb(int rc, const struct Stat *st, const void *data) {
  zkl_req *r = (zkl_req *)data;
  zkl_client *c = r->c;
  (void)st;
  pthread_mutex_lock(&c->mu);
  if ((unsigned long)r->epoch == c->n_sessions) {
    c->probe_out = 0;
    zkl_client_heard(c, r->sent, rc);
    pthread_cond_signal(&c->tcv);
  }
  zkl_req_done(r);
  pthread_mutex_unlock(&c->mu);
}

/* Any request answered proves the server heard us; "/" is the chroot. */
static void client_probe(zkl_client *c, double now) {
  zkl_req *r = zkl_req_new(c, NULL, NULL, (int)c->n_sessions, -1);
  c->probe_at = now;
  if (!r) return;
  if (zoo_aexists(c->zh, "/", 0, client_probe_cb, r) != ZOK) zkl_req_done(r);
  else c->probe_out = 1;
}

/* After an expiry: close the dead handle and open a new session (timer
 * thread, mu held on entry and return).  0 when none could be opened. */
static int client_renew(zkl_client *c) {
  zhandle_t *old = c->zh, *zh;
  c->zh = NULL;
  c->old_zh = old;
  c->renewing = 1;
  pthread_mutex_unlock(&c->mu);
  if (old) zookeeper_close(old); /* not a ZooKeeper thread: allowed */
  pthread_mutex_lock(&c->mu);
  c->old_zh = NULL; /* gone: its address may come back */
  client_drain(c);
  zh = NULL;
  if (!c->closing && !c->timer_stop) {
    /* without the mutex: name resolution may take long */
    pthread_mutex_unlock(&c->mu);
    zh = zookeeper_init(c->hosts, client_watcher, c->timeout_req, NULL, c, 0);
    pthread_mutex_lock(&c->mu);
  }
  c->renewing = 0;
  pthread_cond_broadcast(&c->cv); /* its watcher may wait for c->zh */
  if (!zh) return 0;
  client_no_routine_dns(zh);
  c->zh = zh; /* (closed by zkl_client_close if that began meanwhile) */
  c->state = ZKL_CONNECTING;
  c->session_id = 0;
  c->n_sessions++;
  if (c->auth_scheme)
    zoo_add_auth(c->zh, c->auth_scheme, c->auth_cred, c->auth_len, NULL,
                 NULL);
  c->ready_all = 1;
  zkl_client_changed(c);
  return 1;
}

/* Holds are lost once the server may have expired the session (heard +
 * timeout); while any is held, a probe every third of the timeout keeps
 * `heard` fresh (the library's own pings are invisible to us). */
static void *client_timer(void *arg) {
  zkl_client *c = arg;
  pthread_mutex_lock(&c->mu);
  while (!c->timer_stop) {
    /* reckoned on the boot clock (it runs on during a suspend, as the
     * server's does); slept on the monotonic one (the condvar's) */
    double now = zkl_bootnow(), t = c->timeout_ms / 1000.0, next = now + 3600;
    double expiry = zkl_client_expiry(c);
    int any = 0;
    zkl_lock *l, *ln;
    struct timespec ts;
    if (c->state == ZKL_EXPIRED && c->renew && !c->closing) {
      if (client_renew(c)) continue;
      if (c->timer_stop) break;
      next = now + 1; /* try again */
    }
    for (l = c->locks; l; l = ln) {
      ln = l->next;
      any |= zkl_lock_check_lost(l, now, expiry);
    }
    c->timer_idle = !any; /* a new hold must wake it (zkl_client_kick) */
    if (any) {
      if (expiry < next) next = expiry;
      if (c->state == ZKL_CONNECTED && c->zh && !c->closing &&
          !c->probe_out) {
        double due = c->probe_at + t / 3;
        if (now >= due) { client_probe(c, now); due = now + t / 3; }
        if (due < next) next = due;
      }
    }
    ts = client_abstime(zkl_now() + (next > now ? next - now : 0));
    pthread_cond_timedwait(&c->tcv, &c->mu, &ts);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

/* ---- ACLs (docs/acl.md) -------------------------------------------------- */

void zkl_acl_free(struct ACL_vector *v) {
  int i;
  for (i = 0; v->data && i < v->count; i++) {
    free(v->data[i].id.scheme);
    free(v->data[i].id.id);
  }
  free(v->data);
  v->data = NULL;
  v->count = 0;
}

int zkl_acl_perms(const char *s) {
  int p = 0;
  for (; *s; s++) {
    switch (*s) {
    case 'c': p |= ZOO_PERM_CREATE; break;
    case 'd': p |= ZOO_PERM_DELETE; break;
    case 'r': p |= ZOO_PERM_READ; break;
    case 'w': p |= ZOO_PERM_WRITE; break;
    case 'a': p |= ZOO_PERM_ADMIN; break;
    default: return -1;
    }
  }
  return p;
}

/* open: anyone may do anything.  creator: only the identities the creating
 * session authenticated as.  read: those identities may do anything, and
 * anyone may read (list the queue, read owner data) but not create,
 * delete or write: lock directory and lock nodes alike, so that every
 * client with the creator's credentials can queue on the directory. */
static int client_acl_entry(struct ACL *e, int perms, const char *scheme,
                            const char *id) {
  e->perms = perms;
  e->id.scheme = strdup(scheme);
  e->id.id = strdup(id);
  return e->id.scheme && e->id.id;
}

int zkl_acl_preset(int preset, struct ACL_vector *out, zkl_error *err) {
  int ok, n = preset == ZKL_ACL_READ ? 2 : 1;
  out->data = calloc((size_t)n, sizeof *out->data);
  out->count = out->data ? n : 0;
  if (!out->data) ok = 0;
  else if (preset == ZKL_ACL_OPEN)
    ok = client_acl_entry(&out->data[0], ZOO_PERM_ALL, "world", "anyone");
  else
    ok = client_acl_entry(&out->data[0], ZOO_PERM_ALL, "auth", "") &&
         (preset != ZKL_ACL_READ ||
          client_acl_entry(&out->data[1], ZOO_PERM_READ, "world", "anyone"));
  if (ok) return 1;
  zkl_acl_free(out);
  zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
  return 0;
}

int zkl_acl_copy(const struct ACL_vector *v, struct ACL_vector *out,
                 zkl_error *err) {
  int i;
  out->data = calloc((size_t)(v->count > 0 ? v->count : 1), sizeof *out->data);
  out->count = out->data ? v->count : 0;
  for (i = 0; out->data && i < v->count; i++)
    if (!client_acl_entry(&out->data[i], v->data[i].perms,
                          v->data[i].id.scheme, v->data[i].id.id)) break;
  if (out->data && i == v->count) return 1;
  zkl_acl_free(out);
  zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
  return 0;
}

zkl_client *zkl_client_new(const char *hosts, int timeout_ms,
                           struct ACL_vector *acl, int renew, zkl_error *err) {
  zkl_client *c = calloc(1, sizeof *c);
  pthread_condattr_t ca;
  if (!c || !(c->hosts = strdup(hosts))) {
    free(c);
    zkl_acl_free(acl);
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return NULL;
  }
  c->acl = *acl; /* ours from now on */
  acl->data = NULL;
  acl->count = 0;
  c->max_data = ZKL_DATA_DEFAULT;
  pthread_mutex_init(&c->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->cv, &ca);
  pthread_cond_init(&c->tcv, &ca);
  pthread_condattr_destroy(&ca);
  c->refs = 1;
  c->state = ZKL_CONNECTING;
  c->timeout_ms = c->timeout_req = timeout_ms;
  c->renew = renew;
  c->pid = getpid();
  c->wake_fd = c->wake_listen = -1;
  /* Hold the mutex so the watcher, which may fire before zookeeper_init
   * returns, sees c->zh set. */
  pthread_mutex_lock(&c->mu);
  errno = 0;
  c->zh = zookeeper_init(hosts, client_watcher, timeout_ms, NULL, c, 0);
  if (!c->zh) {
    int e = errno;
    pthread_mutex_unlock(&c->mu);
    zkl_seterr(err, e == EINVAL ? ZKL_EZK_ERROR : ZKL_ECONNECTION_LOSS,
               "cannot open a session to '%s': %s", hosts,
               e ? strerror(e) : "invalid connect string");
    pthread_cond_destroy(&c->cv);
    pthread_cond_destroy(&c->tcv);
    pthread_mutex_destroy(&c->mu);
    zkl_acl_free(&c->acl);
    free(c->hosts);
    free(c);
    return NULL;
  }
  client_no_routine_dns(c->zh);
  { /* the timer takes no signals: they are the process's (nginx...) */
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    c->timer_on = pthread_create(&c->timer, NULL, client_timer, c) == 0;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
  }
  pthread_mutex_unlock(&c->mu);
  if (!c->timer_on) {
    zkl_seterr(err, ZKL_EZK_ERROR, "cannot start the timer thread");
    zkl_client_unref(c);
    return NULL;
  }
  return c;
}

int zkl_client_add_auth(zkl_client *c, const char *scheme, const char *cred,
                        int len, zkl_error *err) {
  int rc;
  char *s = strdup(scheme), *k = malloc(len > 0 ? (size_t)len : 1);
  if (!s || !k) {
    free(s); free(k);
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return 0;
  }
  if (len > 0) memcpy(k, cred, (size_t)len);
  pthread_mutex_lock(&c->mu);
  rc = c->zh ? zoo_add_auth(c->zh, scheme, cred, len, NULL, NULL)
     : c->closing ? ZINVALIDSTATE
     : ZOK; /* between sessions: the next one gets it */
  if (rc == ZOK) { /* kept for the sessions to come */
    free(c->auth_scheme); free(c->auth_cred);
    c->auth_scheme = s; c->auth_cred = k; c->auth_len = len;
    s = k = NULL;
  }
  pthread_mutex_unlock(&c->mu);
  free(s); free(k);
  if (rc != ZOK) { zkl_seterr_rc(err, rc, scheme); return 0; }
  return 1;
}

int zkl_client_forked(const zkl_client *c) { return c->pid != getpid(); }

void zkl_client_close(zkl_client *c) {
  zhandle_t *zh;
  pthread_mutex_lock(&c->mu);
  if (c->closing) {
    pthread_mutex_unlock(&c->mu);
    return;
  }
  c->closing = 1;
  c->timer_stop = 1;
  pthread_cond_signal(&c->tcv);
  pthread_mutex_unlock(&c->mu);
  /* Never from a ZooKeeper thread; never in a forked child, where the
   * library's threads (and our timer) do not exist. */
  if (c->timer_on && !zkl_client_forked(c)) pthread_join(c->timer, NULL);
  c->timer_on = 0;
  pthread_mutex_lock(&c->mu);
  zh = c->zh; /* (the timer may have replaced it) */
  pthread_mutex_unlock(&c->mu);
  if (zh && !zkl_client_forked(c)) zookeeper_close(zh);
  pthread_mutex_lock(&c->mu);
  c->zh = NULL;
  c->state = ZKL_CLOSED;
  client_drain(c);
  /* and those waiting for a reconnect, with no request out */
  {
    zkl_lock *l, *ln;
    zkl_op *op, *on;
    for (l = c->locks; l; l = ln) { ln = l->next; zkl_lock_on_closed(l); }
    for (op = c->ops; op; op = on) { on = op->next; zkl_op_on_expired(op); }
  }
  c->ready_all = 1;
  zkl_client_changed(c);
  pthread_mutex_unlock(&c->mu);
}

void zkl_client_unref(zkl_client *c) {
  int last;
  pthread_mutex_lock(&c->mu);
  last = --c->refs == 0;
  pthread_mutex_unlock(&c->mu);
  if (!last) return;
  zkl_client_close(c);
  client_free_events(c);
  if (c->wake_fd >= 0) close(c->wake_fd);
  client_wake_unlisten(c);
  free(c->ready);
  free(c->hosts); free(c->auth_scheme); free(c->auth_cred);
  zkl_acl_free(&c->acl);
  pthread_cond_destroy(&c->tcv);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

unsigned long zkl_client_wait(zkl_client *c, unsigned long gen,
                              double timeout) {
  unsigned long now_gen;
  struct timespec ts;
  pthread_mutex_lock(&c->mu);
  if (timeout >= 0 && timeout < 1e9) { /* longer: as good as for ever */
    ts = client_abstime(zkl_now() + timeout);
    while (c->gen == gen)
      if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) != 0) break;
  } else {
    while (c->gen == gen) pthread_cond_wait(&c->cv, &c->mu);
  }
  now_gen = c->gen;
  pthread_mutex_unlock(&c->mu);
  return now_gen;
}
