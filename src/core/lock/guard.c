/* The guarded node (docs/design.md, section 4.12): read with the
 * acquire, a get riding right behind the listing that makes us holder;
 * written with the release, one multi-op that sets or creates it
 * (set-or-create: util.c) and deletes our node, so a write lands only
 * while we hold, and a cut in flight means "may have been applied".
 *
 *   read:  sent behind the listing (or at the hold) -> rpending -> told
 *   write: DELETING (multi) --missing--> create --no parent--> PARENTS
 *          --> multi again; refused: not written, our node goes plainly
 *
 * The completions run with the client's mutex held; the zkl_attempt_*
 * functions at the end are the Lua thread's, and take it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attempt.h"

/* ---- the guarded node: read with the acquire ---------------------------- */

static void guard_read_cb(int rc, const char *v, int vlen,
                         const struct Stat *st, const void *data) {
  zkl_req *r;
  zkl_attempt *l = ATTEMPT(zkl_task_enter(data, rc, &r));
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

void guard_read(zkl_attempt *l) {
  zkl_req *r = zkl_task_req(&l->t, R_READ);
  int rc = r ? zoo_aget(l->t.c->zh, l->g->rpath, 0, guard_read_cb, r)
             : ZSYSTEMERROR;
  if (zkl_task_sent(&l->t, r, rc, l->g->rpath)) l->g->rflight = l->t.epoch;
}

/* ---- the guarded node: written with the release ------------------------ */

/* The multi-op ended the hold: our node is gone, with the write or
 * without it (section 4.12). */
static void guard_write_end(zkl_attempt *l, int wrc) {
  l->g->wdone = 1;
  l->g->wrc = wrc;
  lock_set_node(l, NULL);
  lock_finish(&l->t, ZOK, NULL);
}

/* The write was refused: set-or-create goes on (next: zkl_write_next's
 * word), or not (0). */
static int guard_retry(zkl_attempt *l, int next) {
  lock_guard *g = l->g;
  if (next == ZKL_WRITE_FAIL) return 0;
  if (next == ZKL_WRITE_PARENTS) {
    g->wparents = 1; /* containers first, then the multi again */
    zkl_task_parents(&l->t, g->wpath, 0);
  } else {
    /* missing: create it; made by someone meanwhile: set it */
    g->wcreate = next == ZKL_WRITE_CREATE;
    guard_write(l);
  }
  return 1;
}

static void guard_write_cb(int rc, const void *data) {
  zkl_req *r;
  zkl_attempt *l = ATTEMPT(zkl_task_enter(data, rc, &r));
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
      guard_write_end(l, ZOK);
    } else if (derr == ZNONODE) {
      guard_write_end(l, ZNONODE); /* our node is gone: the hold was lost */
    } else if (guard_retry(l, zkl_write_next(werr, g->wcreate))) {
      /* (set-or-create goes on) */
    } else if (rc == ZSESSIONEXPIRED || rc == ZCLOSING ||
               rc == ZINVALIDSTATE) {
      /* the node goes with the session; a closing handle may have sent
       * the multi before it stopped: maybe applied */
      if (rc != ZSESSIONEXPIRED) g->wmaybe = 1;
      guard_write_end(l, rc);
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

void guard_write(zkl_attempt *l) {
  lock_guard *g = l->g;
  char *full;
  zkl_req *r;
  int rc;
  g->wparents = 0;
  if (!zkl_client_usable(l->t.c, NULL) || !zkl_zh_usable(l->t.c->zh)) {
    /* (a multi on a dead handle: the client frees paths it never set) */
    guard_write_end(l, ZINVALIDSTATE);
    return;
  }
  full = lock_nodepath(l);
  zkl_task_move(&l->t);
  l->state = L_DELETING;
  zkl_task_set_watch(&l->t, NULL);
  zkl_write_op_init(&g->mops[0], l->t.c, g->wpath, g->wdata, g->wlen,
                    g->wcreate, &g->wstat, g->wname, sizeof g->wname);
  if (full) zoo_delete_op_init(&g->mops[1], full, -1);
  memset(g->mres, 0, sizeof g->mres);
  r = full ? zkl_task_req(&l->t, R_WRITE) : NULL;
  rc = r ? zoo_amulti(l->t.c->zh, 2, g->mops, g->mres, guard_write_cb, r)
         : ZSYSTEMERROR;
  if (rc == ZOK) g->wsent = 1;
  /* (the multi copies the paths it sends: full may go) */
  free(full);
  if (rc != ZOK && !zkl_task_unsent(&l->t, r, rc)) {
    g->wdone = 1; /* not sent: not written; our node goes the plain way */
    g->wrc = rc;
    lock_delete(l);
  }
}

/* ---- the Lua thread's side ------------------------------------------- */

static lock_guard *guard_of(zkl_attempt *l) {
  if (!l->g) {
    l->g = calloc(1, sizeof *l->g);
    if (l->g) l->g->rflight = -1;
  }
  return l->g;
}

int zkl_attempt_read_with(zkl_attempt *l, const char *path, zkl_error *err) {
  lock_guard *g;
  int ok = 0;
  pthread_mutex_lock(&l->t.c->mu);
  if (l->state != L_IDLE) {
    zkl_seterr(err, ZKL_EZK_ERROR, "lock attempt already started");
  } else if (l->kind == ZKL_KIND_LEASE) {
    zkl_seterr(err, ZKL_EZK_ERROR, "a lease reads nothing with its acquire");
  } else if (!(g = guard_of(l)) || !(free(g->rpath), g->rpath =
                                              strdup(path))) {
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
  } else {
    ok = 1;
  }
  pthread_mutex_unlock(&l->t.c->mu);
  return ok;
}

int zkl_attempt_read_result(zkl_attempt *l, char *buf, int *len,
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

int zkl_attempt_release_write(zkl_attempt *l, const char *path,
                              const char *data, int len, zkl_error *err) {
  lock_guard *g;
  int ok = 0;
  pthread_mutex_lock(&l->t.c->mu);
  if (l->state != L_HELD || !lock_held_now(l) || !l->node) {
    zkl_seterr(err, ZKL_ELOCK_LOST, "lock lost: not written");
  } else if (!(g = guard_of(l)) ||
             !(free(g->wpath), g->wpath = strdup(path)) ||
             !(free(g->wdata), g->wdata = malloc(len > 0 ? (size_t)len : 1))) {
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
  } else {
    if (len > 0) memcpy(g->wdata, data, (size_t)len);
    g->wlen = len;
    g->wcreate = g->wmaybe = g->wdone = g->wsent = 0;
    l->abandon = 1;
    guard_write(l);
    if (l->state != L_DONE && l->state != L_FAILED) zkl_task_keep(&l->t);
    ok = 1;
  }
  pthread_mutex_unlock(&l->t.c->mu);
  return ok;
}

int zkl_attempt_write_result(zkl_attempt *l, int64_t *version,
                             int64_t *zxid, zkl_error *err) {
  int ok = 0;
  pthread_mutex_lock(&l->t.c->mu);
  if (!l->g || !l->g->wpath) {
    zkl_seterr(err, ZKL_EZK_ERROR, "no write with the release");
  } else if (l->g->wdone && l->g->wrc == ZOK) {
    *version = l->g->wversion;
    *zxid = l->g->wzxid;
    ok = 1;
  } else if (l->g->wmaybe || (!l->g->wdone && l->g->wsent)) {
    char buf[256];
    snprintf(buf, sizeof buf, "write of %s with the release", l->g->wpath);
    zkl_seterr_maybe(err, buf);
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
