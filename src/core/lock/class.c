/* What the session tells a lock attempt: reconnected, expired, a watch
 * fired, a request dropped on close, closed, and (the timer thread) that
 * the server may no longer know the hold.  The class the session calls
 * the attempt through (zkl_attempt_class); the moves are machine.c's and
 * rehold.c's. */
#include <string.h>

#include "attempt.h"

/* ---- what the session tells us ------------------------------------------ */

static void lock_on_connected(zkl_task *t) {
  zkl_attempt *l = ATTEMPT(t);
  switch (l->state) {
  case L_PARENTS: if (l->t.redo) lock_parents(l); break;
  case L_CREATING: if (l->t.redo && !l->create_out) lock_create(l); break;
  case L_LISTING: case L_WATCHING:
    lock_watch_self(l); /* (the last one may have been cut unsent) */
    /* fall through */
  case L_RECOVER:
    /* watches survive a reconnect, but a fresh listing costs one request
     * and covers anything missed */
    lock_list(l);
    break;
  case L_DELETING:
    if (!l->t.redo) break;
    if (l->g && l->g->wpath && !l->g->wdone) guard_write(l); /* again */
    else lock_delete(l);
    break;
  case L_HELD:
    lock_watch_self(l); /* still there? (and revoked?) */
    if (l->g && l->g->rpending) guard_read(l); /* (it was cut) */
    if (l->lingers) rehold_watch(l); /* (anyone while we were away?) */
    break;
  case L_LINGER:
    lock_watch_self(l);
    rehold_watch(l);
    break;
  default: break;
  }
}

static void lock_on_expired(zkl_task *t) {
  zkl_attempt *l = ATTEMPT(t);
  if (l->state == L_IDLE || l->state == L_DONE || l->state == L_FAILED)
    return;
  if (l->state == L_HELD) lock_lost_event(l);
  l->create_out = 0;
  lock_finish(t, ZSESSIONEXPIRED, NULL);
}

static int lock_on_watch(zkl_task *t, int type, const char *path) {
  zkl_attempt *l = ATTEMPT(t);
  size_t n;
  if (zkl_task_watches(t, path) && l->lingers &&
      (l->state == L_LINGER || l->state == L_HELD)) {
    rehold_watch(l); /* the directory changed: who is there? */
    return ZKL_ABOUT_WAITED;
  }
  if (zkl_task_watches(t, path)) {
    /* deleted, or changed (which used the watch up): look again, or
     * hold at once when it was all that held us back */
    if (l->state == L_WATCHING && l->kind == ZKL_KIND_LEASE)
      lock_watch_dir(l); /* (its listing re-arms the watch) */
    else if (l->state == L_WATCHING && type == ZOO_DELETED_EVENT)
      lock_blocker_gone(l);
    else if (l->state == L_WATCHING)
      lock_list(l);
    return ZKL_ABOUT_WAITED;
  }
  /* our node: path == l->path + "/" + l->node */
  n = strlen(t->path);
  if (!l->node || strncmp(path, t->path, n) != 0 || path[n] != '/' ||
      strcmp(path + n + 1, l->node) != 0)
    return ZKL_ABOUT_NONE;
  if (l->state != L_HELD && l->state != L_LISTING &&
      l->state != L_WATCHING && l->state != L_LINGER)
    return ZKL_ABOUT_OWN_QUIET; /* (our own delete, or a reply says it) */
  if (type == ZOO_DELETED_EVENT) lock_node_gone(l);
  else if (type == ZOO_CHANGED_EVENT) {
    l->self_live = 0; /* (the event used the watch up) */
    lock_watch_self(l); /* read, re-arm */
  }
  return ZKL_ABOUT_OWN;
}

static void lock_on_closing(zkl_task *t, zkl_req *r) {
  zkl_attempt *l = ATTEMPT(t);
  if (r->kind == R_SELF || r->kind == R_RENEW)
    return; /* (tagged with self_gen, not epoch) */
  if (t->epoch == r->epoch && l->state != L_DONE && l->state != L_FAILED)
    lock_finish(t, ZCLOSING, NULL);
}

static void lock_on_closed(zkl_task *t) {
  zkl_attempt *l = ATTEMPT(t);
  if (l->state == L_DONE || l->state == L_FAILED || l->state == L_IDLE) {
    zkl_task_unkeep(t);
    return;
  }
  lock_finish(t, ZCLOSING, NULL);
}

/* The timer thread: the server may have expired us.  The hold is over,
 * whatever comes; if the session lives after all, our node must not
 * outlive our belief. */
static int lock_check_lost(zkl_task *t, double now, double deadline,
                           double *next) {
  zkl_attempt *l = ATTEMPT(t);
  int over = lock_overdue(l, now); /* max_hold */
  if (l->ttl_ms > 0 && (l->state == L_LISTING || l->state == L_WATCHING ||
                        l->state == L_HELD))
    lock_renew_due(l, now, next); /* (queued too: section 4.15) */
  if (l->state == L_LINGER) {
    /* its time is up, or the session may be gone: the node goes */
    if (now >= l->linger_until || now >= deadline) {
      lock_release_locked(l);
      return 0;
    }
    if (l->linger_until < *next) *next = l->linger_until;
    return 1; /* (probes keep "last heard" fresh for a reuse) */
  }
  if (l->state != L_HELD || l->lost) return 0;
  /* not handed out yet: its get (or renewal), in flight, either believes
   * it (and kicks us: lock_confirmed) or finds it gone; an expiry ends it
   * as any other */
  if (l->confirming) return 0;
  if (l->ttl_ms > 0) { /* the server may have expired the node by then */
    double gone = l->renewed + (double)l->ttl_ms / 1000.0;
    if (gone < deadline) deadline = gone;
  }
  if (now < deadline && !over) {
    if (l->hold_until > 0 && l->hold_until < *next) *next = l->hold_until;
    if (deadline < *next) *next = deadline;
    lock_self_due(l, now, next); /* (a hold taken with no wait) */
    return 1;
  }
  lock_lost(l); /* (Lua reports "lock_lost": held() is false) */
  return 0;
}

/* zk:close(): a TTL node outlives the session, so it is deleted now, as
 * a release would (docs/api.md, "Holds that outlive the process"). */
static void lock_on_close(zkl_task *t) {
  zkl_attempt *l = ATTEMPT(t);
  if (l->ttl_ms > 0 && l->node && l->state != L_DELETING &&
      l->state != L_DONE)
    lock_release_locked(l);
}

const zkl_task_class zkl_attempt_class = {
  "lock", lock_on_connected, lock_on_expired, lock_on_watch,
  lock_on_closing, lock_on_closed, lock_check_lost, lock_finish,
  lock_parents_made, lock_free, lock_on_close
};

