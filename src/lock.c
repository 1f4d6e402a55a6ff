/* The lock state machine (Curator LockInternals, DESIGN.md section 4),
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
 * with a fresh node (docs/recipes.md).  The same get reads "__REVOKE__".
 *
 * Every function here runs with the client's mutex held.  Requests carry
 * the epoch they were sent in; a reply from an older epoch is ignored. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "zkl.h"

enum { L_IDLE, L_PARENTS, L_CREATING, L_RECOVER, L_LISTING, L_WATCHING,
       L_HELD, L_DELETING, L_DONE, L_FAILED };
enum { R_PARENT, R_CREATE, R_LIST, R_GET, R_EXISTS, R_DELETE, R_SYNC,
       R_SELF };

static void lock_list(zkl_lock *l);
static void lock_create(zkl_lock *l);
static void lock_delete(zkl_lock *l);
static void lock_watch_self(zkl_lock *l);
static void lock_release_locked(zkl_lock *l);

static const char *const *lock_markers(const zkl_lock *l) {
  switch (l->kind) {
  case ZKL_KIND_LEASE: return zkl_markers_lease;
  case ZKL_KIND_READ: case ZKL_KIND_WRITE: return zkl_markers_rw;
  default: return zkl_markers_mutex;
  }
}

static const char *lock_marker(const zkl_lock *l) {
  switch (l->kind) {
  case ZKL_KIND_LEASE: return "-lease-";
  case ZKL_KIND_READ: return "-__READ__";
  case ZKL_KIND_WRITE: return "-__WRIT__";
  default: return "-lock-";
  }
}

/* getrandom, or /dev/urandom where it is refused (old kernels, seccomp
 * filters answering ENOSYS or EPERM); 0 when neither gives bytes. */
static int lock_random(unsigned char *b, size_t len) {
  size_t got = 0;
  int fd;
  while (got < len) {
    ssize_t n = getrandom(b + got, len - got, 0);
    if (n > 0) got += (size_t)n;
    else if (n < 0 && errno != EINTR) break;
  }
  if (got == len) return 1;
  fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  while (got < len) {
    ssize_t n = read(fd, b + got, len - got);
    if (n > 0) got += (size_t)n;
    else if (!(n < 0 && errno == EINTR)) break;
  }
  close(fd);
  return got == len;
}

int zkl_uuid(char *out) {
  unsigned char b[16];
  if (!lock_random(b, sizeof b)) return 0;
  b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
  snprintf(out, 37,
           "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
           "%02x%02x%02x%02x%02x%02x",
           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
           b[11], b[12], b[13], b[14], b[15]);
  return 1;
}

char *zkl_join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s%s%s", strcmp(dir, "/") == 0 ? "" : dir, "/", name);
  return s;
}

int zkl_is_cut(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT;
}

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
  l->c = c;
  l->refs = 1;
  l->revoke_version = -1;
  l->self_armed = -1;
  l->kind = kind;
  l->max_leases = max_leases < 1 ? 1 : max_leases;
  l->state = L_IDLE;
  snprintf(name, sizeof name, "_c_%s%s", l->uuid, lock_marker(l));
  l->path = strdup(path);
  l->prefix = zkl_join(path, name);
  l->datalen = datalen;
  l->data = malloc(datalen > 0 ? (size_t)datalen : 1);
  l->ignore = ignore ? strdup(ignore) : NULL;
  if (!l->path || !l->prefix || !l->data || (ignore && !l->ignore)) {
    free(l->path); free(l->prefix); free(l->data); free(l->ignore); free(l);
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return NULL;
  }
  if (datalen > 0) memcpy(l->data, data, (size_t)datalen);
  pthread_mutex_lock(&c->mu);
  l->next = c->locks;
  if (c->locks) c->locks->prev = l;
  c->locks = l;
  c->refs++;
  pthread_mutex_unlock(&c->mu);
  return l;
}

void zkl_lock_unref(zkl_lock *l) {
  zkl_client *c = l->c;
  if (--l->refs > 0) return;
  if (l->prev) l->prev->next = l->next; else c->locks = l->next;
  if (l->next) l->next->prev = l->prev;
  free(l->path); free(l->prefix); free(l->data); free(l->ignore);
  free(l->node); free(l->watch);
  free(l);
}

/* Our node becomes `name` (a copy is kept) or none: replies and events
 * about the previous one no longer apply (self_gen). */
static void lock_set_node(zkl_lock *l, const char *name) {
  free(l->node);
  l->node = name ? strdup(name) : NULL;
  l->self_gen++;
  l->revoke_version = -1;
}

static void lock_set_watch(zkl_lock *l, char *path) {
  free(l->watch);
  l->watch = path;
}

/* A hold ends without its owner's word: on_lost callbacks are queued. */
static void lock_lost_event(zkl_lock *l) {
  if (l->lost) return;
  l->lost = 1;
  if (l->node) {
    char *full = zkl_join(l->path, l->node);
    if (full) zkl_event_push(l->c, ZKL_EV_LOST, full);
    free(full);
  }
  l->c->n_lost++;
}

/* The lock can no longer be had: finish as DONE when it was given up, as
 * FAILED with err otherwise. */
static void lock_finish(zkl_lock *l, int rc, const char *what) {
  l->epoch++;
  if (l->state == L_HELD) l->lost = 1; /* (callers said why, or closed) */
  if (l->abandon) {
    l->state = L_DONE;
  } else {
    l->state = L_FAILED;
    /* a dead session says best why: "session expired", "client is closed" */
    if (!(rc == ZCLOSING || rc == ZINVALIDSTATE || rc == ZMARSHALLINGERROR ||
          rc == ZSESSIONEXPIRED) ||
        zkl_client_usable(l->c, &l->err))
      zkl_seterr_rc(&l->err, rc, what);
  }
  lock_set_watch(l, NULL); /* only now: `what` may be l->watch */
  zkl_client_touch(l->c, l->wake_id);
  zkl_client_changed(l->c);
  if (l->selfref) { /* nothing left to finish: let go (callers hold a ref
                       of their own, or touch l no more) */
    l->selfref = 0;
    zkl_lock_unref(l);
  }
}

/* A request could not be sent, or its reply says the connection was cut:
 * redo the current phase once connected again; anything else ends it. */
static void lock_trouble(zkl_lock *l, int rc, const char *what_) {
  char what[256]; /* what_ may be l->node or l->watch, freed below */
  snprintf(what, sizeof what, "%s", what_ ? what_ : "");
  if (zkl_is_cut(rc)) {
    l->redo = 1;
    return;
  }
  if (rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZINVALIDSTATE ||
      rc == ZMARSHALLINGERROR) {
    /* the session is gone, and our node with it */
    lock_set_node(l, NULL);
  }
  lock_finish(l, rc, what);
}

static zkl_req *lock_req(zkl_lock *l, int kind) {
  return zkl_req_new(l->c, l, NULL, l->epoch, kind);
}

/* rc of the send; r NULL: it could not be allocated (rc is then ignored:
 * callers send only with an r, `r ? zoo_a...(..., r) : ZSYSTEMERROR`). */
static int lock_sent(zkl_lock *l, zkl_req *r, int rc, const char *what) {
  if (r && rc == ZOK) return 1;
  if (r) zkl_req_done(r);
  if (!r) { lock_finish(l, ZSYSTEMERROR, "(out of memory)"); return 0; }
  lock_trouble(l, rc, what);
  return 0;
}

/* ---- completions -------------------------------------------------------- */

static zkl_lock *lock_enter(const void *data, int rc, zkl_req **rp) {
  zkl_req *r = (zkl_req *)data;
  pthread_mutex_lock(&r->c->mu);
  zkl_client_heard(r->c, r->sent, rc);
  *rp = r;
  return r->l->epoch == r->epoch ? r->l : NULL;
}

static void lock_leave(zkl_req *r) {
  zkl_client *c = r->c;
  zkl_client_touch(c, r->l->wake_id);
  zkl_req_done(r);
  zkl_client_changed(c); /* whatever moved, waiters look again */
  pthread_mutex_unlock(&c->mu);
}

static void lock_parent_cb(int rc, const char *value, const void *data) {
  zkl_req *r;
  zkl_lock *l = lock_enter(data, rc, &r);
  (void)value;
  if (l && l->state == L_PARENTS) {
    if (rc != ZOK && rc != ZNODEEXISTS && l->parents_rc == ZOK)
      l->parents_rc = rc;
    if (--l->parents_left == 0) {
      if (l->parents_rc == ZOK) {
        lock_create(l);
      } else if (l->parents_rc == ZNONODE) {
        lock_finish(l, ZNONODE, "(the chroot of the connect string must "
                    "exist)");
      } else {
        lock_trouble(l, l->parents_rc, l->path);
      }
    }
  }
  lock_leave(r);
}

static void lock_parents(zkl_lock *l) {
  char *p = strdup(l->path), *s;
  if (!p) { lock_finish(l, ZSYSTEMERROR, "out of memory"); return; }
  l->epoch++;
  l->state = L_PARENTS;
  l->parents_left = 0;
  l->parents_rc = ZOK;
  /* "/a", "/a/b", ... "/a/b/c": answered in order on one session */
  for (s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
    zkl_req *r;
    int rc;
    if (s) *s = '\0';
    r = lock_req(l, R_PARENT);
    rc = r ? zoo_acreate(l->c->zh, p, NULL, -1, &l->c->acl, ZOO_CONTAINER,
                         lock_parent_cb, r) : ZSYSTEMERROR;
    if (!lock_sent(l, r, rc, p)) break;
    l->parents_left++;
    if (!s) break;
    *s = '/';
  }
  free(p);
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
      if (!l->node) lock_finish(l, ZSYSTEMERROR, "(out of memory)");
      else if (l->abandon) lock_delete(l);
      else if (!l->list_piped) lock_list(l);
      /* (the self watch is sent once the listing is read: lock_evaluate) */
    } else if (rc == ZNONODE && !l->abandon) {
      lock_parents(l);
    } else if (zkl_is_cut(rc)) {
      /* the server may have applied it: find out once reconnected */
      l->state = L_RECOVER;
      l->redo = 1;
      if (l->c->state == ZKL_CONNECTED) lock_list(l);
    } else {
      lock_finish(l, rc, l->path);
    }
  }
  lock_leave(r);
}

static void lock_create(zkl_lock *l) {
  zkl_req *r;
  int rc;
  l->epoch++;
  l->state = L_CREATING;
  l->redo = 0;
  l->list_piped = 0;
  r = lock_req(l, R_CREATE);
  rc = r ? zoo_acreate2(l->c->zh, l->prefix, l->data, l->datalen, &l->c->acl,
                        ZOO_EPHEMERAL | ZOO_SEQUENCE, lock_create_cb, r)
         : ZSYSTEMERROR;
  if (!lock_sent(l, r, rc, l->path)) return;
  l->create_out = 1;
  /* the listing rides right behind the create: one round trip */
  lock_list(l);
}

/* Which node must go before we hold: NULL when we hold now. */
static const zkl_entry *lock_blocker(const zkl_lock *l, const zkl_entry *e,
                                     int idx) {
  int j;
  switch (l->kind) {
  case ZKL_KIND_READ:
    if (l->ignore && zkl_names_find(e, idx, l->ignore) >= 0)
      return NULL; /* we hold the write lock: reading is ours at once */
    for (j = idx - 1; j >= 0; j--)  /* nearest writer before us, but not */
      if (e[j].which == 1 &&        /* our own (the write holder reads) */
          !(l->ignore && strcmp(e[j].name, l->ignore) == 0))
        return &e[j];
    return NULL;
  case ZKL_KIND_WRITE:
    return idx == 0 ? NULL : &e[idx - 1];
  default:
    return idx < l->max_leases ? NULL : &e[idx - l->max_leases];
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
      lock_list(l); /* gone already */
    } else {
      lock_trouble(l, rc, l->watch);
    }
  }
  lock_leave(r);
}

/* Revocation (Curator Revoker): a revoker sets our node's data to
 * "__REVOKE__"; the self watch reads it and queues an event. */
static const char REVOKE[] = "__REVOKE__";

/* Our node is gone, and we did not delete it: a hold is lost (as on an
 * expiry); a queued attempt queues again with a new node (within the
 * caller's deadline).  (docs/recipes.md, "someone else deletes a node") */
static void lock_node_gone(zkl_lock *l) {
  if (l->state == L_HELD) {
    lock_lost_event(l);
    lock_set_node(l, NULL);
    lock_release_locked(l);
  } else if (l->state == L_LISTING || l->state == L_WATCHING) {
    lock_list(l); /* finds it missing: creates anew */
  }
}

/* The reply to the self watch's get: our node's data, or its absence. */
static void lock_self_cb(int rc, const char *v, int vlen,
                         const struct Stat *st, const void *data) {
  zkl_req *r = (zkl_req *)data;
  zkl_client *c = r->c; /* (read before r is freed) */
  zkl_lock *l = r->l;
  int news = 0; /* anything a waiter must look at? (mostly not: then
                   nobody is woken, which keeps the cycle at the floor) */
  pthread_mutex_lock(&c->mu);
  zkl_client_heard(c, r->sent, rc);
  if (r->epoch == l->self_gen && l->node) {
    if (rc == ZOK) {
      /* once per request: a re-read (reconnect) of the same data version
       * is not a new one */
      if (l->state == L_HELD && l->revocable && v && st &&
          st->version != l->revoke_version &&
          vlen == (int)sizeof REVOKE - 1 &&
          memcmp(v, REVOKE, sizeof REVOKE - 1) == 0) {
        char *full = zkl_join(l->path, l->node);
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
  if (news) zkl_client_touch(c, l->wake_id);
  zkl_req_done(r);
  if (news) zkl_client_changed(c);
  pthread_mutex_unlock(&c->mu);
}

/* Get-with-watch on our own node (dedupes with one already set: one watch
 * per session and path on the server). */
static void lock_watch_self(zkl_lock *l) {
  zkl_req *r;
  char *full;
  int rc;
  if (!l->node || !zkl_client_usable(l->c, NULL)) return;
  full = zkl_join(l->path, l->node);
  r = full ? zkl_req_new(l->c, l, NULL, l->self_gen, R_SELF) : NULL;
  rc = r ? zoo_aget(l->c->zh, full, 1, lock_self_cb, r) : ZSYSTEMERROR;
  free(full);
  if (rc != ZOK && r) zkl_req_done(r); /* (cut: again on reconnect) */
  else if (rc == ZOK) l->self_armed = l->self_gen;
}

void zkl_lock_revocable(zkl_lock *l) {
  pthread_mutex_lock(&l->c->mu);
  if (!l->revocable) {
    l->revocable = 1;
    if (l->state == L_HELD) lock_watch_self(l); /* read the data now */
  }
  pthread_mutex_unlock(&l->c->mu);
}

char *zkl_lock_nodepath(zkl_lock *l) {
  return l->node ? zkl_join(l->path, l->node) : NULL;
}

static void lock_evaluate(zkl_lock *l, const struct String_vector *sv) {
  zkl_entry *e = malloc(sizeof *e * (size_t)(sv->count > 0 ? sv->count : 1));
  const zkl_entry *b;
  int n, idx;
  if (!e) { lock_finish(l, ZSYSTEMERROR, "out of memory"); return; }
  n = zkl_names_sort(sv->data, sv->count, lock_markers(l), e);
  idx = zkl_names_find(e, n, l->node);
  if (idx < 0) {
    /* someone deleted our queued node: queue again, behind everyone */
    free(e);
    lock_set_node(l, NULL);
    if (l->abandon) lock_finish(l, ZOK, NULL); else lock_create(l);
    return;
  }
  b = lock_blocker(l, e, idx);
  if (!b) {
    l->state = L_HELD;
    lock_set_watch(l, NULL);
    zkl_client_kick(l->c); /* probes and the lost deadline start */
    /* the acquirer may go on now; the self watch is sent after that wake-
     * up (nothing is lost meanwhile: a node deleted before the watch is
     * set answers the get with "no node") */
    zkl_client_touch(l->c, l->wake_id);
    zkl_client_changed(l->c);
    /* (not sent yet for this node, or revocable: its data is read again) */
    if (l->self_gen != l->self_armed || l->revocable) lock_watch_self(l);
  } else {
    zkl_req *r;
    int rc;
    lock_set_watch(l, zkl_join(l->path, b->name));
    l->state = L_WATCHING;
    if (l->self_gen != l->self_armed) lock_watch_self(l);
    r = lock_req(l, R_GET);
    rc = r ? zoo_aget(l->c->zh, l->watch, 1, lock_get_cb, r) : ZSYSTEMERROR;
    lock_sent(l, r, rc, l->watch);
  }
  free(e);
}

static void lock_exists_cb(int rc, const struct Stat *st, const void *data) {
  zkl_req *r;
  zkl_lock *l = lock_enter(data, rc, &r);
  if (l && l->state == L_RECOVER) {
    if (rc == ZOK && st->ephemeralOwner == l->c->session_id) {
      l->czxid = st->czxid; /* ours: adopt it */
      l->session = st->ephemeralOwner;
      l->state = L_LISTING;
      if (l->abandon) lock_delete(l);
      else lock_list(l); /* (the self watch follows the listing) */
    } else if (rc == ZOK || rc == ZNONODE) {
      lock_set_node(l, NULL); /* not ours (an older session's) or gone */
      if (l->abandon) lock_finish(l, ZOK, NULL); else lock_create(l);
    } else {
      lock_trouble(l, rc, l->node);
    }
  }
  lock_leave(r);
}

static void lock_recovered(zkl_lock *l, const struct String_vector *sv) {
  int i;
  for (i = 0; i < sv->count; i++) {
    if (strstr(sv->data[i], l->uuid)) {
      zkl_req *r;
      char *full = zkl_join(l->path, sv->data[i]);
      int rc;
      lock_set_node(l, sv->data[i]);
      l->epoch++;
      r = full && l->node ? lock_req(l, R_EXISTS) : NULL;
      rc = r ? zoo_aexists(l->c->zh, full, 0, lock_exists_cb, r)
             : ZSYSTEMERROR;
      free(full);
      lock_sent(l, r, rc, l->path);
      return;
    }
  }
  if (l->abandon) lock_finish(l, ZOK, NULL); else lock_create(l);
}

static void lock_list_cb(int rc, const struct String_vector *sv,
                         const void *data) {
  zkl_req *r;
  zkl_lock *l = lock_enter(data, rc, &r);
  /* (the listing piped behind a create is answered after it: by then the
   * create's reply moved us to LISTING, or to a newer epoch) */
  if (l && (l->state == L_LISTING || l->state == L_RECOVER)) {
    if (rc == ZOK && l->state == L_RECOVER) lock_recovered(l, sv);
    else if (rc == ZOK) lock_evaluate(l, sv);
    else if (rc == ZNONODE && l->state == L_RECOVER) /* nothing was made */
      l->abandon ? lock_finish(l, ZOK, NULL) : lock_create(l);
    else if (rc == ZNONODE) lock_finish(l, rc, l->path);
    else lock_trouble(l, rc, l->path);
  }
  lock_leave(r);
}

static void lock_sync_cb(int rc, const char *value, const void *data) {
  zkl_req *r;
  (void)value;
  (void)lock_enter(data, rc, &r); /* the listing behind it says the rest */
  lock_leave(r);
}

static void lock_list(zkl_lock *l) {
  zkl_req *r;
  int rc;
  if (l->state != L_CREATING) {
    l->epoch++;
    if (l->state != L_RECOVER) l->state = L_LISTING;
  }
  l->redo = 0;
  if (l->state == L_RECOVER) {
    /* The cut create may have been applied without this server knowing
     * yet (an ensemble member behind the leader): a sync first, and the
     * listing, answered after it, shows it.  (The session moved to this
     * server before we got CONNECTED: the leader refuses requests still in
     * flight from the old connection, so none lands after the listing.) */
    r = lock_req(l, R_SYNC);
    if (!r) { lock_finish(l, ZSYSTEMERROR, "out of memory"); return; }
    rc = zoo_async(l->c->zh, l->path, lock_sync_cb, r);
    if (!lock_sent(l, r, rc, l->path)) return;
  }
  r = lock_req(l, R_LIST);
  rc = r ? zoo_aget_children(l->c->zh, l->path, 0, lock_list_cb, r)
         : ZSYSTEMERROR;
  if (lock_sent(l, r, rc, l->path) && l->state == L_CREATING)
    l->list_piped = 1;
}

static void lock_delete_cb(int rc, const void *data) {
  zkl_req *r;
  zkl_lock *l = lock_enter(data, rc, &r);
  if (l && l->state == L_DELETING) {
    if (rc == ZOK || rc == ZNONODE || rc == ZSESSIONEXPIRED ||
        rc == ZCLOSING || rc == ZINVALIDSTATE) {
      lock_set_node(l, NULL);
      lock_finish(l, ZOK, NULL);
    } else if (zkl_is_cut(rc)) {
      l->redo = 1;
    } else {
      lock_finish(l, ZOK, NULL); /* e.g. no auth to delete: nothing more */
    }
  }
  lock_leave(r);
}

static void lock_delete(zkl_lock *l) {
  zkl_req *r;
  char *full;
  int rc;
  if (!l->node) { lock_finish(l, ZOK, NULL); return; }
  if (!zkl_client_usable(l->c, NULL)) {
    lock_finish(l, ZOK, NULL); /* the node goes with the session */
    return;
  }
  l->epoch++;
  l->state = L_DELETING;
  l->redo = 0;
  lock_set_watch(l, NULL);
  full = zkl_join(l->path, l->node);
  r = full ? lock_req(l, R_DELETE) : NULL;
  rc = r ? zoo_adelete(l->c->zh, full, -1, lock_delete_cb, r) : ZSYSTEMERROR;
  free(full);
  if (rc != ZOK) {
    if (r) zkl_req_done(r);
    if (zkl_is_cut(rc)) l->redo = 1;
    else lock_finish(l, ZOK, NULL);
  }
}

/* ---- hooks from the session watcher ------------------------------------ */

void zkl_lock_on_connected(zkl_lock *l) {
  switch (l->state) {
  case L_PARENTS: if (l->redo) lock_parents(l); break;
  case L_CREATING: if (l->redo && !l->create_out) lock_create(l); break;
  case L_LISTING: case L_WATCHING:
    lock_watch_self(l); /* (the last one may have been cut unsent) */
    /* fall through */
  case L_RECOVER:
    /* watches survive a reconnect, but a fresh listing costs one request
     * and covers anything missed */
    lock_list(l);
    break;
  case L_DELETING: if (l->redo) lock_delete(l); break;
  case L_HELD: lock_watch_self(l); break; /* still there? (and revoked?) */
  default: break;
  }
}

void zkl_lock_on_expired(zkl_lock *l) {
  if (l->state == L_IDLE || l->state == L_DONE || l->state == L_FAILED)
    return;
  if (l->state == L_HELD) lock_lost_event(l);
  lock_set_node(l, NULL);
  l->create_out = 0;
  lock_finish(l, ZSESSIONEXPIRED, NULL);
}

/* Returns 3 when the event was about the node we wait for, 2 when about
 * our own node and it moved us, 1 when about our own node but nothing
 * follows (our own deletion), else 0. */
int zkl_lock_on_watch(zkl_lock *l, int type, const char *path) {
  size_t n;
  if (l->watch && strcmp(l->watch, path) == 0) {
    /* deleted, or changed (which used the watch up): look again */
    if (l->state == L_WATCHING) lock_list(l);
    return 3;
  }
  /* our node: path == l->path + "/" + l->node */
  n = strlen(l->path);
  if (!l->node || strncmp(path, l->path, n) != 0 || path[n] != '/' ||
      strcmp(path + n + 1, l->node) != 0)
    return 0;
  if (l->state != L_HELD && l->state != L_LISTING && l->state != L_WATCHING)
    return 1; /* (our own delete, or a reply on its way says the rest) */
  if (type == ZOO_DELETED_EVENT) lock_node_gone(l);
  else if (type == ZOO_CHANGED_EVENT) lock_watch_self(l); /* read, re-arm */
  return 2;
}

void zkl_lock_on_closed(zkl_lock *l) {
  if (l->state == L_DONE || l->state == L_FAILED || l->state == L_IDLE) {
    if (l->selfref) { l->selfref = 0; zkl_lock_unref(l); }
    return;
  }
  lock_set_node(l, NULL);
  lock_finish(l, ZCLOSING, NULL);
}

void zkl_lock_closing(zkl_req *r) {
  zkl_lock *l = r->l;
  if (r->kind == R_SELF) return; /* (tagged with self_gen, not epoch) */
  if (l->epoch == r->epoch &&
      l->state != L_DONE && l->state != L_FAILED) {
    lock_set_node(l, NULL);
    lock_finish(l, ZCLOSING, NULL);
  }
}

/* ---- the Lua thread's side ---------------------------------------------- */

int zkl_lock_start(zkl_lock *l, zkl_error *err) {
  zkl_client *c = l->c;
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
static int lock_held_now(zkl_lock *l) {
  zkl_client *c = l->c;
  if (l->state != L_HELD || l->lost) return 0;
  if (c->state != ZKL_CONNECTED && c->state != ZKL_CONNECTING) return 0;
  return zkl_bootnow() < zkl_client_expiry(c) - zkl_client_margin(c);
}

int zkl_lock_poll(zkl_lock *l, unsigned long *gen, zkl_error *err) {
  int st;
  pthread_mutex_lock(&l->c->mu);
  if (gen) *gen = l->c->gen;
  switch (l->state) {
  case L_HELD: st = ZKL_HELD; break;
  case L_DONE: st = ZKL_DONE; break;
  case L_WATCHING: st = ZKL_WAITING; break;
  case L_FAILED: st = ZKL_FAILED;
    if (err) *err = l->err;
    break;
  default: st = ZKL_PENDING; break;
  }
  pthread_mutex_unlock(&l->c->mu);
  return st;
}

int zkl_lock_held(zkl_lock *l) {
  int held;
  pthread_mutex_lock(&l->c->mu);
  held = lock_held_now(l);
  pthread_mutex_unlock(&l->c->mu);
  return held;
}

static void lock_release_locked(zkl_lock *l) {
  l->abandon = 1;
  switch (l->state) {
  case L_IDLE: case L_PARENTS: lock_finish(l, ZOK, NULL); return;
  case L_CREATING: if (!l->create_out) lock_delete(l); break;
  case L_RECOVER: break; /* finds our node, then deletes it */
  case L_LISTING: case L_WATCHING: case L_HELD: lock_delete(l); break;
  case L_FAILED: /* e.g. no auth to watch: our node may still be there */
    if (l->node && zkl_client_usable(l->c, NULL)) lock_delete(l);
    break;
  default: break;
  }
  /* work left (a reply to come, a reconnect to wait for): the attempt
   * must outlive its Lua box until the node is gone */
  if (l->state != L_DONE && l->state != L_FAILED && !l->selfref) {
    l->selfref = 1;
    l->refs++;
  }
}

int zkl_lock_check_lost(zkl_lock *l, double now, double deadline) {
  if (l->state != L_HELD || l->lost) return 0;
  if (now < deadline) return 1;
  /* the server may have expired us: the hold is over, whatever comes; if
   * the session lives after all, our node must not outlive our belief */
  lock_lost_event(l);
  lock_release_locked(l); /* (Lua reports "lock_lost": held() is false) */
  zkl_client_touch(l->c, l->wake_id);
  zkl_client_changed(l->c);
  return 0;
}

void zkl_lock_release(zkl_lock *l) {
  pthread_mutex_lock(&l->c->mu);
  lock_release_locked(l);
  pthread_mutex_unlock(&l->c->mu);
}

void zkl_lock_drop(zkl_lock *l) {
  zkl_client *c = l->c;
  pthread_mutex_lock(&c->mu);
  lock_release_locked(l);
  zkl_lock_unref(l);
  pthread_mutex_unlock(&c->mu);
  zkl_client_unref(c);
}
