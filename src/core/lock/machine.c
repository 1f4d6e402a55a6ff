/* The lock state machine (Curator LockInternals; docs/design.md, section 4),
 * driven by asynchronous completions on ZooKeeper's completion thread.
 *
 *   IDLE -> CREATING (create + pipelined listing) -> HELD
 *                    \-> WATCHING (get-with-watch on one predecessor;
 *                          a lease: a children watch of its directory)
 *                          -> LISTING (on its deletion) -> HELD | WATCHING
 *   missing parent: PARENTS (containers) -> CREATING
 *   create reply lost: RECOVER (find our uuid, check ephemeralOwner)
 *   release / timeout / __gc: DELETING -> DONE  (node.c; with a
 *     guarded write, DELETING is guard.c's multi)
 *   release with linger: HELD -> LINGER -> HELD again | DELETING
 *     (rehold.c, which passes a HELD one in a cohort too)
 *   a failure that is not a cut connection: FAILED
 *
 * A get-with-watch on our own node ("self watch") tells us when it goes:
 * deleted by anyone but us while HELD, the hold is lost (on_lost, like an
 * expiry); while queued, we queue again with a new node (docs/design.md,
 * section 4.5).  The same get reads "__REVOKE__".  A waiter sends it with
 * its wait; a hold taken at once, the client's self_delay after it began
 * (the timer thread), unless it is revocable or lingers: most holds end
 * before, and cost the create, its listing and the delete alone.
 *
 * Every function here runs with the client's mutex held.  Requests carry
 * the epoch they were sent in; a reply from an older epoch is ignored. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attempt.h"

static zkl_req *lock_req(zkl_attempt *l, int kind) {
  return zkl_task_req(&l->t, kind);
}

static int lock_sent(zkl_attempt *l, zkl_req *r, int rc, const char *what) {
  return zkl_task_sent(&l->t, r, rc, what);
}

/* a completion of ours, or NULL when it is of an older epoch */
static zkl_attempt *lock_enter(const void *data, int rc, zkl_req **rp) {
  return ATTEMPT(zkl_task_enter(data, rc, rp));
}

/* We hold: a latch's on_change(true), a selector's turn (ZKL_EV_HELD),
 * once the hold is one we believe (lock_hold, or its confirmation). */
static void lock_held_event(zkl_attempt *l) {
  if (l->notify_held && l->node) {
    char *full = zkl_join(l->t.path, l->node);
    if (full) zkl_event_push(l->t.c, ZKL_EV_HELD, full, l->serial);
    free(full);
  }
}

/* A confirming hold (lock_hold) is believed once a request of ours was
 * answered and, for a TTL node, renewed: the acquirer is told, and the
 * timer thread, which left it alone, keeps it from now on.  1 if so. */
static int lock_confirmed(zkl_attempt *l) {
  if (!l->confirming || l->state != L_HELD || !lock_margin_ok(l) ||
      !lock_ttl_ok(l, zkl_bootnow()))
    return 0;
  l->confirming = 0;
  lock_held_event(l);
  zkl_client_kick(l->t.c);
  return 1;
}

/* ---- create, parents, list ---------------------------------------------- */

void lock_parents_made(zkl_task *t) {
  zkl_attempt *l = ATTEMPT(t);
  if (l->g && l->g->wparents) { /* the guarded node's, for the write */
    l->g->wparents = 0;
    guard_write(l);
  } else {
    lock_create(l);
  }
}

void lock_parents(zkl_attempt *l) {
  l->state = L_PARENTS;
  zkl_task_parents(&l->t, l->t.path, 1); /* the directory too */
}

static void lock_create_cb(int rc, const char *name, const struct Stat *st,
                           const void *data) {
  zkl_req *r;
  zkl_attempt *l = lock_enter(data, rc, &r);
  int news = 1; /* (is there anything for the acquirer to look at?) */
  if (l && l->state == L_CREATING) {
    l->create_out = 0;
    if (rc == ZOK) {
      const char *base = strrchr(name, '/');
      lock_set_node(l, base ? base + 1 : name);
      l->czxid = st->czxid;
      l->session = st->ephemeralOwner;
      l->state = L_LISTING;
      if (l->ttl_ms > 0) { /* its first change: the create */
        l->renewed = r->sent;
        l->ttl_mtime = st->mtime;
        l->renew_at = r->sent + (double)l->ttl_ms / 3000.0;
        zkl_client_rearm(l->t.c); /* (the timer thread renews it) */
      }
      if (!l->node) lock_finish(&l->t, ZSYSTEMERROR, "(out of memory)");
      else if (l->abandon) lock_delete(l);
      else if (!l->list_piped) lock_list(l);
      /* the listing riding behind says where we stand; till it answers,
       * nothing changed for the acquirer: it is not woken (a wake-up per
       * cycle saved: issue 34) */
      else news = 0;
      /* (the self watch is sent once the listing is read: lock_evaluate) */
    } else if (rc == ZNONODE && !l->abandon) {
      lock_parents(l);
    } else if (rc == ZUNIMPLEMENTED && l->ttl_ms > 0) {
      lock_finish(&l->t, rc, "(a lock with ttl: the server must allow TTL "
                  "nodes, zookeeper.extendedTypesEnabled=true, ZooKeeper "
                  "3.5.3 or later; docs/limits.md)");
    } else if (zkl_is_cut(rc)) {
      /* the server may have applied it: find out once reconnected */
      l->state = L_RECOVER;
      l->t.redo = 1;
      if (l->t.c->state == ZKL_CONNECTED) lock_list(l);
    } else {
      lock_finish(&l->t, rc, l->t.path);
    }
  }
  zkl_task_leave_if(r, news);
}

/* Requests sent between these wake the C client's IO thread once
 * (tools/zkclient-io-completions.patch; not in Debian's library). */
#ifdef ZOO_ZKLOCK_BATCH
#define BATCH(zh, on) zoo_zklock_batch((zh), (on))
#else
#define BATCH(zh, on) ((void)(zh))
#endif

static void lock_create_sent(zkl_attempt *l);

/* The create, and the listing piped behind it (and a guarded read behind
 * that): one wake-up of the IO thread for them all. */
void lock_create(zkl_attempt *l) {
  zhandle_t *zh = l->t.c->zh;
  if (zh) BATCH(zh, 1);
  lock_create_sent(l);
  if (zh) BATCH(zh, 0);
}

static void lock_create_sent(zkl_attempt *l) {
  zkl_req *r;
  int rc;
  zkl_task_move(&l->t);
  l->state = L_CREATING;
  l->list_piped = 0;
  r = lock_req(l, R_CREATE);
  if (!r) rc = ZSYSTEMERROR;
  else if (l->ttl_ms > 0) /* (section 4.15) */
    rc = zoo_acreate2_ttl(l->t.c->zh, l->prefix, l->data, l->datalen,
                          &l->t.c->acl, ZOO_PERSISTENT_SEQUENTIAL_WITH_TTL,
                          l->ttl_ms, lock_create_cb, r);
  else
    rc = zoo_acreate2(l->t.c->zh, l->prefix, l->data, l->datalen,
                      &l->t.c->acl, ZOO_EPHEMERAL | ZOO_SEQUENCE,
                      lock_create_cb, r);
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
static void lock_hold(zkl_attempt *l);

void lock_blocker_gone(zkl_attempt *l) {
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
  zkl_attempt *l = lock_enter(data, rc, &r);
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
 * ZKL_REVOKE; the self watch reads it and queues an event. */
static const char REVOKE[] = ZKL_REVOKE;

/* Our node is gone, and we did not delete it: a hold is lost (as on an
 * expiry); a queued attempt queues again with a new node (within the
 * caller's deadline).  (docs/design.md, section 4.5) */
void lock_node_gone(zkl_attempt *l) {
  if (l->state == L_LINGER) { /* nobody held it: nothing lost */
    lock_set_node(l, NULL);
    lock_release_locked(l);
    return;
  }
  if (l->state == L_HELD) {
    lock_lost_event(l); /* (while it still names our node) */
    lock_set_node(l, NULL);
    lock_lost(l);
  } else if (l->state == L_LISTING || l->state == L_WATCHING) {
    lock_list(l); /* finds it missing: creates anew */
  }
}

/* The reply to the self watch's get: our node's data, or its absence.
 * (tagged with self_gen, not the epoch: its own enter) */
static void lock_self_cb(int rc, const char *v, int vlen,
                         const struct Stat *st, const void *data) {
  zkl_req *r = zkl_task_enter_req(data, rc);
  zkl_attempt *l = ATTEMPT(r->t);
  int news = 0; /* anything a waiter must look at? (mostly not: then
                   nobody is woken, which keeps the cycle at the floor) */
  if (r->epoch == l->self_gen && l->node) {
    if (rc == ZOK) {
      l->self_live = 1; /* (the get set the watch) */
      if (lock_confirmed(l)) news = 1; /* (heard now) */
      else if (l->confirming && l->ttl_ms > 0) lock_renew(l);
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
        if (full) zkl_event_push(l->t.c, ZKL_EV_REVOKE, full, l->serial);
        free(full);
        news = 1;
      }
    } else if (rc == ZNONODE) {
      lock_node_gone(l);
      news = 1;
    } /* cut: armed again on reconnect */
  }
  zkl_task_leave_if(r, news);
}

/* Get-with-watch on our own node (dedupes with one already set: one watch
 * per session and path on the server). */
void lock_watch_self(zkl_attempt *l) {
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
  l->self_due = 0;
}

/* The self watch of a hold, now or (deferred: the client's self_delay)
 * from the timer thread at self_due; `now`: a revocable hold reads its
 * data at once. */
static void lock_arm_self(zkl_attempt *l, int now) {
  if (now || (l->self_gen != l->self_armed && l->t.c->self_delay <= 0)) {
    lock_watch_self(l);
  } else if (l->self_gen != l->self_armed && !l->self_due) {
    /* (no wake-up of the timer thread: lock_hold kicked it if it was
     * idle, and while any hold is on it looks at least every self_delay:
     * session.c) */
    l->self_due = zkl_bootnow() + l->t.c->self_delay;
  }
}

void lock_self_due(zkl_attempt *l, double now, double *next) {
  if (!l->self_due) return;
  if (now >= l->self_due) lock_watch_self(l);
  else if (l->self_due < *next) *next = l->self_due;
}

/* ---- a TTL node: renewed ------------------------------------------------ */

/* The server expires a TTL node ttl_ms after its last change; a set of
 * our own data (the participant id) is the change, every third of the
 * TTL while queued or held (docs/design.md, section 4.15).  Tagged with
 * self_gen: it is about this node, whatever the epoch. */
static void lock_renew_cb(int rc, const struct Stat *st, const void *data) {
  zkl_req *r = zkl_task_enter_req(data, rc);
  zkl_attempt *l = ATTEMPT(r->t);
  int news = 0;
  if (r->epoch == l->self_gen && l->node) {
    l->renew_out = 0;
    if (rc == ZOK && st && l->ttl_mtime > 0 &&
        (double)(st->mtime - l->ttl_mtime) >= (double)l->ttl_ms * 0.65) {
      /* the node went unchanged that long, on the server's clock: the
       * server may have found it expired, and its delete, which does not
       * look at the TTL again, may still land after this renewal.  Not a
       * node to believe in: a hold on it is lost, a wait on it ends
       * (docs/design.md, section 4.15) */
      l->ttl_mtime = st->mtime;
      if (l->state == L_HELD) lock_lost(l);
      else lock_release_locked(l);
      news = 1;
    } else if (rc == ZOK) {
      if (r->sent > l->renewed) l->renewed = r->sent;
      if (st) l->ttl_mtime = st->mtime;
      if (lock_confirmed(l)) news = 1;
    } else if (rc == ZNONODE) {
      lock_node_gone(l); /* expired by the server, or deleted */
      news = 1;
    } else {
      l->renew_at = zkl_bootnow() + 0.5; /* (cut: soon again) */
    }
  }
  /* (a queued node's timer thread may sleep: it looks again at the next
   * renewal's time) */
  zkl_client_rearm(l->t.c);
  zkl_task_leave_if(r, news);
}

void lock_renew(zkl_attempt *l) {
  zkl_req *r;
  char *full;
  int rc;
  if (l->ttl_ms <= 0 || !l->node || l->renew_out ||
      !zkl_client_usable(l->t.c, NULL))
    return;
  full = lock_nodepath(l);
  r = full ? zkl_req_new(l->t.c, &l->t, l->self_gen, R_RENEW) : NULL;
  rc = r ? zoo_aset(l->t.c->zh, full, l->data, l->datalen, -1,
                    lock_renew_cb, r)
         : ZSYSTEMERROR;
  free(full);
  if (rc != ZOK) {
    if (r) zkl_req_done(r);
    l->renew_at = zkl_bootnow() + 0.5; /* (again on the timer's next look) */
    return;
  }
  l->renew_out = 1;
  l->renew_at = r->sent + (double)l->ttl_ms / 3000.0;
}

void lock_renew_due(zkl_attempt *l, double now, double *next) {
  if (l->ttl_ms <= 0 || !l->node) return;
  if (now >= l->renew_at) lock_renew(l);
  if (!l->renew_out && l->renew_at < *next) *next = l->renew_at;
}

/* ---- where we stand in the queue ---------------------------------------- */

/* We hold: the acquirer may go on now.  The self watch is sent after that
 * wake-up (nothing is lost meanwhile: a node deleted before the watch is
 * set answers the get with "no node"). */
static void lock_hold(zkl_attempt *l) {
  /* the wait outlasted our belief in the session (no request answered
   * since it began: the predecessor's deletion is an event, which says
   * nothing of when the server last heard us), or a TTL node's last
   * renewal is unknown: not a hold to hand out yet (section 9.2) */
  int confirm = l->node && !(l->g && l->g->rpath) &&
                (!lock_margin_ok(l) || !lock_ttl_ok(l, zkl_bootnow()));
  l->state = L_HELD;
  l->confirming = 0;
  hold_limit(l, l->max_hold, l->max_hold); /* (its end, if any, starts now) */
  zkl_task_set_watch(&l->t, NULL);
  zkl_client_kick(l->t.c); /* probes and the lost deadline start */
  if (!confirm) lock_held_event(l); /* (else once confirmed) */
  if (l->g && l->g->rpath) {
    /* the acquirer is told once the guarded read is back: it rode behind
     * the listing that made us holder, or goes now (a sole predecessor's
     * deletion made us holder without a listing) */
    l->g->rpending = 1;
    if (l->g->rflight != l->t.epoch) guard_read(l);
  } else if (confirm) {
    /* our node's get goes now (a TTL node's renewal); its answer (heard
     * again, and the node there) tells the acquirer: lock_confirmed */
    l->confirming = 1;
    if (l->ttl_ms > 0) lock_renew(l); /* (a TTL node: renewed, too) */
    else lock_watch_self(l);
    return;
  } else {
    zkl_task_notify(&l->t);
  }
  /* (revocable: its data is read again now; else, not sent yet for this
   * node, it goes once the hold has lasted the client's self_delay) */
  lock_arm_self(l, l->revocable);
}

static void lock_evaluate(zkl_attempt *l, const struct String_vector *sv,
                          int watched);

static void lock_dir_cb(int rc, const struct String_vector *sv,
                        const void *data) {
  zkl_req *r;
  zkl_attempt *l = lock_enter(data, rc, &r);
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
void lock_watch_dir(zkl_attempt *l) {
  zkl_req *r;
  int rc;
  zkl_task_move(&l->t);
  l->state = L_WATCHING;
  zkl_task_set_watch(&l->t, strdup(l->t.path));
  r = l->t.watch ? lock_req(l, R_LIST) : NULL;
  rc = r ? zoo_aget_children(l->t.c->zh, l->t.path, 1, lock_dir_cb, r)
         : ZSYSTEMERROR;
  lock_sent(l, r, rc, l->t.path);
}

/* Our queued node is not in the listing (someone deleted it): queue again,
 * behind everyone, unless we were giving it up anyway. */
static void lock_requeue(zkl_attempt *l) {
  lock_set_node(l, NULL);
  if (l->abandon) lock_finish(&l->t, ZOK, NULL); else lock_create(l);
}

/* Watch `name`, the node that holds us back (sole: it alone does). */
static void lock_wait_for(zkl_attempt *l, const char *name, int sole) {
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

/* Where a listing puts us: held, or waiting (watched: the listing came
 * with a watch, which is set already). */
static void lock_evaluate(zkl_attempt *l, const struct String_vector *sv,
                          int watched) {
  zkl_entry *e;
  int n, idx, b;
  if (l->kind != ZKL_KIND_LEASE && l->max_leases == 1) {
    /* one pass, no sort: a queue of thousands costs its listing's length
     * with the client's mutex held, not n log n (names.c) */
    const char *blocker;
    int ahead;
    if (!zkl_names_scan(l->kind, sv->data, sv->count, l->node, l->ignore,
                        &blocker, &ahead)) {
      lock_requeue(l);
      return;
    }
    if (l->ahead < 0) l->ahead = blocker ? ahead : 0;
    if (!blocker) lock_hold(l);
    else lock_wait_for(l, blocker, ahead == 1);
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
    if (l->ahead < 0)
      l->ahead = sv->count > l->max_leases ? sv->count - l->max_leases : 0;
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
  if (l->ahead < 0) l->ahead = b < 0 ? 0 : idx - l->max_leases + 1;
  if (b < 0) lock_hold(l); else lock_wait_for(l, e[b].name, 0);
  free(e);
}

static void lock_exists_cb(int rc, const struct Stat *st, const void *data) {
  zkl_req *r;
  zkl_attempt *l = lock_enter(data, rc, &r);
  if (l && l->state == L_RECOVER) {
    /* ours: of our session, or a TTL node of our participant id (its
     * uuid is made of the id: a holder back after a restart; section
     * 4.15).  The server shows a TTL node's ephemeralOwner as 0, as a
     * persistent node's: its TTL stays on the server. */
    int ttl_node = rc == ZOK && l->ttl_ms > 0 && st->ephemeralOwner == 0;
    if (rc == ZOK && (st->ephemeralOwner == l->t.c->session_id ||
                      ttl_node)) {
      l->czxid = st->czxid; /* ours: adopt it */
      l->session = st->ephemeralOwner;
      l->state = L_LISTING;
      if (l->abandon) {
        lock_delete(l);
      } else {
        /* a TTL node's last change is unknown: renewed first (answered
         * before the listing, which follows it) */
        if (ttl_node) {
          l->renewed = 0;
          l->ttl_mtime = st->mtime;
          lock_renew(l);
        }
        lock_list(l); /* (the self watch follows the listing) */
      }
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
static void lock_recovered(zkl_attempt *l, const struct String_vector *sv) {
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
  zkl_attempt *l = lock_enter(data, rc, &r);
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

void lock_list(zkl_attempt *l) {
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
  if (l->g && l->g->rpath) guard_read(l);
}

void lock_release_locked(zkl_attempt *l) {
  l->abandon = 1;
  l->confirming = 0;
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

/* A hold ends without its owner's word (deleted by someone else, past its
 * max_hold, the server not heard from): on_lost is queued and our node
 * goes.  A downgraded read resting on it ends the same way: a writer
 * queued between the two may hold now (docs/design.md, section 5). */
void lock_lost(zkl_attempt *l) {
  lock_lost_event(l);
  lock_release_locked(l);
  zkl_task_notify(&l->t);
  lock_end_resting(l);
}

/* The write attempt w's node goes: a read still resting on it ends as a
 * lost hold (Lua lets a read stand alone, rest_on(NULL), before it gives
 * back a write node that nothing queued between). */
void lock_end_resting(zkl_attempt *w) {
  zkl_task *t, *next;
  if (!w->resting) return; /* (the common case: no walk) */
  for (t = w->t.c->tasks; t; t = next) {
    zkl_attempt *r;
    next = t->next; /* (ending r may free it, nothing else) */
    if (t->cls != &zkl_attempt_class) continue;
    r = ATTEMPT(t);
    if (r->over == w && r->state == L_HELD && !r->lost) lock_lost(r);
  }
}
