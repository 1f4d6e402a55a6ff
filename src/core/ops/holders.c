/* Who holds a lock (or who is in its queue), with what each node says:
 * the participant id its creator wrote, its czxid (the holder's fencing
 * token) and the session that owns it.  One listing, then a get of every
 * chosen node, all sent at once behind it: one round trip more.
 *
 *   LIST (the directory) -> GETS (one per chosen node) -> done
 *
 * With `sync` (zklock.check_token: docs/api.md, "Tokens for outside
 * resources"), a sync goes right before the listing, pipelined: the
 * server answers a session's requests in order, so the listing is served
 * once the member has caught up with the leader as of the sync.  Without
 * it, a member behind the leader could list a holder whose node the
 * leader has already deleted, and call a stale token current.
 *
 * A node gone between the listing and its get left meanwhile: it is left
 * out.  A cut connection starts again from the listing once reconnected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"

enum { H_LIST = ZKL_STAGE_MAIN, H_GETS = ZKL_STAGE_OWN };

typedef struct {
  zkl_op op;
  int family, max_leases, which, all, sync;
  int left;           /* gets still to answer */
  zkl_holder *h;      /* the chosen nodes, in order */
  int n;
} holders_op;

#define HOLDERS(op) ((holders_op *)(op))

static void holders_clear(holders_op *o) {
  int i;
  for (i = 0; i < o->n; i++) { free(o->h[i].node); free(o->h[i].data); }
  free(o->h);
  o->h = NULL;
  o->n = 0;
}

static void holders_get_cb(int rc, const char *v, int vlen,
                           const struct Stat *st, const void *data) {
  zkl_req *r;
  zkl_op *op = (zkl_op *)zkl_task_enter(data, rc, &r);
  holders_op *o = HOLDERS(op);
  if (op && op->stage == H_GETS) {
    zkl_holder *h = &o->h[r->kind];
    if (zkl_is_cut(rc)) {
      op->stage = H_LIST; /* (from the listing again, once reconnected) */
      op->t.redo = 1;
    } else if (rc == ZOK) {
      h->present = 1;
      h->czxid = st->czxid;
      h->session = st->ephemeralOwner;
      h->datalen = vlen > 0 ? vlen : 0;
      if (h->datalen && (h->data = malloc((size_t)h->datalen)))
        memcpy(h->data, v, (size_t)h->datalen);
      else h->datalen = 0;
    } else if (rc != ZNONODE) {
      zkl_op_finish(op, rc, h->node);
    }
    if (!op->done && !op->t.redo && --o->left == 0)
      zkl_op_finish(op, ZOK, NULL);
  }
  zkl_task_leave(r);
}

/* the chosen nodes of a listing: holders (of one kind), or every one */
static int holders_choose(holders_op *o, const struct String_vector *sv) {
  const char *dir = o->op.t.path;
  zkl_entry *e = malloc(sizeof *e * (size_t)(sv->count + 1));
  int *idx = malloc(sizeof *idx * (size_t)(sv->count + 1));
  int i, k = 0, n;
  if (!e || !idx) { free(e); free(idx); return 0; }
  n = zkl_names_sort(sv->data, sv->count, zkl_markers(o->family), e);
  if (o->all) {
    for (i = 0; i < n; i++) idx[k++] = i;
  } else {
    k = zkl_names_holders(o->family, o->max_leases, e, n, idx);
  }
  o->h = calloc((size_t)k + 1, sizeof *o->h);
  for (i = 0; o->h && i < k; i++) {
    if (o->which >= 0 && e[idx[i]].which != o->which) continue;
    if (!(o->h[o->n].node = zkl_join(dir, e[idx[i]].name))) break;
    o->n++;
  }
  free(e);
  free(idx);
  return o->h && i == k;
}

static void holders_list_cb(int rc, const struct String_vector *sv,
                            const void *data) {
  zkl_req *r;
  zkl_op *op = (zkl_op *)zkl_task_enter(data, rc, &r);
  if (op) {
    holders_op *o = HOLDERS(op);
    holders_clear(o);
    if (rc == ZNONODE) zkl_op_finish(op, ZOK, NULL); /* nobody there */
    else if (rc != ZOK) zkl_task_trouble(&op->t, rc, op->t.path);
    else if (!holders_choose(o, sv))
      zkl_op_finish(op, ZSYSTEMERROR, "out of memory");
    else if (o->n == 0) zkl_op_finish(op, ZOK, NULL);
    else zkl_op_goto(op, H_GETS);
  }
  zkl_task_leave(r);
}

static void holders_sync_cb(int rc, const char *value, const void *data) {
  zkl_req *r;
  (void)value;
  (void)zkl_task_enter(data, rc, &r); /* the listing behind it says the rest */
  zkl_task_leave(r);
}

static void holders_step(zkl_op *op) {
  holders_op *o = HOLDERS(op);
  int i;
  if (op->stage == H_LIST) {
    zkl_req *r;
    if (o->sync) {
      r = zkl_task_req(&op->t, 0);
      if (!zkl_task_sent(&op->t, r, r ? zoo_async(op->t.c->zh, op->t.path,
                                                   holders_sync_cb, r) : 0,
                         op->t.path))
        return;
    }
    r = zkl_task_req(&op->t, 0);
    zkl_op_sent(op, r, r ? zoo_aget_children(op->t.c->zh, op->t.path, 0,
                                             holders_list_cb, r) : 0,
                op->t.path);
    return;
  }
  o->left = 0;
  for (i = 0; i < o->n; i++) {
    zkl_req *r = zkl_task_req(&op->t, i);
    int rc = r ? zoo_aget(op->t.c->zh, o->h[i].node, 0, holders_get_cb, r)
               : ZSYSTEMERROR;
    if (r && rc == ZOK) { o->left++; continue; }
    zkl_op_sent(op, r, rc, op->t.path); /* (cut: redo; else finished) */
    break;
  }
  if (op->t.redo) op->stage = H_LIST; /* (answers sent so far: ignored) */
}

static void holders_free(zkl_op *op) { holders_clear(HOLDERS(op)); }

static const zkl_op_class holders_class = {
  ZKL_OP_TASK_CLASS("holders", zkl_op_task_finish), ZKL_OP_HOLDERS,
  holders_step, -1, ZKL_STAGE_MAIN, NULL, NULL, holders_free
};

zkl_op *zkl_op_holders(zkl_client *c, const char *dir, int family,
                       int max_leases, int which, int all, int sync,
                       zkl_error *err) {
  holders_op *o = (holders_op *)zkl_op_new(sizeof *o, &holders_class, c, dir,
                                           NULL, 0, err);
  if (!o) return NULL;
  o->family = family;
  o->max_leases = max_leases < 1 ? 1 : max_leases;
  o->which = which;
  o->all = all;
  o->sync = sync;
  return zkl_op_start(&o->op, err);
}

int zkl_op_take_holders(zkl_op *op, zkl_holder **h, int *n, zkl_error *err) {
  holders_op *o = HOLDERS(op);
  int done;
  pthread_mutex_lock(&op->t.c->mu);
  done = op->done;
  *err = op->t.err;
  *h = NULL;
  *n = 0;
  if (done && err->code == ZKL_OK) {
    *h = o->h;
    *n = o->n;
    o->h = NULL;
    o->n = 0;
  }
  pthread_mutex_unlock(&op->t.c->mu);
  if (!done) zkl_seterr(err, ZKL_ETIMEOUT, "not done");
  return done && err->code == ZKL_OK;
}

void zkl_holders_free(zkl_holder *h, int n) {
  int i;
  for (i = 0; h && i < n; i++) { free(h[i].node); free(h[i].data); }
  free(h);
}
