/* A lock attempt as the Lua thread drives it: made, started, polled,
 * released, dropped.  Each call takes the client's mutex; the state
 * machine itself is machine.c's. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attempt.h"

zkl_attempt *zkl_attempt_new(zkl_client *c, const char *path, int kind,
                             int max_leases, const char *data, int datalen,
                             const char *ignore, zkl_error *err) {
  zkl_attempt *l = calloc(1, sizeof *l);
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
  if (!zkl_task_init(&l->t, &zkl_attempt_class, c, path, err)) {
    free(l);
    return NULL;
  }
  l->revoke_version = -1;
  l->self_armed = -1;
  l->ahead = -1;
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
  l->serial = ++c->n_attempts;
  zkl_task_link(&l->t);
  pthread_mutex_unlock(&c->mu);
  return l;
}

zkl_client *zkl_attempt_client(const zkl_attempt *l) { return l->t.c; }

/* (set once, before Lua sees the attempt: no mutex) */
unsigned long zkl_attempt_serial(const zkl_attempt *l) { return l->serial; }

const char *zkl_attempt_path(const zkl_attempt *l) { return l->t.path; }

void zkl_attempt_revocable(zkl_attempt *l) {
  pthread_mutex_lock(&l->t.c->mu);
  if (!l->revocable) {
    l->revocable = 1;
    if (l->state == L_HELD) lock_watch_self(l); /* read the data now */
  }
  pthread_mutex_unlock(&l->t.c->mu);
}

void zkl_attempt_rest_on(zkl_attempt *l, zkl_attempt *w) {
  pthread_mutex_lock(&l->t.c->mu);
  if (w) { w->t.refs++; w->resting++; } /* (before the old one goes: it
                                          * may be w) */
  if (l->over) { l->over->resting--; zkl_task_unref(&l->over->t); }
  l->over = w;
  pthread_mutex_unlock(&l->t.c->mu);
}

void zkl_attempt_notify_held(zkl_attempt *l) {
  pthread_mutex_lock(&l->t.c->mu);
  l->notify_held = 1;
  pthread_mutex_unlock(&l->t.c->mu);
}

void zkl_attempt_max_hold(zkl_attempt *l, double seconds) {
  pthread_mutex_lock(&l->t.c->mu);
  hold_limit(l, seconds, seconds);
  pthread_mutex_unlock(&l->t.c->mu);
}

/* Only a hold believed now is extended, and the timer thread's end of it
 * takes this mutex too: whichever comes first wins, and an ended hold
 * stays ended (docs/design.md, section 9.6). */
int zkl_attempt_extend(zkl_attempt *l, double seconds) {
  int held;
  pthread_mutex_lock(&l->t.c->mu);
  held = seconds > 0 && lock_held_now(l);
  if (held) hold_limit(l, l->max_hold, seconds);
  pthread_mutex_unlock(&l->t.c->mu);
  return held;
}

/* A TTL node's uuid, made of the participant id (our data) and a slot:
 * the same id finds its nodes again after a restart (docs/design.md,
 * section 4.15).  Two FNV-1a hashes of both, printed as a uuid (version
 * 8: made, not drawn). */
static void attempt_id_uuid(const char *data, int len, int slot, char *out) {
  uint64_t h[2] = { 14695981039346656037ULL, 0x9ae16a3b2f90404fULL };
  unsigned char b[16];
  int i, k;
  for (k = 0; k < 2; k++) {
    for (i = 0; i < len + 4; i++) {
      unsigned char c = i < len ? (unsigned char)data[i]
                                : (unsigned char)(slot >> (8 * (i - len)));
      h[k] ^= c;
      h[k] *= 1099511628211ULL;
    }
    for (i = 0; i < 8; i++) b[k * 8 + i] = (unsigned char)(h[k] >> (8 * i));
  }
  zkl_uuid_format(b, 8, out);
}

int zkl_attempt_ttl(zkl_attempt *l, double seconds, int by_id,
                    zkl_error *err) {
  int ok = 1;
  if (!(seconds >= 0.001 && seconds < 1e9)) {
    zkl_seterr(err, ZKL_EZK_ERROR, "ttl must be a number of seconds > 0");
    return 0;
  }
  pthread_mutex_lock(&l->t.c->mu);
  if (l->state != L_IDLE || l->kind != ZKL_KIND_MUTEX) {
    zkl_seterr(err, ZKL_EZK_ERROR, "ttl: a mutex's attempt, before it "
               "starts");
    ok = 0;
  } else {
    l->ttl_ms = (int64_t)(seconds * 1000.0 + 0.5);
    if (l->ttl_ms < 1) l->ttl_ms = 1;
    l->ttl_by_id = by_id;
  }
  pthread_mutex_unlock(&l->t.c->mu);
  return ok;
}

/* Is `prefix` the node of another live attempt of this client (queued,
 * held, or going)? */
static int attempt_prefix_busy(zkl_attempt *l, const char *prefix) {
  zkl_task *t;
  for (t = l->t.c->tasks; t; t = t->next) {
    zkl_attempt *o;
    if (t == &l->t || t->cls != &zkl_attempt_class) continue;
    o = ATTEMPT(t);
    /* (a failed attempt may still have its node: busy until it goes) */
    if (o->ttl_ms > 0 && strcmp(o->prefix, prefix) == 0 &&
        ((o->state != L_IDLE && o->state != L_DONE &&
          o->state != L_FAILED) || o->node))
      return 1;
  }
  return 0;
}

/* A TTL attempt's node name: slot k is the client's k-th acquirer of this
 * lock with this id at once (the first free one), so that a process that
 * comes back finds its first acquirer's node as its first acquirer's. */
static int attempt_ttl_name(zkl_attempt *l) {
  char name[80], *prefix = NULL;
  int slot;
  for (slot = 0; slot < 1 << 20; slot++) {
    attempt_id_uuid(l->data, l->datalen, slot, l->uuid);
    snprintf(name, sizeof name, "_c_%s%s", l->uuid, zkl_kind_marker(l->kind));
    free(prefix);
    prefix = zkl_join(l->t.path, name);
    if (!prefix) return 0;
    if (!attempt_prefix_busy(l, prefix)) break;
  }
  free(l->prefix);
  l->prefix = prefix;
  return 1;
}

int zkl_attempt_start(zkl_attempt *l, zkl_error *err) {
  zkl_client *c = l->t.c;
  int ok;
  pthread_mutex_lock(&c->mu);
  ok = zkl_client_usable(c, err);
  if (ok) {
    if (l->state != L_IDLE) {
      zkl_seterr(err, ZKL_EZK_ERROR, "lock attempt already started");
      ok = 0;
    } else if (l->ttl_by_id && !attempt_ttl_name(l)) {
      zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
      ok = 0;
    } else if (l->ttl_by_id) {
      /* a node of ours may be there already (a restart): look first,
       * as for a create whose reply was lost (section 4.15) */
      l->state = L_RECOVER;
      lock_list(l);
    } else {
      lock_create(l);
    }
  }
  pthread_mutex_unlock(&c->mu);
  return ok;
}


int zkl_attempt_poll(zkl_attempt *l, unsigned long *gen, zkl_error *err) {
  int st;
  pthread_mutex_lock(&l->t.c->mu);
  if (gen) *gen = l->t.c->gen;
  switch (l->state) {
  case L_HELD: /* (told only once believed: its read, or its get, back) */
    st = (l->g && l->g->rpending) || l->confirming ? ZKL_PENDING : ZKL_HELD;
    break;
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

int zkl_attempt_held(zkl_attempt *l) {
  int held;
  pthread_mutex_lock(&l->t.c->mu);
  held = lock_held_now(l);
  pthread_mutex_unlock(&l->t.c->mu);
  return held;
}

int zkl_attempt_gone_first(zkl_attempt *l) {
  int gone;
  pthread_mutex_lock(&l->t.c->mu);
  gone = l->del_gone;
  pthread_mutex_unlock(&l->t.c->mu);
  return gone;
}

int zkl_attempt_overdue(zkl_attempt *l) {
  int over;
  pthread_mutex_lock(&l->t.c->mu);
  over = lock_overdue(l, zkl_bootnow());
  pthread_mutex_unlock(&l->t.c->mu);
  return over;
}

int zkl_attempt_info(zkl_attempt *l, char *node, size_t size, int64_t *czxid) {
  int has;
  pthread_mutex_lock(&l->t.c->mu);
  has = l->node != NULL;
  if (has) snprintf(node, size, "%s", l->node);
  *czxid = l->czxid;
  pthread_mutex_unlock(&l->t.c->mu);
  return has;
}

int zkl_attempt_ahead(zkl_attempt *l) {
  int ahead;
  pthread_mutex_lock(&l->t.c->mu);
  ahead = l->ahead;
  pthread_mutex_unlock(&l->t.c->mu);
  return ahead;
}

unsigned long zkl_attempt_set_wake(zkl_attempt *l, unsigned id) {
  return zkl_task_set_wake(&l->t, id);
}

void zkl_attempt_release(zkl_attempt *l) {
  pthread_mutex_lock(&l->t.c->mu);
  lock_release_locked(l);
  lock_end_resting(l);
  pthread_mutex_unlock(&l->t.c->mu);
}

void zkl_attempt_drop(zkl_attempt *l) {
  zkl_client *c = l->t.c;
  pthread_mutex_lock(&c->mu);
  lock_release_locked(l);
  lock_end_resting(l);
  zkl_task_unref(&l->t);
  pthread_mutex_unlock(&c->mu);
  zkl_client_unref(c);
}
