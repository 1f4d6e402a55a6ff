/* One-shot requests whose result Lua polls for: the sorted contenders of a
 * lock path (participants()).  Runs with the client's mutex held, like
 * lock.c, except where noted. */
#include <stdlib.h>
#include <string.h>

#include "zkl.h"

static void op_free_names(zkl_op *op) {
  int i;
  for (i = 0; i < op->n; i++) free(op->names[i]);
  free(op->names);
  op->names = NULL;
  op->n = 0;
}

void zkl_op_unref(zkl_op *op) {
  if (--op->refs > 0) return;
  op_free_names(op);
  free(op);
}

static void op_finish(zkl_op *op, int rc, const char *what) {
  op->done = 1;
  if (rc != ZOK && zkl_client_usable(op->c, &op->err))
    zkl_seterr_rc(&op->err, rc, what);
  else if (rc == ZOK)
    op->err.code = ZKL_OK;
  zkl_client_changed(op->c);
}

void zkl_op_closing(zkl_req *r) {
  if (!r->op->done) op_finish(r->op, ZCLOSING, NULL);
}

static void op_children_cb(int rc, const struct String_vector *sv,
                           const void *data) {
  zkl_req *r = (zkl_req *)data;
  zkl_client *c = r->c;
  zkl_op *op = r->op;
  pthread_mutex_lock(&c->mu);
  if (!op->done) {
    if (rc == ZOK) {
      zkl_entry *e = malloc(sizeof *e * (size_t)(sv->count + 1));
      int i, n = 0;
      if (e && op->markers) {
        n = zkl_names_sort(sv->data, sv->count, op->markers, e);
      } else if (e) { /* every child */
        for (n = 0; n < sv->count; n++) e[n].name = sv->data[n];
      }
      op->names = calloc((size_t)n + 1, sizeof *op->names);
      for (i = 0; op->names && i < n; i++) {
        op->names[i] = strdup(e[i].name);
        if (op->names[i]) op->n++;
      }
      free(e);
      op_finish(op, rc, NULL);
    } else if (rc == ZNONODE) {
      op_finish(op, ZOK, NULL); /* no lock path yet: nobody contends */
    } else {
      op_finish(op, rc, NULL);
    }
  }
  zkl_req_done(r);
  pthread_mutex_unlock(&c->mu);
}

/* From the Lua thread. */
zkl_op *zkl_op_children(zkl_client *c, const char *path,
                        const char *const *markers, zkl_error *err) {
  zkl_op *op = calloc(1, sizeof *op);
  zkl_req *r;
  int rc;
  if (!op) { zkl_seterr(err, ZKL_EZK_ERROR, "out of memory"); return NULL; }
  op->c = c;
  op->refs = 1;
  op->kind = ZKL_OP_CHILDREN;
  op->markers = markers;
  pthread_mutex_lock(&c->mu);
  if (!zkl_client_usable(c, err)) {
    pthread_mutex_unlock(&c->mu);
    free(op);
    return NULL;
  }
  c->refs++;
  r = zkl_req_new(c, NULL, op, 0, ZKL_OP_CHILDREN);
  rc = r ? zoo_aget_children(c->zh, path, 0, op_children_cb, r) : ZSYSTEMERROR;
  if (rc != ZOK) {
    if (r) zkl_req_done(r);
    op_finish(op, rc, path);
  }
  pthread_mutex_unlock(&c->mu);
  return op;
}

/* From the Lua thread: 1 when done (err set on failure), 0 while pending. */
int zkl_op_poll(zkl_op *op, unsigned long *gen) {
  int done;
  pthread_mutex_lock(&op->c->mu);
  if (gen) *gen = op->c->gen;
  done = op->done;
  pthread_mutex_unlock(&op->c->mu);
  return done;
}

/* From the Lua thread: the box is collected. */
void zkl_op_drop(zkl_op *op) {
  zkl_client *c = op->c;
  pthread_mutex_lock(&c->mu);
  zkl_op_unref(op);
  pthread_mutex_unlock(&c->mu);
  zkl_client_unref(c);
}
