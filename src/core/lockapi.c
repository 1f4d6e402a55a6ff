/* A lock attempt as the Lua thread drives it: made, started, polled,
 * released, dropped.  Each call takes the client's mutex; the state
 * machine itself is lock.c's. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock.h"

zkl_lock *zkl_lock_new(zkl_client *c, const char *path, int kind,
                       int max_leases, const char *data, int datalen,
                       const char *ignore, zkl_error *err) {
  zkl_lock *l = calloc(1, sizeof *l);
  char name[80];
  if (!l) {
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return NULL;
  }
  if (!zkl_uuid(l->uuid)) {
    free(l);
    zkl_seterr(err, ZKL_EZK_ERROR, "no random bytes for a node name "
               "(getrandom and /dev/urandom both failed)");
    return NULL;
  }
  if (!zkl_task_init(&l->t, &zkl_lock_class, c, path, err)) {
    free(l);
    return NULL;
  }
  l->revoke_version = -1;
  l->self_armed = -1;
  l->kind = kind;
  l->max_leases = max_leases < 1 ? 1 : max_leases;
  l->state = L_IDLE;
  snprintf(name, sizeof name, "_c_%s%s", l->uuid, zkl_kind_marker(kind));
  l->prefix = zkl_join(path, name);
  l->datalen = datalen;
  l->data = malloc(datalen > 0 ? (size_t)datalen : 1);
  l->ignore = ignore ? strdup(ignore) : NULL;
  if (!l->prefix || !l->data || (ignore && !l->ignore)) {
    free(l->t.path); free(l->prefix); free(l->data); free(l->ignore);
    free(l);
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return NULL;
  }
  if (datalen > 0) memcpy(l->data, data, (size_t)datalen);
  pthread_mutex_lock(&c->mu);
  zkl_task_link(&l->t);
  pthread_mutex_unlock(&c->mu);
  return l;
}

zkl_client *zkl_lock_client(const zkl_lock *l) { return l->t.c; }

const char *zkl_lock_path(const zkl_lock *l) { return l->t.path; }

void zkl_lock_revocable(zkl_lock *l) {
  pthread_mutex_lock(&l->t.c->mu);
  if (!l->revocable) {
    l->revocable = 1;
    if (l->state == L_HELD) lock_watch_self(l); /* read the data now */
  }
  pthread_mutex_unlock(&l->t.c->mu);
}

void zkl_lock_notify_held(zkl_lock *l) {
  pthread_mutex_lock(&l->t.c->mu);
  l->notify_held = 1;
  pthread_mutex_unlock(&l->t.c->mu);
}

void zkl_lock_max_hold(zkl_lock *l, double seconds) {
  pthread_mutex_lock(&l->t.c->mu);
  l->max_hold = seconds > 0 ? seconds : 0;
  pthread_mutex_unlock(&l->t.c->mu);
}

int zkl_lock_start(zkl_lock *l, zkl_error *err) {
  zkl_client *c = l->t.c;
  int ok;
  pthread_mutex_lock(&c->mu);
  ok = zkl_client_usable(c, err);
  if (ok) {
    if (l->state != L_IDLE) {
      zkl_seterr(err, ZKL_EZK_ERROR, "lock attempt already started");
      ok = 0;
    } else {
      lock_create(l);
    }
  }
  pthread_mutex_unlock(&c->mu);
  return ok;
}

/* Held, as far as this process can know: our node exists in our session,
 * and the session cannot have expired on the server yet.  The client notices
 * a silent server after 2/3 of the session timeout, so once disconnected the
 * server may expire us 1/3 of the timeout later: past that we answer false.
 * Reconnecting in the same session proves the node never went away, and the
 * answer is true again; expiry makes it false for good (l->lost). */
int lock_margin_ok(zkl_lock *l) {
  zkl_client *c = l->t.c;
  if (c->state != ZKL_CONNECTED && c->state != ZKL_CONNECTING) return 0;
  return zkl_bootnow() < zkl_client_expiry(c) - zkl_client_margin(c);
}

static int lock_held_now(zkl_lock *l) {
  if (l->state != L_HELD || l->lost) return 0;
  if (l->hold_until > 0 && zkl_bootnow() >= l->hold_until)
    return 0; /* max_hold */
  return lock_margin_ok(l);
}

int zkl_lock_poll(zkl_lock *l, unsigned long *gen, zkl_error *err) {
  int st;
  pthread_mutex_lock(&l->t.c->mu);
  if (gen) *gen = l->t.c->gen;
  switch (l->state) {
  case L_HELD: st = l->g && l->g->rpending ? ZKL_PENDING : ZKL_HELD; break;
  case L_DONE: case L_LINGER: st = ZKL_DONE; break;
  case L_WATCHING: st = ZKL_WAITING; break;
  case L_FAILED: st = ZKL_FAILED;
    if (err) *err = l->t.err;
    break;
  default: st = ZKL_PENDING; break;
  }
  pthread_mutex_unlock(&l->t.c->mu);
  return st;
}

int zkl_lock_held(zkl_lock *l) {
  int held;
  pthread_mutex_lock(&l->t.c->mu);
  held = lock_held_now(l);
  pthread_mutex_unlock(&l->t.c->mu);
  return held;
}

int zkl_lock_info(zkl_lock *l, char *node, size_t size, int64_t *czxid) {
  int has;
  pthread_mutex_lock(&l->t.c->mu);
  has = l->node != NULL;
  if (has) snprintf(node, size, "%s", l->node);
  *czxid = l->czxid;
  pthread_mutex_unlock(&l->t.c->mu);
  return has;
}

unsigned long zkl_lock_set_wake(zkl_lock *l, unsigned id) {
  return zkl_task_set_wake(&l->t, id);
}

void zkl_lock_release(zkl_lock *l) {
  pthread_mutex_lock(&l->t.c->mu);
  lock_release_locked(l);
  pthread_mutex_unlock(&l->t.c->mu);
}

void zkl_lock_drop(zkl_lock *l) {
  zkl_client *c = l->t.c;
  pthread_mutex_lock(&c->mu);
  lock_release_locked(l);
  zkl_task_unref(&l->t);
  pthread_mutex_unlock(&c->mu);
  zkl_client_unref(c);
}

/* ---- the guarded node (docs/design.md, section 4.12) -------------------- */

static lock_guard *lock_guard_of(zkl_lock *l) {
  if (!l->g) {
    l->g = calloc(1, sizeof *l->g);
    if (l->g) l->g->rflight = -1;
  }
  return l->g;
}

int zkl_lock_read_with(zkl_lock *l, const char *path, zkl_error *err) {
  lock_guard *g;
  int ok = 0;
  pthread_mutex_lock(&l->t.c->mu);
  if (l->state != L_IDLE) {
    zkl_seterr(err, ZKL_EZK_ERROR, "lock attempt already started");
  } else if (l->kind == ZKL_KIND_LEASE) {
    zkl_seterr(err, ZKL_EZK_ERROR, "a lease reads nothing with its acquire");
  } else if (!(g = lock_guard_of(l)) || !(free(g->rpath), g->rpath =
                                              strdup(path))) {
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
  } else {
    ok = 1;
  }
  pthread_mutex_unlock(&l->t.c->mu);
  return ok;
}

int zkl_lock_read_result(zkl_lock *l, char *buf, int *len,
                         int64_t *version, zkl_error *err) {
  int found = 0, cap = *len;
  *len = 0;
  pthread_mutex_lock(&l->t.c->mu);
  if (!l->g || !l->g->rpath || l->g->rpending || l->state != L_HELD) {
    zkl_seterr(err, ZKL_EZK_ERROR, "no guarded read to report");
    found = -1;
  } else if (l->g->rrc == ZOK) {
    found = 1;
    *len = l->g->rlen;
    if (buf && cap >= l->g->rlen && l->g->rlen > 0)
      memcpy(buf, l->g->rdata, (size_t)l->g->rlen);
    *version = l->g->rstat.version;
  } else if (l->g->rrc != ZNONODE) {
    zkl_seterr_rc(err, l->g->rrc, l->g->rpath);
    found = -1;
  }
  pthread_mutex_unlock(&l->t.c->mu);
  return found;
}

int zkl_lock_release_write(zkl_lock *l, const char *path, const char *data,
                           int len, zkl_error *err) {
  lock_guard *g;
  int ok = 0;
  pthread_mutex_lock(&l->t.c->mu);
  if (l->state != L_HELD || !lock_held_now(l) || !l->node) {
    zkl_seterr(err, ZKL_ELOCK_LOST, "lock lost: not written");
  } else if (!(g = lock_guard_of(l)) ||
             !(free(g->wpath), g->wpath = strdup(path)) ||
             !(free(g->wdata), g->wdata = malloc(len > 0 ? (size_t)len : 1))) {
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
  } else {
    if (len > 0) memcpy(g->wdata, data, (size_t)len);
    g->wlen = len;
    g->wcreate = g->wmaybe = g->wdone = g->wsent = 0;
    l->abandon = 1;
    lock_write(l);
    if (l->state != L_DONE && l->state != L_FAILED) zkl_task_keep(&l->t);
    ok = 1;
  }
  pthread_mutex_unlock(&l->t.c->mu);
  return ok;
}

int zkl_lock_write_result(zkl_lock *l, int64_t *version, int64_t *zxid,
                          zkl_error *err) {
  int ok = 0;
  pthread_mutex_lock(&l->t.c->mu);
  if (!l->g || !l->g->wpath) {
    zkl_seterr(err, ZKL_EZK_ERROR, "no write with the release");
  } else if (l->g->wdone && l->g->wrc == ZOK) {
    *version = l->g->wversion;
    *zxid = l->g->wzxid;
    ok = 1;
  } else if (l->g->wmaybe || (!l->g->wdone && l->g->wsent)) {
    zkl_seterr(err, ZKL_ECONNECTION_LOSS, "write of %s with the release: "
               "the connection was cut with it in flight, and it could not "
               "be confirmed since: it may have been applied", l->g->wpath);
  } else if (!l->g->wdone || l->g->wrc == ZNONODE ||
             l->g->wrc == ZSESSIONEXPIRED) {
    zkl_seterr(err, ZKL_ELOCK_LOST, "lock lost: %s not written",
               l->g->wpath);
  } else {
    zkl_seterr_rc(err, l->g->wrc, l->g->wpath);
  }
  pthread_mutex_unlock(&l->t.c->mu);
  return ok;
}

/* ---- lock caching (docs/design.md, section 4.13) ------------------------ */

int zkl_lock_linger(zkl_lock *l, double seconds) {
  int kept = 0;
  pthread_mutex_lock(&l->t.c->mu);
  if (l->kind != ZKL_KIND_LEASE && seconds > 0 && !l->contended &&
      lock_held_now(l) && l->node && !(l->g && l->g->wpath)) {
    l->state = L_LINGER;
    l->linger_until = zkl_bootnow() + seconds;
    l->hold_until = 0;
    l->abandon = 1; /* nobody awaits it now */
    if (!l->lingers) lock_contenders(l);
    if (l->state == L_LINGER) { /* (a refused watch gave it up at once) */
      zkl_task_keep(&l->t); /* it outlives its Lua box if it must */
      zkl_client_rearm(l->t.c);
      kept = 1;
    }
  } else {
    lock_release_locked(l);
  }
  pthread_mutex_unlock(&l->t.c->mu);
  return kept;
}

int zkl_lock_relock(zkl_lock *l, double max_hold) {
  int ok = 0;
  pthread_mutex_lock(&l->t.c->mu);
  if (l->state == L_LINGER && !l->contended && lock_margin_ok(l)) {
    l->state = L_HELD;
    l->linger_until = 0;
    l->abandon = 0;
    l->lost = 0;
    l->max_hold = max_hold > 0 ? max_hold : 0;
    if (l->max_hold > 0) {
      l->hold_until = zkl_bootnow() + l->max_hold;
      zkl_client_rearm(l->t.c);
    }
    zkl_client_kick(l->t.c);
    ok = 1;
  } else if (l->state == L_LINGER) {
    lock_release_locked(l); /* not reusable: it goes now */
  }
  pthread_mutex_unlock(&l->t.c->mu);
  return ok;
}
