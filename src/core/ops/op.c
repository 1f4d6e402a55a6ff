/* The base of every op: a one-shot task whose outcome Lua polls for
 * (oneshot.c, write.c, barrier.c, dbarrier.c, holders.c, signal.c build
 * on it).
 *
 * An op runs through stages of its own; each stage sends one request
 * (the class's step) and a completion moves it to the next stage or
 * finishes it.  ZKL_STAGE_PARENTS, shared, makes the missing parents of
 * a node and runs ZKL_STAGE_MAIN again.  A cut connection redoes the
 * current stage once reconnected; a watch event runs the class's
 * watch_stage.  Cancelled (a wait timed out) or dropped (its Lua box
 * collected), an op stops, except for work that must not be left undone
 * (a node of ours to delete), which keeps it alive until done.
 * Functions run with the client's mutex held unless they say "Lua
 * thread". */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"

/* ---- the session's side (class entries most ops share) ------------------ */

void zkl_op_finish(zkl_op *op, int rc, const char *what) {
  op->done = 1;
  zkl_task_seterr(&op->t, rc, what);
  zkl_task_settle(&op->t);
}

void zkl_op_task_finish(zkl_task *t, int rc, const char *what) {
  zkl_op_finish((zkl_op *)t, rc, what);
}

void zkl_op_goto(zkl_op *op, int stage) {
  zkl_task_move(&op->t);
  op->stage = stage;
  if (op->done) return;
  if (!zkl_client_usable(op->t.c, NULL)) {
    op->t.cls->finish(&op->t, ZINVALIDSTATE, NULL);
    return;
  }
  if (!zkl_client_checked(op->t.c)) {
    /* a session yet to find its chroot: "no node" would pass for an
     * outcome (a barrier gone, no holders); sent once it is found */
    op->t.redo = 1;
    return;
  }
  ZKL_OP_CLASS(op)->step(op);
}

void zkl_op_sent(zkl_op *op, zkl_req *r, int rc, const char *what) {
  zkl_task_sent(&op->t, r, r ? rc : ZSYSTEMERROR, what);
}

void zkl_op_parents(zkl_op *op, const char *target) {
  op->stage = ZKL_STAGE_PARENTS;
  zkl_task_parents(&op->t, target, 0);
}

void zkl_op_parents_made(zkl_task *t) {
  zkl_op *op = (zkl_op *)t;
  zkl_op_goto(op, ZKL_OP_CLASS(op)->parents_stage);
}

void zkl_op_on_connected(zkl_task *t) {
  zkl_op *op = (zkl_op *)t;
  if (op->done) return;
  if (t->redo || t->watch)
    zkl_op_goto(op, op->stage == ZKL_STAGE_PARENTS
                        ? ZKL_OP_CLASS(op)->parents_stage : op->stage);
}

void zkl_op_on_expired(zkl_task *t) {
  if (!((zkl_op *)t)->done) t->cls->finish(t, ZSESSIONEXPIRED, NULL);
}

int zkl_op_on_watch(zkl_task *t, int type, const char *path) {
  zkl_op *op = (zkl_op *)t;
  int stage = ZKL_OP_CLASS(op)->watch_stage;
  (void)type;
  if (!zkl_task_watches(t, path)) return ZKL_ABOUT_NONE;
  if (!op->done && !op->cancel) zkl_op_goto(op, stage < 0 ? op->stage : stage);
  return ZKL_ABOUT_WAITED;
}

void zkl_op_on_closing(zkl_task *t, zkl_req *r) {
  (void)r;
  if (!((zkl_op *)t)->done) t->cls->finish(t, ZCLOSING, NULL);
}

static void op_free_names(zkl_op *op) {
  int i;
  for (i = 0; i < op->n; i++) free(op->names[i]);
  free(op->names);
  op->names = NULL;
  op->n = 0;
}

void zkl_op_task_free(zkl_task *t) {
  zkl_op *op = (zkl_op *)t;
  if (ZKL_OP_CLASS(op)->free) ZKL_OP_CLASS(op)->free(op);
  op_free_names(op);
  free(op->data);
  free(op);
}

/* ---- the Lua thread's side ---------------------------------------------- */

zkl_op *zkl_op_new(size_t size, const zkl_op_class *cls, zkl_client *c,
                   const char *path, const char *data, int datalen,
                   zkl_error *err) {
  zkl_op *op = calloc(1, size);
  if (!op) {
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return NULL;
  }
  if (!zkl_task_init(&op->t, &cls->task, c, path, err)) {
    free(op);
    return NULL;
  }
  op->datalen = data ? datalen : -1;
  if (data && !(op->data = malloc(datalen > 0 ? (size_t)datalen : 1))) {
    free(op->t.path);
    free(op);
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return NULL;
  }
  if (data && datalen > 0) memcpy(op->data, data, (size_t)datalen);
  return op;
}

zkl_op *zkl_op_start(zkl_op *op, zkl_error *err) {
  zkl_client *c = op->t.c;
  pthread_mutex_lock(&c->mu);
  if (!zkl_client_usable(c, err)) {
    zkl_task_unref(&op->t); /* (not linked: frees it) */
    pthread_mutex_unlock(&c->mu);
    return NULL;
  }
  zkl_task_link(&op->t);
  zkl_op_goto(op, ZKL_STAGE_MAIN);
  pthread_mutex_unlock(&c->mu);
  return op;
}

zkl_client *zkl_op_client(const zkl_op *op) { return op->t.c; }

int zkl_op_kind(const zkl_op *op) { return ZKL_OP_CLASS(op)->kind; }

int zkl_op_poll(zkl_op *op, unsigned long *gen) {
  int done;
  pthread_mutex_lock(&op->t.c->mu);
  if (gen) *gen = op->t.c->gen;
  done = op->done;
  pthread_mutex_unlock(&op->t.c->mu);
  return done;
}

unsigned long zkl_op_set_wake(zkl_op *op, unsigned id) {
  return zkl_task_set_wake(&op->t, id);
}

void zkl_op_stop(zkl_op *op) {
  op->cancel = 1;
  zkl_task_set_watch(&op->t, NULL);
}

int zkl_op_cancel(zkl_op *op) {
  int cancelled = 0;
  pthread_mutex_lock(&op->t.c->mu);
  if (!op->done && !op->cancel) {
    cancelled = 1;
    zkl_op_stop(op);
    if (ZKL_OP_CLASS(op)->cancel) ZKL_OP_CLASS(op)->cancel(op);
    else op->t.cls->finish(&op->t, ZOK, NULL);
  }
  pthread_mutex_unlock(&op->t.c->mu);
  return cancelled;
}

void zkl_op_drop(zkl_op *op) {
  zkl_client *c = op->t.c;
  pthread_mutex_lock(&c->mu);
  if (!op->done) { /* nobody waits any more: stop, but finish a deletion */
    if (ZKL_OP_CLASS(op)->drop) {
      ZKL_OP_CLASS(op)->drop(op);
    } else {
      zkl_op_stop(op);
      op->t.cls->finish(&op->t, ZOK, NULL);
    }
    if (!op->done) zkl_task_keep(&op->t); /* a deletion left: see it through */
  }
  zkl_task_unref(&op->t);
  pthread_mutex_unlock(&c->mu);
  zkl_client_unref(c);
}

void zkl_op_take(zkl_op *op, zkl_op_result *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&op->t.c->mu);
  out->done = op->done;
  out->err = op->t.err;
  out->result = op->result;
  out->zxid = op->zxid;
  if (op->done && op->t.err.code == ZKL_OK) {
    /* the op is done: nobody else touches these */
    out->names = op->names;
    out->n = op->n;
    op->names = NULL;
    op->n = 0;
    if (ZKL_OP_CLASS(op)->kind == ZKL_OP_GET) {
      out->data = op->data;
      out->datalen = op->datalen;
      op->data = NULL;
      op->datalen = 0;
    }
  }
  pthread_mutex_unlock(&op->t.c->mu);
}

void zkl_op_result_free(zkl_op_result *r) {
  int i;
  for (i = 0; i < r->n; i++) free(r->names[i]);
  free(r->names);
  free(r->data);
  r->names = NULL;
  r->data = NULL;
  r->n = 0;
}
