/* A node held again with no request: what lock caching and lock cohorts
 * share.  Both keep our node past the end of a hold and begin the next
 * hold on it without asking ZooKeeper:
 *  - lock caching (docs/design.md, section 4.13): a released hold lingers
 *    (L_LINGER), its node kept, and an acquire on the same object holds
 *    it again (relock), as long as nobody else showed up;
 *  - a lock cohort (section 16): a hold goes from one waiter of this
 *    client to the next (pass).
 * Each such hold gets its own time limit (hold_limit, node.c).  Both
 * watch the directory (rehold_watch): any node but ours (zklock, Curator,
 * kazoo alike) is a contender.  From then on a cached node is not reused
 * (deleted at once if lingering, at the end of the hold if held again),
 * and a cohort knows that a remote waiter queued, for its pass limit
 * (Lua counts the passes).
 *
 * The completion runs with the client's mutex held; the zkl_attempt_*
 * functions are the Lua thread's, and take it. */
#include <pthread.h>
#include <string.h>

#include "attempt.h"

/* The directory's children, with a watch: any node but ours is a
 * contender (zklock, Curator, kazoo alike), and from then on the node is
 * not reused: deleted now if lingering, at the end of the hold if held
 * again (docs/design.md, section 4.13). */
static void rehold_cb(int rc, const struct String_vector *sv,
                      const void *data) {
  zkl_req *r;
  zkl_attempt *l = ATTEMPT(zkl_task_enter(data, rc, &r));
  if (l && l->lingers && (l->state == L_LINGER || l->state == L_HELD)) {
    if (rc == ZOK && sv) {
      int i;
      l->listed = 1;
      l->listed_once = 1;
      for (i = 0; i < sv->count; i++)
        if (!l->node || strcmp(sv->data[i], l->node) != 0) l->contended = 1;
      if (l->contended && l->state == L_LINGER) lock_release_locked(l);
    } else if (!zkl_is_cut(rc)) {
      l->contended = 1; /* cannot watch: no reuse */
      if (l->state == L_LINGER) lock_release_locked(l);
    } /* cut: listed again on reconnect */
  }
  zkl_task_leave(r);
}

void rehold_watch(zkl_attempt *l) {
  zkl_req *r;
  int rc;
  if (!l->t.watch || strcmp(l->t.watch, l->t.path) != 0)
    zkl_task_set_watch(&l->t, strdup(l->t.path));
  l->lingers = 1;
  l->listed = 0; /* (until it answers, a contender may be unseen) */
  r = zkl_task_req(&l->t, R_CONTENDERS);
  rc = r ? zoo_aget_children(l->t.c->zh, l->t.path, 1, rehold_cb, r)
         : ZSYSTEMERROR;
  if (rc != ZOK) {
    if (r) zkl_req_done(r);
    if (!zkl_is_cut(rc)) { /* cannot watch: no caching */
      l->contended = 1;
      if (l->state == L_LINGER) lock_release_locked(l);
    }
  }
}

/* ---- the Lua thread's side ------------------------------------------- */

int zkl_attempt_linger(zkl_attempt *l, double seconds) {
  int kept = 0;
  pthread_mutex_lock(&l->t.c->mu);
  if (l->kind != ZKL_KIND_LEASE && seconds > 0 && !l->contended &&
      lock_held_now(l) && l->node && !(l->g && l->g->wpath)) {
    l->state = L_LINGER;
    l->linger_until = zkl_bootnow() + seconds;
    hold_limit(l, l->max_hold, 0); /* (lingering: no hold, no end) */
    l->abandon = 1; /* nobody awaits it now */
    /* a lingering node is watched (asked to revoke, deleted): its
     * deferred self watch goes now (machine.c) */
    if (l->self_gen != l->self_armed) lock_watch_self(l);
    if (!l->lingers) rehold_watch(l);
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

/* A hold of a lock that lingers watches its directory from the start, so
 * that a contender queued during it is known by the release (issue 22,
 * item 4: one seen only after the release would wait a whole extra hold). */
void zkl_attempt_watch_contenders(zkl_attempt *l) {
  pthread_mutex_lock(&l->t.c->mu);
  if (l->state == L_HELD && !l->lingers && l->kind != ZKL_KIND_LEASE)
    rehold_watch(l);
  pthread_mutex_unlock(&l->t.c->mu);
}

int zkl_attempt_relock(zkl_attempt *l, double max_hold, int may_wait) {
  int ok = 0;
  pthread_mutex_lock(&l->t.c->mu);
  /* reused only once a listing has shown nobody else: a reuse before the
   * first answer could jump a contender queued during the hold */
  if (l->state == L_LINGER && !l->contended && !l->listed && may_wait &&
      lock_margin_ok(l)) {
    ok = -1; /* ask again once it answers */
  } else if (l->state == L_LINGER && !l->contended && l->listed &&
      lock_margin_ok(l)) {
    l->state = L_HELD;
    l->confirming = 0;
    l->linger_until = 0;
    l->abandon = 0;
    l->lost = 0;
    hold_limit(l, max_hold, max_hold); /* its own, whatever the last one was
                                          extended to (section 9.6) */
    zkl_client_kick(l->t.c);
    ok = 1;
  } else if (l->state == L_LINGER) {
    lock_release_locked(l); /* not reusable: it goes now */
  }
  pthread_mutex_unlock(&l->t.c->mu);
  return ok;
}

/* Lock cohorts (docs/design.md, section 16): the hold goes to another
 * waiter of this client without a request; the contenders watch says
 * when a remote one queued, for the pass limit (Lua counts the passes). */
int zkl_attempt_pass(zkl_attempt *l, double max_hold) {
  int ok = 0;
  pthread_mutex_lock(&l->t.c->mu);
  if (l->state == L_HELD && !l->lost && l->node && lock_held_now(l)) {
    hold_limit(l, max_hold, max_hold); /* its own, whatever the last one was
                                          extended to (section 9.6) */
    ok = 1;
  }
  pthread_mutex_unlock(&l->t.c->mu);
  return ok;
}

/* A revocation read for our node (machine.c, lock_self_cb: revoke_version
 * is that data version; a new node resets it): the revoker wants the node
 * gone, so Lua passes it no more (docs/design.md, section 16), even when
 * the holder has not run its on_revoke yet. */
int zkl_attempt_revoke_asked(zkl_attempt *l) {
  int asked;
  pthread_mutex_lock(&l->t.c->mu);
  asked = l->node != NULL && l->revoke_version != -1;
  pthread_mutex_unlock(&l->t.c->mu);
  return asked;
}

int zkl_attempt_contenders(zkl_attempt *l, int *listed) {
  int contended;
  pthread_mutex_lock(&l->t.c->mu);
  contended = l->contended;
  *listed = !l->lingers ? -1 : l->listed ? 1 : l->listed_once ? 2 : 0;
  pthread_mutex_unlock(&l->t.c->mu);
  return contended;
}
