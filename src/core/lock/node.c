/* A lock attempt's own node, the bottom of src/core/lock/: its name and
 * path, the end of an attempt (finish, lost), giving the node back
 * (DELETING -> DONE), and whether a hold is still believed (the margin,
 * the hold's time limit and its one writer, hold_limit; docs/design.md,
 * sections 9.2 and 9.6).  Nothing here calls up into machine.c: the state
 * machine above moves, this file ends.
 *
 * Every function here runs with the client's mutex held. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attempt.h"

void lock_free(zkl_task *t) {
  zkl_attempt *l = ATTEMPT(t);
  if (l->over) { l->over->resting--; zkl_task_unref(&l->over->t); }
  free(l->prefix); free(l->data); free(l->ignore); free(l->node);
  if (l->g) {
    free(l->g->rpath); free(l->g->rdata); free(l->g->wpath);
    free(l->g->wdata); free(l->g);
  }
  free(l);
}

/* Our node becomes `name` (a copy is kept) or none: replies and events
 * about the previous one no longer apply (self_gen). */
void lock_set_node(zkl_attempt *l, const char *name) {
  free(l->node);
  l->node = name ? strdup(name) : NULL;
  l->self_gen++;
  l->self_live = 0;
  l->self_due = 0;
  l->revoke_version = -1;
  l->renew_out = 0; /* (a renewal in flight was about the last node) */
  l->renewed = 0;
  l->ttl_mtime = 0;
}

char *lock_nodepath(const zkl_attempt *l) {
  return l->node ? zkl_join(l->t.path, l->node) : NULL;
}

/* A hold ends without its owner's word: on_lost callbacks are queued. */
void lock_lost_event(zkl_attempt *l) {
  if (l->lost) return;
  l->lost = 1;
  if (l->node) {
    char *full = lock_nodepath(l);
    if (full) zkl_event_push(l->t.c, ZKL_EV_LOST, full, l->serial);
    free(full);
  }
  l->t.c->n_lost++;
}


/* The lock can no longer be had: finish as DONE when it was given up, as
 * FAILED with the error otherwise.  A dead session took our node along. */
void lock_finish(zkl_task *t, int rc, const char *what_) {
  zkl_attempt *l = ATTEMPT(t);
  char what[256]; /* what_ may be l->node or the watch, freed below */
  if (l->g && l->g->wparents && l->state == L_DELETING && l->node &&
      !zkl_is_gone(rc)) {
    /* the guarded node's parents could not be made: not written, and our
     * node still goes */
    l->g->wparents = 0;
    l->g->wdone = 1;
    l->g->wrc = rc;
    lock_delete(l);
    return;
  }
  snprintf(what, sizeof what, "%s", what_ ? what_ : "");
  if (zkl_is_gone(rc)) lock_set_node(l, NULL);
  if (l->state == L_HELD) l->lost = 1; /* (callers said why, or closed) */
  if (l->abandon) {
    l->state = L_DONE;
  } else {
    l->state = L_FAILED;
    zkl_task_seterr(t, rc, what_ ? what : NULL);
  }
  zkl_task_settle(t);
}

/* ---- giving our node back ----------------------------------------------- */

static void lock_delete_cb(int rc, const void *data) {
  zkl_req *r;
  zkl_attempt *l = ATTEMPT(zkl_task_enter(data, rc, &r));
  if (l && l->state == L_DELETING) {
    if (rc == ZOK || rc == ZNONODE || rc == ZSESSIONEXPIRED ||
        rc == ZCLOSING || rc == ZINVALIDSTATE) {
      /* (a delete sent again after a cut may find its first try's work) */
      if (rc == ZNONODE && !l->del_cut) l->del_gone = 1;
      lock_set_node(l, NULL);
      lock_finish(&l->t, ZOK, NULL);
    } else if (zkl_is_cut(rc)) {
      l->t.redo = 1;
      l->del_cut = 1;
    } else {
      lock_finish(&l->t, ZOK, NULL); /* e.g. no auth to delete: nothing more */
    }
  }
  zkl_task_leave(r);
}

void lock_delete(zkl_attempt *l) {
  zkl_req *r;
  char *full;
  int rc;
  if (!l->node) { lock_finish(&l->t, ZOK, NULL); return; }
  if (!zkl_client_usable(l->t.c, NULL)) {
    lock_finish(&l->t, ZOK, NULL); /* the node goes with the session */
    return;
  }
  zkl_task_move(&l->t);
  l->state = L_DELETING;
  zkl_task_set_watch(&l->t, NULL);
  full = lock_nodepath(l);
  r = full ? zkl_task_req(&l->t, R_DELETE) : NULL;
  rc = r ? zoo_adelete(l->t.c->zh, full, -1, lock_delete_cb, r)
         : ZSYSTEMERROR;
  free(full);
  if (rc != ZOK && !zkl_task_unsent(&l->t, r, rc))
    lock_finish(&l->t, ZOK, NULL); /* (cut: sent again on reconnect) */
}

/* ---- is the hold still believed? --------------------------------------- */

/* Held, as far as this process can know: our node exists in our session,
 * and the session cannot have expired on the server yet: "last heard"
 * plus the timeout, less a margin (docs/design.md, section 9.2).
 * Reconnecting in the same session proves the node never went away, and
 * the answer is true again; expiry makes it false for good (l->lost). */
int lock_margin_ok(zkl_attempt *l) {
  zkl_client *c = l->t.c;
  if (c->state != ZKL_CONNECTED && c->state != ZKL_CONNECTING) return 0;
  return zkl_bootnow() < zkl_client_expiry(c) - zkl_client_margin(c);
}

/* A TTL node's own bound (docs/design.md, section 4.15): the server
 * deletes it once ttl_ms passed with no change, reckoned on its clock
 * from the last change it applied, which is after our renewal was sent;
 * less the same margin as a session's (its clock, and the container
 * check's lateness only makes it later). */
int lock_ttl_ok(const zkl_attempt *l, double now) {
  double ttl = (double)l->ttl_ms / 1000.0;
  if (l->ttl_ms <= 0) return 1;
  return l->renewed > 0 && now < l->renewed + ttl * 0.65;
}

/* The one writer of a hold's time limit (docs/design.md, section 9.6):
 * max_hold, how long any hold of l may last (0: no limit), and
 * hold_until, the boot-clock time the current hold ends (0: none).  A
 * hold that is on (L_HELD) ends `lasts` seconds from now (0, or
 * ZKL_NO_LIMIT and more: it has no end); in any other state (not held
 * yet, lingering) nothing ends.  A hold that begins, is reused or is
 * passed lasts its max_hold (lasts = max_hold); an extend moves the end
 * of the hold that is on and keeps max_hold, so the next hold of the
 * same node (a relock, a pass) sets its own.  The timer thread reckons
 * its sleep anew only when an end is set or dropped: it looks at every
 * task of the client, and a cohort passes its node once per request.
 * Set by zkl_attempt_max_hold and zkl_attempt_extend (api.c), lock_hold
 * (machine.c), zkl_attempt_linger, _relock and _pass (rehold.c).  Read
 * by lock_overdue below (so lock_held_now, zkl_attempt_overdue, and the
 * timer thread's lock_check_lost, class.c, which ends the hold then and
 * wakes for it). */
void hold_limit(zkl_attempt *l, double max_hold, double lasts) {
  double was = l->hold_until;
  l->max_hold = max_hold > 0 ? max_hold : 0;
  l->hold_until = l->state == L_HELD && lasts > 0 && lasts < ZKL_NO_LIMIT
                  ? zkl_bootnow() + lasts : 0;
  if (l->hold_until > 0 || was > 0) zkl_client_rearm(l->t.c);
}

int lock_overdue(const zkl_attempt *l, double now) {
  return l->hold_until > 0 && now >= l->hold_until;
}

int lock_held_now(zkl_attempt *l) {
  if (l->state != L_HELD || l->lost) return 0;
  if (lock_overdue(l, zkl_bootnow())) return 0; /* max_hold (section 9.6) */
  if (l->over && !lock_held_now(l->over)) return 0; /* (its write ended) */
  if (!lock_ttl_ok(l, zkl_bootnow())) return 0;
  return lock_margin_ok(l);
}
