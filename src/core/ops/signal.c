/* A signal: an op that sends nothing and is done once the Lua thread
 * fires it (or the session expires, or the client closes: its waiter then
 * looks again).  A waiter of a lock cohort waits on one of its own, so
 * that a hold passed within the process wakes that waiter alone, through
 * whatever waiter is installed (docs/design.md, section 16). */
#include <pthread.h>

#include "../internal.h"

static void signal_step(zkl_op *op) { (void)op; }

static const zkl_op_class signal_class = {
  { "signal", NULL, zkl_op_on_expired, NULL, zkl_op_on_closing,
    zkl_op_on_expired, NULL, zkl_op_task_finish, NULL, zkl_op_task_free,
    NULL },
  ZKL_OP_SIGNAL, signal_step, -1, ZKL_STAGE_MAIN, NULL, NULL, NULL
};

/* Lua thread.  Refused only once the client is closing: a signal sends
 * nothing, so it needs no handle, and the timer thread has none while it
 * opens a new session after an expiry (c->zh NULL, session.c) -- a
 * cohort's waiters make new signals then, and go on waiting. */
zkl_op *zkl_op_signal(zkl_client *c, zkl_error *err) {
  zkl_op *op = zkl_op_new(sizeof *op, &signal_class, c, "", NULL, 0, err);
  if (!op) return NULL;
  pthread_mutex_lock(&c->mu);
  if (c->closing) {
    zkl_seterr(err, ZKL_ECLOSED, "client is closed");
    zkl_task_unref(&op->t); /* (not linked: frees it) */
    pthread_mutex_unlock(&c->mu);
    return NULL;
  }
  zkl_task_link(&op->t);
  pthread_mutex_unlock(&c->mu);
  return op;
}

/* Lua thread: 1 when it fired it, 0 when it was done already */
int zkl_op_fire(zkl_op *op) {
  int fired = 0;
  pthread_mutex_lock(&op->t.c->mu);
  if (op->t.cls == &signal_class.task && !op->done) {
    zkl_op_finish(op, ZOK, NULL);
    fired = 1;
  }
  pthread_mutex_unlock(&op->t.c->mu);
  return fired;
}
