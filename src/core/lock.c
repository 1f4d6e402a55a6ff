/* The lock state machine (Curator LockInternals; docs/design.md, section 4),
 * driven by asynchronous completions on ZooKeeper's completion thread.
 *
 *   IDLE -> CREATING (create + pipelined listing) -> HELD
 *                    \-> WATCHING (get-with-watch on one predecessor)
 *                          -> LISTING (on its deletion) -> HELD | WATCHING
 *   missing parent: PARENTS (containers) -> CREATING
 *   create reply lost: RECOVER (find our uuid, check ephemeralOwner)
 *   release / timeout / __gc: DELETING -> DONE
 *
 * From the create's reply on, a get-with-watch on our own node ("self
 * watch") tells us when it goes: deleted by anyone but us while HELD, the
 * hold is lost (on_lost, like an expiry); while queued, we queue again
 * with a fresh node (docs/design.md, section 4.5).  The same get reads
 * "__REVOKE__".
 *
 * Every function here runs with the client's mutex held.  Requests carry
 * the epoch they were sent in; a reply from an older epoch is ignored. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock.h"

void lock_list(zkl_lock *l);
void lock_delete(zkl_lock *l);

/* ---- the task's own parts ----------------------------------------------- */

void lock_free(zkl_task *t) {
  zkl_lock *l = LOCK(t);
  free(l->prefix); free(l->data); free(l->ignore); free(l->node);
  if (l->g) {
    free(l->g->rpath); free(l->g->rdata); free(l->g->wpath);
    free(l->g->wdata); free(l->g);
  }
  free(l);
}

/* Our node becomes `name` (a copy is kept) or none: replies and events
 * about the previous one no longer apply (self_gen). */
static void lock_set_node(zkl_lock *l, const char *name) {
  free(l->node);
  l->node = name ? strdup(name) : NULL;
  l->self_gen++;
  l->self_live = 0;
  l->revoke_version = -1;
}

static char *lock_nodepath(const zkl_lock *l) {
  return l->node ? zkl_join(l->t.path, l->node) : NULL;
}

/* A hold ends without its owner's word: on_lost callbacks are queued. */
void lock_lost_event(zkl_lock *l) {
  if (l->lost) return;
  l->lost = 1;
  if (l->node) {
    char *full = lock_nodepath(l);
    if (full) zkl_event_push(l->t.c, ZKL_EV_LOST, full);
    free(full);
  }
  l->t.c->n_lost++;
}

/* The lock can no longer be had: finish as DONE when it was given up, as
 * FAILED with the error otherwise.  A dead session took our node along. */
void lock_finish(zkl_task *t, int rc, const char *what_) {
  zkl_lock *l = LOCK(t);
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

static zkl_req *lock_req(zkl_lock *l, int kind) {
  return zkl_task_req(&l->t, kind);
}

static int lock_sent(zkl_lock *l, zkl_req *r, int rc, const char *what) {
  return zkl_task_sent(&l->t, r, rc, what);
}

/* a completion of ours, or NULL when it is of an older epoch */
static zkl_lock *lock_enter(const void *data, int rc, zkl_req **rp) {
  return LOCK(zkl_task_enter(data, rc, rp));
}

/* ---- create, parents, list ---------------------------------------------- */

void lock_parents_made(zkl_task *t) {
  zkl_lock *l = LOCK(t);
  if (l->g && l->g->wparents) { /* the guarded node's, for the write */
    l->g->wparents = 0;
    lock_write(l);
  } else {
    lock_create(l);
  }
}

void lock_parents(zkl_lock *l) {
  l->state = L_PARENTS;
  zkl_task_parents(&l->t, l->t.path, 1); /* the directory too */
}

static void lock_create_cb(int rc, const char *name, const struct Stat *st,
                           const void *data) {
  zkl_req *r;
  zkl_lock *l = lock_enter(data, rc, &r);
  if (l && l->state == L_CREATING) {
    l->create_out = 0;
    if (rc == ZOK) {
      const char *base = strrchr(name, '/');
      lock_set_node(l, base ? base + 1 : name);
      l->czxid = st->czxid;
      l->session = st->ephemeralOwner;
      l->state = L_LISTING;
      if (!l->node) lock_finish(&l->t, ZSYSTEMERROR, "(out of memory)");
      else if (l->abandon) lock_delete(l);
      else if (!l->list_piped) lock_list(l);
      /* (the self watch is sent once the listing is read: lock_evaluate) */
    } else if (rc == ZNONODE && !l->abandon) {
      lock_parents(l);
    } else if (zkl_is_cut(rc)) {
      /* the server may have applied it: find out once reconnected */
      l->state = L_RECOVER;
      l->t.redo = 1;
      if (l->t.c->state == ZKL_CONNECTED) lock_list(l);
    } else {
      lock_finish(&l->t, rc, l->t.path);
    }
  }
  zkl_task_leave(r);
}

void lock_create(zkl_lock *l) {
  zkl_req *r;
  int rc;
  l->t.epoch++;
  l->state = L_CREATING;
  l->t.redo = 0;
  l->list_piped = 0;
  r = lock_req(l, R_CREATE);
  rc = r ? zoo_acreate2(l->t.c->zh, l->prefix, l->data, l->datalen,
                        &l->t.c->acl, ZOO_EPHEMERAL | ZOO_SEQUENCE,
                        lock_create_cb, r)
         : ZSYSTEMERROR;
  if (!lock_sent(l, r, rc, l->t.path)) return;
  l->create_out = 1;
  /* the listing rides right behind the create: one round trip */
  lock_list(l);
}

/* The watched predecessor was deleted.  If it was the only node ahead
 * that counted, we hold now: nobody can have queued ahead of us since, and
 * our own node is still there, or the self watch, sent before the
 * predecessor's, would have said otherwise first (replies and events of
 * one session arrive in order).  Else list again.  (docs/design.md,
 * section 4.4) */
static void lock_hold(zkl_lock *l);

void lock_blocker_gone(zkl_lock *l) {
  if (l->sole && l->kind != ZKL_KIND_LEASE && l->node && l->self_live) {
    l->sole = 0;
    lock_hold(l);
  } else {
    lock_list(l);
  }
}

static void lock_get_cb(int rc, const char *v, int vlen, const struct Stat *st,
                        const void *data) {
  zkl_req *r;
  zkl_lock *l = lock_enter(data, rc, &r);
  (void)v; (void)vlen; (void)st;
  if (l && l->state == L_WATCHING) {
    if (rc == ZOK) {
      /* watch set: wait for the predecessor to go */
    } else if (rc == ZNONODE) {
      lock_blocker_gone(l); /* gone already */
    } else {
      zkl_task_trouble(&l->t, rc, l->t.watch);
    }
  }
  zkl_task_leave(r);
}

/* ---- our own node: deleted by someone else, or asked to let go ---------- */

/* Revocation (Curator Revoker): a revoker sets our node's data to
 * "__REVOKE__"; the self watch reads it and queues an event. */
static const char REVOKE[] = "__REVOKE__";

/* Our node is gone, and we did not delete it: a hold is lost (as on an
 * expiry); a queued attempt queues again with a new node (within the
 * caller's deadline).  (docs/design.md, section 4.5) */
void lock_node_gone(zkl_lock *l) {
  if (l->state == L_LINGER) { /* nobody held it: nothing lost */
    lock_set_node(l, NULL);
    lock_release_locked(l);
    return;
  }
  if (l->state == L_HELD) {
    lock_lost_event(l);
    lock_set_node(l, NULL);
    lock_release_locked(l);
  } else if (l->state == L_LISTING || l->state == L_WATCHING) {
    lock_list(l); /* finds it missing: creates anew */
  }
}

/* The reply to the self watch's get: our node's data, or its absence.
 * (tagged with self_gen, not the epoch: its own enter) */
static void lock_self_cb(int rc, const char *v, int vlen,
                         const struct Stat *st, const void *data) {
  zkl_req *r = (zkl_req *)data;
  zkl_client *c = r->c; /* (read before r is freed) */
  zkl_lock *l = LOCK(r->t);
  int news = 0; /* anything a waiter must look at? (mostly not: then
                   nobody is woken, which keeps the cycle at the floor) */
  pthread_mutex_lock(&c->mu);
  zkl_client_heard(c, r->sent, rc);
  if (r->epoch == l->self_gen && l->node) {
    if (rc == ZOK) {
      l->self_live = 1; /* (the get set the watch) */
      /* once per request: a re-read (reconnect) of the same data version
       * is not a new one */
      if (l->state == L_LINGER && v && vlen == (int)sizeof REVOKE - 1 &&
          memcmp(v, REVOKE, sizeof REVOKE - 1) == 0) {
        l->contended = 1; /* someone asks for it: it goes */
        lock_release_locked(l);
      } else if (l->state == L_HELD && l->revocable && v && st &&
          st->version != l->revoke_version &&
          vlen == (int)sizeof REVOKE - 1 &&
          memcmp(v, REVOKE, sizeof REVOKE - 1) == 0) {
        char *full = lock_nodepath(l);
        l->revoke_version = st->version;
        if (full) zkl_event_push(c, ZKL_EV_REVOKE, full);
        free(full);
        news = 1;
      }
    } else if (rc == ZNONODE) {
      lock_node_gone(l);
      news = 1;
    } /* cut: armed again on reconnect */
  }
  if (news) zkl_client_touch(c, l->t.wake_id);
  zkl_req_done(r);
  if (news) zkl_client_changed(c);
  pthread_mutex_unlock(&c->mu);
}

/* Get-with-watch on our own node (dedupes with one already set: one watch
 * per session and path on the server). */
void lock_watch_self(zkl_lock *l) {
  zkl_req *r;
  char *full;
  int rc;
  if (!l->node || !zkl_client_usable(l->t.c, NULL)) return;
  full = lock_nodepath(l);
  r = full ? zkl_req_new(l->t.c, &l->t, l->self_gen, R_SELF) : NULL;
  rc = r ? zoo_aget(l->t.c->zh, full, 1, lock_self_cb, r) : ZSYSTEMERROR;
  free(full);
  if (rc != ZOK && r) zkl_req_done(r); /* (cut: again on reconnect) */
  else if (rc == ZOK) l->self_armed = l->self_gen;
}

/* ---- where we stand in the queue ---------------------------------------- */

/* We hold: the acquirer may go on now.  The self watch is sent after that
 * wake-up (nothing is lost meanwhile: a node deleted before the watch is
 * set answers the get with "no node"). */
static void lock_hold(zkl_lock *l) {
  l->state = L_HELD;
  if (l->max_hold > 0) { /* the timer thread ends it then (lock_check_lost) */
    l->hold_until = zkl_bootnow() + l->max_hold;
    zkl_client_rearm(l->t.c);
  }
  zkl_task_set_watch(&l->t, NULL);
  zkl_client_kick(l->t.c); /* probes and the lost deadline start */
  if (l->notify_held && l->node) {
    /* a latch's on_change(true), a selector's turn */
    char *full = zkl_join(l->t.path, l->node);
    if (full) zkl_event_push(l->t.c, ZKL_EV_HELD, full);
    free(full);
  }
  if (l->g && l->g->rpath) {
    /* the acquirer is told once the guarded read is back: it rode behind
     * the listing that made us holder, or goes now (a sole predecessor's
     * deletion made us holder without a listing) */
    l->g->rpending = 1;
    if (l->g->rflight != l->t.epoch) lock_read_send(l);
  } else {
    zkl_task_notify(&l->t);
  }
  /* (not sent yet for this node, or revocable: its data is read again) */
  if (l->self_gen != l->self_armed || l->revocable) lock_watch_self(l);
}

static void lock_evaluate(zkl_lock *l, const struct String_vector *sv,
                          int watched);

static void lock_dir_cb(int rc, const struct String_vector *sv,
                        const void *data) {
  zkl_req *r;
  zkl_lock *l = lock_enter(data, rc, &r);
  if (l && l->state == L_WATCHING) {
    if (rc == ZOK) lock_evaluate(l, sv, 1);
    else if (rc == ZNONODE) lock_list(l); /* (finds our node gone too) */
    else zkl_task_trouble(&l->t, rc, l->t.path);
  }
  zkl_task_leave(r);
}

/* A lease waits on a children watch of its directory: any lease released,
 * in whatever order, wakes it within a round trip (docs/design.md,
 * section 4.10).  The listing that sets the watch is evaluated too. */
void lock_watch_dir(zkl_lock *l) {
  zkl_req *r;
  int rc;
  l->t.epoch++;
  l->state = L_WATCHING;
  l->t.redo = 0;
  zkl_task_set_watch(&l->t, strdup(l->t.path));
  r = l->t.watch ? lock_req(l, R_LIST) : NULL;
  rc = r ? zoo_aget_children(l->t.c->zh, l->t.path, 1, lock_dir_cb, r)
         : ZSYSTEMERROR;
  lock_sent(l, r, rc, l->t.path);
}

/* Where a listing puts us: held, or waiting (watched: the listing came
 * with a watch, which is set already). */
/* Our queued node is not in the listing (someone deleted it): queue again,
 * behind everyone, unless we were giving it up anyway. */
static void lock_requeue(zkl_lock *l) {
  lock_set_node(l, NULL);
  if (l->abandon) lock_finish(&l->t, ZOK, NULL); else lock_create(l);
}

/* Watch `name`, the node that holds us back (sole: it alone does). */
static void lock_wait_for(zkl_lock *l, const char *name, int sole) {
  zkl_req *r;
  int rc;
  zkl_task_set_watch(&l->t, zkl_join(l->t.path, name));
  l->state = L_WATCHING;
  l->sole = sole;
  if (l->self_gen != l->self_armed) lock_watch_self(l);
  r = lock_req(l, R_GET);
  rc = r && l->t.watch ? zoo_aget(l->t.c->zh, l->t.watch, 1, lock_get_cb, r)
                       : ZSYSTEMERROR;
  if (r && !l->t.watch) { zkl_req_done(r); r = NULL; }
  lock_sent(l, r, rc, l->t.watch);
}

static void lock_evaluate(zkl_lock *l, const struct String_vector *sv,
                          int watched) {
  zkl_entry *e;
  int n, idx, b;
  if (l->kind != ZKL_KIND_LEASE && l->max_leases == 1) {
    /* one pass, no sort: a queue of thousands costs its listing's length
     * with the client's mutex held, not n log n (names.c) */
    const char *blocker;
    int sole;
    if (!zkl_names_scan(l->kind, sv->data, sv->count, l->node, l->ignore,
                        &blocker, &sole)) {
      lock_requeue(l);
    } else if (!blocker) {
      lock_hold(l);
    } else {
      lock_wait_for(l, blocker, sole);
    }
    return;
  }
  e = malloc(sizeof *e * (size_t)(sv->count > 0 ? sv->count : 1));
  if (!e) { lock_finish(&l->t, ZSYSTEMERROR, "out of memory"); return; }
  n = zkl_names_sort(sv->data, sv->count,
                     zkl_markers(zkl_kind_family(l->kind)), e);
  idx = zkl_names_find(e, n, l->node);
  if (idx < 0) {
    free(e);
    lock_requeue(l);
    return;
  }
  if (l->kind == ZKL_KIND_LEASE) {
    /* Curator InterProcessSemaphoreV2: every child of the leases
     * directory counts, ours included */
    free(e);
    if (sv->count <= l->max_leases) {
      lock_hold(l);
    } else if (!watched) {
      lock_watch_dir(l); /* (first: its watch is set before the self get's) */
      if (l->self_gen != l->self_armed) lock_watch_self(l);
    }
    return;
  }
  /* (here only a mutex of several holders: testing.broken_mutex; its
   * waiters always list again) */
  b = zkl_names_blocker(l->kind, l->max_leases, e, idx, l->ignore);
  if (b < 0) lock_hold(l); else lock_wait_for(l, e[b].name, 0);
  free(e);
}

static void lock_exists_cb(int rc, const struct Stat *st, const void *data) {
  zkl_req *r;
  zkl_lock *l = lock_enter(data, rc, &r);
  if (l && l->state == L_RECOVER) {
    if (rc == ZOK && st->ephemeralOwner == l->t.c->session_id) {
      l->czxid = st->czxid; /* ours: adopt it */
      l->session = st->ephemeralOwner;
      l->state = L_LISTING;
      if (l->abandon) lock_delete(l);
      else lock_list(l); /* (the self watch follows the listing) */
    } else if (rc == ZOK || rc == ZNONODE) {
      lock_set_node(l, NULL); /* not ours (an older session's) or gone */
      if (l->abandon) lock_finish(&l->t, ZOK, NULL); else lock_create(l);
    } else {
      zkl_task_trouble(&l->t, rc, l->node);
    }
  }
  zkl_task_leave(r);
}

/* A create whose reply was lost: the listing shows whether a node of our
 * uuid exists, and its ephemeralOwner whether it is ours
 * (docs/design.md, section 4.8). */
static void lock_recovered(zkl_lock *l, const struct String_vector *sv) {
  int i;
  for (i = 0; i < sv->count; i++) {
    if (strstr(sv->data[i], l->uuid)) {
      zkl_req *r;
      char *full = zkl_join(l->t.path, sv->data[i]);
      int rc;
      lock_set_node(l, sv->data[i]);
      l->t.epoch++;
      r = full && l->node ? lock_req(l, R_EXISTS) : NULL;
      rc = r ? zoo_aexists(l->t.c->zh, full, 0, lock_exists_cb, r)
             : ZSYSTEMERROR;
      free(full);
      lock_sent(l, r, rc, l->t.path);
      return;
    }
  }
  if (l->abandon) lock_finish(&l->t, ZOK, NULL); else lock_create(l);
}

static void lock_list_cb(int rc, const struct String_vector *sv,
                         const void *data) {
  zkl_req *r;
  zkl_lock *l = lock_enter(data, rc, &r);
  /* (the listing piped behind a create is answered after it: by then the
   * create's reply moved us to LISTING, or to a newer epoch) */
  if (l && (l->state == L_LISTING || l->state == L_RECOVER)) {
    if (rc == ZOK && l->state == L_RECOVER) lock_recovered(l, sv);
    else if (rc == ZOK) lock_evaluate(l, sv, 0);
    else if (rc == ZNONODE && l->state == L_RECOVER) /* nothing was made */
      l->abandon ? lock_finish(&l->t, ZOK, NULL) : lock_create(l);
    else if (rc == ZNONODE) lock_finish(&l->t, rc, l->t.path);
    else zkl_task_trouble(&l->t, rc, l->t.path);
  }
  zkl_task_leave(r);
}

static void lock_sync_cb(int rc, const char *value, const void *data) {
  zkl_req *r;
  (void)value;
  (void)lock_enter(data, rc, &r); /* the listing behind it says the rest */
  zkl_task_leave(r);
}

void lock_list(zkl_lock *l) {
  zkl_req *r;
  int rc;
  if (l->state != L_CREATING) {
    l->t.epoch++;
    if (l->state != L_RECOVER) l->state = L_LISTING;
  }
  l->t.redo = 0;
  if (l->state == L_RECOVER) {
    /* The cut create may have been applied without this server knowing
     * yet (an ensemble member behind the leader): a sync first, and the
     * listing, answered after it, shows it.  (The session moved to this
     * server before we got CONNECTED: the leader refuses requests still in
     * flight from the old connection, so none lands after the listing.) */
    r = lock_req(l, R_SYNC);
    rc = r ? zoo_async(l->t.c->zh, l->t.path, lock_sync_cb, r) : ZSYSTEMERROR;
    if (!lock_sent(l, r, rc, l->t.path)) return;
  }
  r = lock_req(l, R_LIST);
  rc = r ? zoo_aget_children(l->t.c->zh, l->t.path, 0, lock_list_cb, r)
         : ZSYSTEMERROR;
  if (!lock_sent(l, r, rc, l->t.path)) return;
  if (l->state == L_CREATING) l->list_piped = 1;
  /* the guarded read rides right behind: valid if this listing makes us
   * holder (section 4.12) */
  if (l->g && l->g->rpath) lock_read_send(l);
}

/* ---- the guarded node: read with the acquire ---------------------------- */

static void lock_read_cb(int rc, const char *v, int vlen,
                         const struct Stat *st, const void *data) {
  zkl_req *r;
  zkl_lock *l = lock_enter(data, rc, &r);
  lock_guard *g = l ? l->g : NULL;
  if (g) {
    g->rflight = -1;
    if (l->state == L_HELD && g->rpending && !zkl_is_cut(rc)) {
      /* sent after the listing (or the deletion) that made us holder:
       * what it read was there while we held */
      free(g->rdata);
      g->rdata = NULL;
      g->rlen = 0;
      g->rrc = rc;
      if (rc == ZOK && st) g->rstat = *st;
      if (rc == ZOK && v && vlen > 0) {
        g->rdata = malloc((size_t)vlen);
        if (g->rdata) { memcpy(g->rdata, v, (size_t)vlen); g->rlen = vlen; }
        else g->rrc = ZSYSTEMERROR;
      }
      g->rpending = 0;
      zkl_task_notify(&l->t);
    } /* (not holding: the listing said wait, so it is stale; cut: sent
         again on reconnect) */
  }
  zkl_task_leave(r);
}

void lock_read_send(zkl_lock *l) {
  zkl_req *r = lock_req(l, R_READ);
  int rc = r ? zoo_aget(l->t.c->zh, l->g->rpath, 0, lock_read_cb, r)
             : ZSYSTEMERROR;
  if (lock_sent(l, r, rc, l->g->rpath)) l->g->rflight = l->t.epoch;
}

/* ---- lock caching: a released hold lingers ------------------------------ */

/* The directory's children, with a watch: any node but ours is a
 * contender (zklock, Curator, kazoo alike), and from then on the node is
 * not reused: deleted now if lingering, at the end of the hold if held
 * again (docs/design.md, section 4.13). */
static void lock_contenders_cb(int rc, const struct String_vector *sv,
                               const void *data) {
  zkl_req *r;
  zkl_lock *l = lock_enter(data, rc, &r);
  if (l && l->lingers && (l->state == L_LINGER || l->state == L_HELD)) {
    if (rc == ZOK && sv) {
      int i;
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

void lock_contenders(zkl_lock *l) {
  zkl_req *r;
  int rc;
  if (!l->t.watch || strcmp(l->t.watch, l->t.path) != 0)
    zkl_task_set_watch(&l->t, strdup(l->t.path));
  l->lingers = 1;
  r = lock_req(l, R_CONTENDERS);
  rc = r ? zoo_aget_children(l->t.c->zh, l->t.path, 1, lock_contenders_cb,
                             r)
         : ZSYSTEMERROR;
  if (rc != ZOK) {
    if (r) zkl_req_done(r);
    if (!zkl_is_cut(rc)) { /* cannot watch: no caching */
      l->contended = 1;
      if (l->state == L_LINGER) lock_release_locked(l);
    }
  }
}

/* ---- giving our node back ----------------------------------------------- */

static void lock_delete_cb(int rc, const void *data) {
  zkl_req *r;
  zkl_lock *l = lock_enter(data, rc, &r);
  if (l && l->state == L_DELETING) {
    if (rc == ZOK || rc == ZNONODE || rc == ZSESSIONEXPIRED ||
        rc == ZCLOSING || rc == ZINVALIDSTATE) {
      lock_set_node(l, NULL);
      lock_finish(&l->t, ZOK, NULL);
    } else if (zkl_is_cut(rc)) {
      l->t.redo = 1;
    } else {
      lock_finish(&l->t, ZOK, NULL); /* e.g. no auth to delete: nothing more */
    }
  }
  zkl_task_leave(r);
}

void lock_delete(zkl_lock *l) {
  zkl_req *r;
  char *full;
  int rc;
  if (!l->node) { lock_finish(&l->t, ZOK, NULL); return; }
  if (!zkl_client_usable(l->t.c, NULL)) {
    lock_finish(&l->t, ZOK, NULL); /* the node goes with the session */
    return;
  }
  l->t.epoch++;
  l->state = L_DELETING;
  l->t.redo = 0;
  zkl_task_set_watch(&l->t, NULL);
  full = lock_nodepath(l);
  r = full ? lock_req(l, R_DELETE) : NULL;
  rc = r ? zoo_adelete(l->t.c->zh, full, -1, lock_delete_cb, r)
         : ZSYSTEMERROR;
  free(full);
  if (rc != ZOK) {
    if (r) zkl_req_done(r);
    if (zkl_is_cut(rc)) l->t.redo = 1;
    else lock_finish(&l->t, ZOK, NULL);
  }
}

/* ---- the guarded node: written with the release ------------------------ */

/* The multi-op ended the hold: our node is gone, with the write or
 * without it (section 4.12). */
static void lock_write_end(zkl_lock *l, int wrc) {
  l->g->wdone = 1;
  l->g->wrc = wrc;
  lock_set_node(l, NULL);
  lock_finish(&l->t, ZOK, NULL);
}

static void lock_write_cb(int rc, const void *data) {
  zkl_req *r;
  zkl_lock *l = lock_enter(data, rc, &r);
  lock_guard *g = l ? l->g : NULL;
  if (g && l->state == L_DELETING && g->wpath && !g->wdone) {
    int werr = g->mres[0].err, derr = g->mres[1].err;
    if (zkl_is_cut(rc)) {
      l->t.redo = 1;  /* sent again on reconnect: if it was applied, our
                         node is gone and the retry fails as a whole */
      g->wmaybe = 1;
    } else if (rc == ZOK) {
      g->wversion = g->wcreate ? 0 : g->wstat.version;
      g->wzxid = g->wcreate ? 0 : g->wstat.mzxid;
      lock_write_end(l, ZOK);
    } else if (derr == ZNONODE) {
      lock_write_end(l, ZNONODE); /* our node is gone: the hold was lost */
    } else if (werr == ZNONODE && !g->wcreate) {
      g->wcreate = 1; /* the guarded node is missing: create it */
      lock_write(l);
    } else if (werr == ZNONODE) {
      g->wparents = 1; /* and its parent too: containers first */
      zkl_task_parents(&l->t, g->wpath, 0);
    } else if (werr == ZNODEEXISTS && g->wcreate) {
      g->wcreate = 0; /* someone made it meanwhile: set it */
      lock_write(l);
    } else if (rc == ZSESSIONEXPIRED || rc == ZCLOSING ||
               rc == ZINVALIDSTATE) {
      /* the node goes with the session; a closing handle may have sent
       * the multi before it stopped: maybe applied */
      if (rc != ZSESSIONEXPIRED) g->wmaybe = 1;
      lock_write_end(l, rc);
    } else {
      /* refused (no parent, no auth, too big): not written; the lock is
       * released all the same */
      g->wdone = 1;
      g->wrc = werr != ZOK && werr != ZRUNTIMEINCONSISTENCY ? werr : rc;
      lock_delete(l);
    }
  }
  zkl_task_leave(r);
}

void lock_write(zkl_lock *l) {
  lock_guard *g = l->g;
  char *full;
  zkl_req *r;
  int rc;
  g->wparents = 0;
  if (!zkl_client_usable(l->t.c, NULL) || !zkl_zh_usable(l->t.c->zh)) {
    /* (a multi on a dead handle: the client frees paths it never set) */
    lock_write_end(l, ZINVALIDSTATE);
    return;
  }
  full = lock_nodepath(l);
  l->t.epoch++;
  l->state = L_DELETING;
  l->t.redo = 0;
  zkl_task_set_watch(&l->t, NULL);
  if (g->wcreate)
    zoo_create_op_init(&g->mops[0], g->wpath, g->wdata, g->wlen,
                       &l->t.c->acl, 0, g->wname, sizeof g->wname);
  else
    zoo_set_op_init(&g->mops[0], g->wpath, g->wdata, g->wlen, -1,
                    &g->wstat);
  if (full) zoo_delete_op_init(&g->mops[1], full, -1);
  memset(g->mres, 0, sizeof g->mres);
  r = full ? lock_req(l, R_WRITE) : NULL;
  rc = r ? zoo_amulti(l->t.c->zh, 2, g->mops, g->mres, lock_write_cb, r)
         : ZSYSTEMERROR;
  if (rc == ZOK) g->wsent = 1;
  /* (the multi copies the paths it sends: full may go) */
  free(full);
  if (rc != ZOK) {
    if (r) zkl_req_done(r);
    if (zkl_is_cut(rc)) { l->t.redo = 1; return; }
    g->wdone = 1; /* not sent: not written; our node goes the plain way */
    g->wrc = rc;
    lock_delete(l);
  }
}

void lock_release_locked(zkl_lock *l) {
  l->abandon = 1;
  switch (l->state) {
  case L_IDLE: case L_PARENTS: lock_finish(&l->t, ZOK, NULL); return;
  case L_CREATING: if (!l->create_out) lock_delete(l); break;
  case L_RECOVER: break; /* finds our node, then deletes it */
  case L_LISTING: case L_WATCHING: case L_HELD: case L_LINGER:
    lock_delete(l);
    break;
  case L_FAILED: /* e.g. no auth to watch: our node may still be there */
    if (l->node && zkl_client_usable(l->t.c, NULL)) lock_delete(l);
    break;
  default: break;
  }
  /* work left (a reply to come, a reconnect to wait for): the attempt
   * must outlive its Lua box until the node is gone */
  if (l->state != L_DONE && l->state != L_FAILED) zkl_task_keep(&l->t);
}
