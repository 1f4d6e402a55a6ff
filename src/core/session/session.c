/* The session as ZooKeeper's threads and the timer thread run it: one
 * zhandle, its state as Lua sees it, the watcher that hands every event to
 * the tasks, and the timer thread that keeps "last heard" fresh while a
 * lock is held, declares holds lost, and opens a new session after an
 * expiry (docs/design.md, section 9).  The client's life on the Lua
 * thread (made, closed, freed, read) is client.c's.
 * ZooKeeper's threads only take the mutex, advance C state and wake the
 * waiters (notify.c); they never touch Lua.  Tasks are reached only
 * through their class (zkl_task_class), never by name. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "session.h"

/* ---- the watcher -------------------------------------------------------- */

/* A connection-state notice, for Lua's on_state listeners. */
static void session_notice(zkl_client *c, const char *state) {
  if (c->want_state) zkl_event_push(c, ZKL_EV_STATE, state, 0);
}

/* Connected (again): tell Lua and every task. */
static void session_connected(zkl_client *c) {
  zkl_task *t, *next;
  session_notice(c, !c->connected_once ? "connected"
                    : c->renewed ? "renewed" : "reconnected");
  c->connected_once = 1;
  c->renewed = 0;
  c->lost_noticed = 0;
  c->state = ZKL_CONNECTED;
  SESSION_EACH(c, t, next)
    if (t->cls->on_connected) t->cls->on_connected(t);
  /* (every connection, once a request of it is answered: a watch may
   * have gone with the last one) */
  c->cfg_wanted = c->follow;
}

/* The session is over for good (expired, a login or TLS refused): Lua
 * hears "lost" once, and every task ends as in an expiry. */
static void session_over(zkl_client *c) {
  zkl_task *t, *next;
  if (!c->lost_noticed) session_notice(c, "lost");
  c->lost_noticed = 1;
  SESSION_EACH(c, t, next)
    if (t->cls->on_expired) t->cls->on_expired(t);
}

/* ---- the chroot --------------------------------------------------------- */

/* The chroot must exist, or every lock would fail late and, worse, a
 * barrier wait would pass and a listing of holders come back empty: each
 * session looks for it (an exists of "/", which the C client turns into
 * the chroot) at its first connection, and counts as connected once it
 * was found.  Not again on a reconnect of the same session: that changes
 * nothing on the server (docs/api.md, zklock.connect). */
static int session_chroot_found(zkl_client *c, zhandle_t *zh);

static void session_chroot_cb(int rc, const struct Stat *st,
                              const void *data) {
  zkl_req *r = (zkl_req *)data;
  zkl_client *c = r->c;
  zkl_task *t, *next;
  (void)st;
  pthread_mutex_lock(&c->mu);
  if ((unsigned long)r->epoch == c->n_sessions && c->chroot_out) {
    c->chroot_out = 0;
    zkl_client_heard(c, r->sent, rc);
    if (c->state != ZKL_CONNECTING || c->closing || zkl_is_gone(rc)) {
      /* expiring, expired or closing: the session's events decide */
    } else if (zkl_is_cut(rc)) {
      /* ask again once connected (now, if that was quicker than us) */
      if (c->zh && zoo_state(c->zh) == ZOO_CONNECTED_STATE &&
          session_chroot_found(c, c->zh))
        session_connected(c);
    } else if (rc == ZNONODE) {
      c->state = ZKL_NO_CHROOT; /* for good: every task ends with no_node */
      SESSION_EACH(c, t, next)
        if (t->cls->on_expired) t->cls->on_expired(t);
    } else {
      c->chroot_ok = 1; /* (any other answer is not ours to judge: the
                         * requests will meet it) */
      session_connected(c);
    }
    c->ready_all = 1;
    zkl_client_changed(c);
  }
  zkl_req_done(r);
  pthread_mutex_unlock(&c->mu);
}

/* 1 when the session may count as connected: no chroot, or found.  Else
 * the look for it is out (sent now if need be), and its answer decides. */
static int session_chroot_found(zkl_client *c, zhandle_t *zh) {
  zkl_req *r;
  if (zkl_client_checked(c)) return 1;
  if (c->chroot_out) return 0;
  r = zkl_req_new(c, NULL, (int)c->n_sessions, -1);
  if (!r) return 0; /* (out of memory: the next connection tries again) */
  if (zoo_aexists(zh, "/", 0, session_chroot_cb, r) != ZOK) {
    zkl_req_done(r);
    return 0;
  }
  c->chroot_out = 1;
  return 0;
}

static void session_event(zkl_client *c, zhandle_t *zh, int state) {
  c->ready_all = 1; /* every waiter sees the session's news */
  pthread_cond_signal(&c->tcv); /* probe now, or renew */
  if (state == ZOO_CONNECTED_STATE) {
    const clientid_t *id = zoo_client_id(zh);
    c->session_id = id ? id->client_id : 0;
    c->timeout_ms = zoo_recv_timeout(zh);
    c->probe_at = 0;
    if (c->state == ZKL_CONNECTING && session_chroot_found(c, zh))
      session_connected(c);
  } else if (state == ZOO_CONNECTING_STATE ||
             state == ZOO_ASSOCIATING_STATE) {
    if (c->state == ZKL_CONNECTED) {
      c->state = ZKL_CONNECTING;
      c->suspended_at = zkl_bootnow();
      session_notice(c, "suspended");
    }
  } else if (state == ZOO_EXPIRED_SESSION_STATE ||
             state == ZOO_AUTH_FAILED_STATE) {
    if (c->state != ZKL_CLOSED && c->state != ZKL_NO_CHROOT &&
        c->state != ZKL_TLS_FAILED)
      c->state = state == ZOO_EXPIRED_SESSION_STATE ? ZKL_EXPIRED
                                                    : ZKL_AUTH_FAILED;
    session_over(c);
  }
}

/* Returns 0 when nobody need look again (our own release). */
static int session_node_event(zkl_client *c, int type, const char *path) {
  zkl_task *t, *next;
  int about = ZKL_ABOUT_NONE;
  c->n_watch_events++;
  SESSION_EACH(c, t, next) {
    int a = t->cls->on_watch ? t->cls->on_watch(t, type, path)
                             : ZKL_ABOUT_NONE;
    if (a > about) about = a;
  }
  /* (one session gets one event per path: when our own node is also
   * the one a waiter of ours watched, it counts as that wake-up) */
  if (about == ZKL_ABOUT_OWN || about == ZKL_ABOUT_OWN_QUIET)
    c->n_own_events++;
  return about != ZKL_ABOUT_OWN_QUIET;
}

void session_watcher(zhandle_t *zh, int type, int state, const char *path,
                     void *ctx) {
  zkl_client *c = ctx;
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
    session_event(c, zh, state);
  } else if (path != NULL && !session_node_event(c, type, path)) {
    pthread_mutex_unlock(&c->mu);
    return;
  }
  zkl_client_changed(c);
  pthread_mutex_unlock(&c->mu);
}

/* The library resolves the connect string again every time its IO thread
 * polls: a getaddrinfo (with a netlink round trip) per wake-up, and a
 * glibc lock held at random moments, so that a process forking then (nginx
 * making its workers) hands the child a getaddrinfo that never returns.
 * Resolve on connection loss only. */
void session_no_routine_dns(zhandle_t *zh) {
  zoo_set_servers_resolution_delay(zh, -1);
}

/* Requests the library still owed us once zookeeper_close returned (it may
 * drop them) are finished here as ZCLOSING, so every owner lets go. */
void session_drain(zkl_client *c) {
  while (c->reqs) {
    zkl_req *r = c->reqs;
    if (r->t && r->t->cls->on_closing) r->t->cls->on_closing(r->t, r);
    zkl_req_done(r);
  }
  c->probe_out = 0;
  c->chroot_out = 0;
  c->cfg_out = c->cfg_again = 0;
}

/* ---- the timer thread --------------------------------------------------- */

static void session_probe_cb(int rc, const struct Stat *st,
                             const void *data) {
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
static void session_probe(zkl_client *c, double now) {
  zkl_req *r = zkl_req_new(c, NULL, (int)c->n_sessions, -1);
  c->probe_at = now;
  if (!r) return;
  if (zoo_aexists(c->zh, "/", 0, session_probe_cb, r) != ZOK) zkl_req_done(r);
  else c->probe_out = 1;
}

/* Close the session's handle (timer thread, mu held on entry and return,
 * dropped meanwhile): its watcher ignores it from now on (old_zh), and
 * what it still owed us is finished (session_drain). */
static void session_shut(zkl_client *c) {
  zhandle_t *old = c->zh;
  c->zh = NULL;
  c->old_zh = old;
  pthread_mutex_unlock(&c->mu);
  if (old) zookeeper_close(old); /* not a ZooKeeper thread: allowed */
  pthread_mutex_lock(&c->mu);
  c->old_zh = NULL; /* gone: its address may come back */
  session_drain(c);
}

/* After an expiry: close the dead handle and open a new session (timer
 * thread, mu held on entry and return).  0 when none could be opened. */
static int session_renew(zkl_client *c) {
  zhandle_t *zh = NULL;
  c->renewing = 1; /* (the new session's watcher waits for its handle) */
  session_shut(c);
  if (!c->closing && !c->timer_stop) {
    /* without the mutex: name resolution may take long */
    pthread_mutex_unlock(&c->mu);
    zh = zkl_secure_init(c->secure, follow_connect_string(c),
                         session_watcher,
                         c->timeout_req, c);
    pthread_mutex_lock(&c->mu);
  }
  c->renewing = 0;
  pthread_cond_broadcast(&c->cv); /* its watcher may wait for c->zh */
  if (!zh) return 0;
  session_no_routine_dns(zh);
  c->zh = zh; /* (closed by zkl_client_close if that began meanwhile) */
  c->state = ZKL_CONNECTING;
  c->session_id = 0;
  c->n_sessions++;
  c->chroot_ok = 0; /* (looked for again: the session is another) */
  c->renewed = 1; /* its first connection is "renewed" */
  if (c->auth_scheme)
    zoo_add_auth(c->zh, c->auth_scheme, c->auth_cred, c->auth_len, NULL,
                 NULL);
  c->ready_all = 1;
  zkl_client_changed(c);
  return 1;
}

/* The first connection is a second late: one handshake of our own with
 * each server says whether TLS is why (probe.c).  A TLS client then
 * fails for good, with that reason, and its handle is closed (it would
 * try for ever).  A plaintext client is only told (c->hint, for
 * zklock.connect's timeout message): a server may take both on one port
 * (client.portUnification), and would answer it in the end.  Timer
 * thread, mu held on entry and return. */
#define DIAGNOSE_GAP_MAX 8.0 /* s: between diagnoses without a verdict */
#define SASL_LOOK 0.25     /* s: how often a SASL client's state is read */
static void session_diagnose(zkl_client *c) {
  char why[512];
  int verdict;
  pthread_mutex_unlock(&c->mu);
  verdict = zkl_secure_probe(c->secure, follow_connect_string(c), why,
                             sizeof why);
  pthread_mutex_lock(&c->mu);
  /* again later while no verdict ends it (a server starting; a machine so
   * slow that a handshake outlasted its bound: valgrind) */
  c->diagnose_at = zkl_bootnow() + c->diagnose_gap;
  if (c->diagnose_gap < DIAGNOSE_GAP_MAX) c->diagnose_gap *= 2;
  if (!verdict || c->state != ZKL_CONNECTING || c->connected_once ||
      c->closing || c->renewing || !c->zh)
    return;
  if (verdict == ZKL_PROBE_REFUSED || !c->secure || !c->secure->tls) {
    free(c->hint);
    c->hint = strdup(why);
    c->hint_code = verdict == ZKL_PROBE_REFUSED ? ZKL_ECONNECTION_LOSS
                                                : ZKL_ETLS;
    return;
  }
  free(c->tls_why);
  c->tls_why = strdup(why);
  c->state = ZKL_TLS_FAILED;
  session_over(c);
  session_shut(c);
  c->ready_all = 1;
  zkl_client_changed(c);
}

/* Holds are lost once the server may have expired the session (heard +
 * timeout); while any is held, a probe every third of the timeout keeps
 * `heard` fresh (the library's own pings are invisible to us). */
void *session_timer(void *arg) {
  zkl_client *c = arg;
  pthread_mutex_lock(&c->mu);
  while (!c->timer_stop) {
    /* reckoned on the boot clock (it runs on during a suspend, as the
     * server's does); slept on the monotonic one (the condvar's) */
    double now = zkl_bootnow(), t = c->timeout_ms / 1000.0, next = now + 3600;
    double expiry = zkl_client_expiry(c);
    int any = 0;
    zkl_task *k, *kn;
    struct timespec ts;
    if (c->cfg_pending && !c->closing) { /* the ensemble moved */
      follow_apply(c);
      continue;
    }
    if (c->state == ZKL_EXPIRED && c->renew && !c->closing) {
      if (session_renew(c)) continue;
      if (c->timer_stop) break;
      next = now + 1; /* try again */
    }
    /* a SASL login the server refused: the C client stops (its state
     * says AUTH_FAILED) but calls no watcher */
    if (c->state == ZKL_CONNECTING && c->zh && !c->closing && c->secure &&
        c->secure->mechanism) {
      if (zoo_state(c->zh) == ZOO_AUTH_FAILED_STATE) {
        session_event(c, c->zh, ZOO_AUTH_FAILED_STATE);
        zkl_client_changed(c);
        continue;
      }
      if (now + SASL_LOOK < next) next = now + SASL_LOOK;
    }
    if (c->state == ZKL_CONNECTING && !c->connected_once &&
        !c->closing && c->zh) {
      double due = c->diagnose_at;
      if (now >= due) {
        session_diagnose(c);
        continue;
      }
      if (due < next) next = due;
    }
    SESSION_EACH(c, k, kn)
      if (k->cls->check_lost)
        any |= k->cls->check_lost(k, now, expiry, &next);
    /* suspended for a whole session timeout: the server may have expired
     * us; Curator says "lost" then, and so do we (once per trouble) */
    if (c->state == ZKL_CONNECTING && c->connected_once &&
        !c->lost_noticed && c->want_state && !c->closing) {
      double lost_at = c->suspended_at + t;
      if (now >= lost_at) {
        session_notice(c, "lost");
        c->lost_noticed = 1;
        c->ready_all = 1;
        zkl_client_changed(c);
      } else if (lost_at < next) {
        next = lost_at;
      }
    }
    /* an event loop's deadline (zk:fd(), zkl_client_wake_by) */
    if (c->wake_by > 0) {
      double left = c->wake_by - zkl_now();
      if (left <= 0) {
        c->wake_by = 0;
        zkl_client_changed(c);
      } else if (now + left < next) {
        next = now + left;
      }
    }
    c->timer_idle = !any; /* a new hold must wake it (zkl_client_kick) */
    if (any) {
      if (expiry < next) next = expiry;
      /* a hold begun while it sleeps sends its deferred self watch
       * self_delay after it began (src/core/lock/machine.c): it looks at
       * least that often while holds are on, and no hold wakes it */
      if (c->self_delay > 0 && now + c->self_delay < next)
        next = now + c->self_delay;
      if (c->state == ZKL_CONNECTED && c->zh && !c->closing &&
          !c->probe_out) {
        double due = c->probe_at + t / 3;
        if (now >= due) { session_probe(c, now); due = now + t / 3; }
        if (due < next) next = due;
      }
    }
    ts = zkl_abstime(zkl_now() + (next > now ? next - now : 0));
    pthread_cond_timedwait(&c->tcv, &c->mu, &ts);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}
