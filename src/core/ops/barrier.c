/* The barrier's wait (Curator DistributedBarrier): until the node is
 * gone.  A get-with-watch, not an exists: a get on a missing node leaves
 * no watch behind on the server (docs/design.md, section 7). */
#include <stdlib.h>
#include <string.h>

#include "../internal.h"

static void barrier_gone_cb(int rc, const char *v, int vlen,
                            const struct Stat *st, const void *data) {
  zkl_req *r;
  zkl_op *op = (zkl_op *)zkl_task_enter(data, rc, &r);
  (void)v; (void)vlen; (void)st;
  if (op) {
    if (rc == ZNONODE) zkl_op_finish(op, ZOK, NULL); /* gone: through */
    else if (rc != ZOK) zkl_task_trouble(&op->t, rc, op->t.watch);
    /* ZOK: the watch is set; its event runs this stage again */
  }
  zkl_task_leave(r);
}

static void barrier_step(zkl_op *op) {
  zkl_req *r = zkl_task_req(&op->t, 0);
  int rc = ZSYSTEMERROR;
  zkl_task_set_watch(&op->t, strdup(op->t.path));
  if (r && op->t.watch)
    rc = zoo_aget(op->t.c->zh, op->t.path, 1, barrier_gone_cb, r);
  zkl_op_sent(op, r, rc, op->t.path);
}

static const zkl_op_class barrier_wait = {
  ZKL_OP_TASK_CLASS("barrier wait", zkl_op_task_finish), ZKL_OP_WAIT_GONE,
  barrier_step, -1, ZKL_STAGE_MAIN, NULL, NULL, NULL
};

zkl_op *zkl_op_wait_gone(zkl_client *c, const char *path, zkl_error *err) {
  zkl_op *op = zkl_op_new(sizeof *op, &barrier_wait, c, path, NULL, 0, err);
  return op ? zkl_op_start(op, err) : NULL;
}
