/* The client's life on the Lua thread: made (its first session opened,
 * the timer thread started), given credentials, closed, freed, and what
 * Lua may read of it.  The session's threads are session.c's. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session.h"

/* ---- the client's life (Lua thread) ------------------------------------- */

/* What a lock or write that found no parent of its node says (task.c). */
static char *client_chroot_note(const char *chroot) {
  static const char fmt[] = "(the chroot %s of the connect string must "
                            "exist)";
  size_t n = sizeof fmt + strlen(chroot);
  char *s = malloc(n);
  if (s) snprintf(s, n, fmt, chroot);
  return s;
}

zkl_client *zkl_client_new(const char *hosts, int timeout_ms,
                           struct ACL_vector *acl, int renew, int max_data,
                           const zkl_secure_opts *sec, zkl_error *err) {
  zkl_client *c;
  zkl_secure *secure = NULL;
  pthread_condattr_t ca;
  if (sec && (!(secure = zkl_secure_new(sec, err)) ||
              !zkl_secure_check(secure, err))) {
    zkl_secure_free(secure);
    zkl_acl_free(acl);
    return NULL;
  }
  c = calloc(1, sizeof *c);
  if (c) c->secure = secure;
  else zkl_secure_free(secure);
  if (!c || !(c->hosts = strdup(hosts)) ||
      ((c->chroot = zkl_hosts_chroot(c->hosts)) &&
       !(c->chroot_note = client_chroot_note(c->chroot)))) {
    if (c) { free(c->hosts); zkl_secure_free(c->secure); }
    free(c);
    zkl_acl_free(acl);
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return NULL;
  }
  c->acl = *acl; /* ours from now on */
  acl->data = NULL;
  acl->count = 0;
  c->max_data = max_data;
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
  c->follow = ZKL_FOLLOW_DEFAULT; /* (connect's follow_ensemble) */
  c->self_delay = ZKL_SELF_DELAY;
  c->pid = zkl_pid();
  c->wake_fd = c->wake_listen = -1;
  /* Hold the mutex so the watcher, which may fire before zookeeper_init
   * returns, sees c->zh set. */
  pthread_mutex_lock(&c->mu);
  errno = 0;
  c->diagnose_at = zkl_bootnow() + DIAGNOSE_AFTER;
  c->diagnose_gap = DIAGNOSE_AFTER * 2;
  c->zh = zkl_secure_init(c->secure, hosts, session_watcher, timeout_ms, c);
  if (!c->zh) {
    int e = errno;
    pthread_mutex_unlock(&c->mu);
    /* the connect string's form was checked before (paths.c): what the C
     * client still refuses is a name it could not resolve (getaddrinfo's
     * EAI_NONAME is its ENOENT, the other failures its EINVAL) */
    if (e == ENOENT || e == EINVAL)
      zkl_seterr(err, ZKL_EUNKNOWN_HOST, "cannot resolve the servers of "
                 "'%s': %s", hosts, e == ENOENT ? "a host name is unknown"
                 : "name resolution failed");
    else
      zkl_seterr(err, ZKL_ECONNECTION_LOSS, "cannot open a session to "
                 "'%s': %s", hosts, e ? strerror(e) : "unknown error");
    pthread_cond_destroy(&c->cv);
    pthread_cond_destroy(&c->tcv);
    pthread_mutex_destroy(&c->mu);
    zkl_acl_free(&c->acl);
    free(c->hosts);
    free(c->chroot_note);
    zkl_secure_free(c->secure);
    free(c);
    return NULL;
  }
  session_no_routine_dns(c->zh);
  { /* the timer takes no signals: they are the process's (nginx...) */
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    c->timer_on = pthread_create(&c->timer, NULL, session_timer, c) == 0;
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

int zkl_client_forked(const zkl_client *c) { return c->pid != zkl_pid(); }

#define CLOSE_GRACE 2.0 /* s: for the requests in flight at close */

void zkl_client_close(zkl_client *c) {
  zhandle_t *zh;
  zkl_task *t, *next;
  pthread_mutex_lock(&c->mu);
  if (c->closing) {
    pthread_mutex_unlock(&c->mu);
    return;
  }
  /* last requests of the tasks, while they may still be sent (a TTL
   * node's delete), answered within the grace below */
  if (c->zh && c->state == ZKL_CONNECTED && !zkl_client_forked(c))
    SESSION_EACH(c, t, next)
      if (t->cls->on_close) t->cls->on_close(t);
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
  /* zookeeper_close drops the requests still unanswered (their completions
   * are queued for a completion thread it has already stopped: leaked, and
   * never called back).  A connected server answers within a round trip:
   * give them that, bounded (a release's delete is among them). */
  if (zh && c->state == ZKL_CONNECTED && !zkl_client_forked(c)) {
    double until = zkl_now() + CLOSE_GRACE;
    while (c->reqs && zkl_now() < until) {
      struct timespec ts = zkl_abstime(until);
      pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
  }
  pthread_mutex_unlock(&c->mu);
  if (zh && !zkl_client_forked(c)) zookeeper_close(zh);
  pthread_mutex_lock(&c->mu);
  c->zh = NULL;
  c->state = ZKL_CLOSED;
  session_drain(c);
  /* and those waiting for a reconnect, with no request out */
  SESSION_EACH(c, t, next)
    if (t->cls->on_closed) t->cls->on_closed(t);
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
  zkl_notify_free(c);
  free(c->hosts); free(c->chroot_note);
  free(c->followed); free(c->cfg_pending);
  free(c->auth_scheme); free(c->auth_cred);
  zkl_secure_free(c->secure); /* (its callbacks outlived the handle) */
  free(c->tls_why);
  free(c->hint);
  zkl_acl_free(&c->acl);
  pthread_cond_destroy(&c->tcv);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* ---- what Lua may read (Lua thread) ------------------------------------- */

pid_t zkl_client_pid(const zkl_client *c) { return c->pid; }

void zkl_client_want_state(zkl_client *c, int on) {
  pthread_mutex_lock(&c->mu);
  c->want_state = on;
  pthread_cond_signal(&c->tcv); /* (the timer may have to watch for lost) */
  pthread_mutex_unlock(&c->mu);
}

void zkl_client_self_delay(zkl_client *c, double seconds) {
  pthread_mutex_lock(&c->mu);
  c->self_delay = seconds > 0 ? seconds : 0;
  pthread_mutex_unlock(&c->mu);
}

int zkl_client_max_data(const zkl_client *c) { return c->max_data; }

const char *zkl_client_chroot(const zkl_client *c) { return c->chroot; }

int zkl_client_state(zkl_client *c, unsigned long *gen) {
  int st;
  pthread_mutex_lock(&c->mu);
  st = c->state;
  if (gen) *gen = c->gen;
  pthread_mutex_unlock(&c->mu);
  return st;
}

int64_t zkl_client_session_id(zkl_client *c) {
  int64_t id;
  pthread_mutex_lock(&c->mu);
  id = c->session_id;
  pthread_mutex_unlock(&c->mu);
  return id;
}

int zkl_client_failure(zkl_client *c, zkl_error *err) {
  int failed;
  pthread_mutex_lock(&c->mu);
  failed = !zkl_client_usable(c, err);
  pthread_mutex_unlock(&c->mu);
  return failed;
}

int zkl_client_hint(zkl_client *c, zkl_error *err) {
  int any;
  pthread_mutex_lock(&c->mu);
  any = c->hint != NULL;
  if (any) zkl_seterr(err, c->hint_code, "%s", c->hint);
  pthread_mutex_unlock(&c->mu);
  return any;
}

int zkl_client_timeout_ms(zkl_client *c) {
  int ms;
  pthread_mutex_lock(&c->mu);
  ms = c->timeout_ms;
  pthread_mutex_unlock(&c->mu);
  return ms;
}

void zkl_client_stats(zkl_client *c, zkl_stats *out) {
  pthread_mutex_lock(&c->mu);
  out->sessions = c->n_sessions;
  out->lost = c->n_lost;
  out->watch_events = c->n_watch_events;
  out->own_events = c->n_own_events;
  out->requests = c->n_requests;
  out->since_heard = c->heard > 0 ? zkl_bootnow() - c->heard : -1;
  pthread_mutex_unlock(&c->mu);
}
