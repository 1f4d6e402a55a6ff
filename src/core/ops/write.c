/* Writing a node's data: set it, and where asked create it when missing
 * (its parents as containers).  zk:set uses the plain form; a fenced
 * write (lock:fenced_set, docs/design.md, section 4.9) sends each set or
 * create in one multi-op behind a check that our lock node exists, so
 * that it lands only while we hold the lock.
 *
 *   SET --no node--> CREATE --exists--> SET
 *                      \--no parent--> PARENTS -> SET
 *   fenced CREATE done -> STAT (the node's czxid: the write's zxid)
 *
 * A fenced write may be conditional (`expect`: a version the node must
 * still have, or that it must not exist): then the one try is all, and a
 * node that changed meanwhile fails it with bad_version.
 *
 * A fenced write cut in flight may have been applied: if it cannot be
 * confirmed since, it fails with connection_loss saying so (`maybe`; so a
 * conditional write applied and then sent again is never taken for a
 * conflict). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"

enum { W_SET = ZKL_STAGE_MAIN, W_CREATE = ZKL_STAGE_OWN, W_STAT };

typedef struct {
  zkl_op op;
  int create;     /* create when missing */
  char *fence;    /* fenced: our lock node's full path, else NULL */
  int maybe;      /* fenced: a try was cut: a failure is not certain */
  int expect;     /* fenced: ZKL_ANY_VERSION, ZKL_ABSENT or a version */
  zoo_op_t mops[2];
  zoo_op_result_t mres[2];
  struct Stat mstat;
  char mname[8];  /* the created name (not used) */
} write_op;

static void write_finish(zkl_task *t, int rc, const char *what) {
  write_op *w = (write_op *)t;
  if (w->fence && w->op.stage == W_STAT)
    rc = ZOK; /* created for certain; only its zxid is missing (0) */
  w->op.done = 1;
  zkl_task_seterr(t, rc, what);
  if (rc != ZOK && w->maybe) {
    char buf[256];
    snprintf(buf, sizeof buf, "fenced write to %s", t->path);
    zkl_seterr_maybe(&t->err, buf);
  }
  zkl_task_settle(t);
}

/* The write was refused (rc): set-or-create says what follows. */
static void write_refused(write_op *w, int rc) {
  switch (zkl_write_next(rc, w->op.stage == W_CREATE)) {
  case ZKL_WRITE_CREATE:
    if (!w->create) break; /* (zk:set without create) */
    zkl_op_goto(&w->op, W_CREATE);
    return;
  case ZKL_WRITE_PARENTS: zkl_op_parents(&w->op, w->op.t.path); return;
  case ZKL_WRITE_SET: zkl_op_goto(&w->op, W_SET); return;
  default: break;
  }
  write_finish(&w->op.t, rc, w->op.t.path);
}

static void write_done(write_op *w, int rc, const struct Stat *st) {
  if (rc == ZOK && w->op.stage == W_CREATE) {
    w->op.result = 1; /* created */
    if (w->fence) { w->op.result = 0; zkl_op_goto(&w->op, W_STAT); return; }
  } else if (rc == ZOK && w->fence && st) {
    w->op.result = st->version;
    w->op.zxid = st->mzxid;
  }
  write_finish(&w->op.t, ZOK, NULL);
}

static void write_plain_cb(int rc, const struct Stat *st, const void *data) {
  zkl_req *r;
  write_op *w = (write_op *)zkl_task_enter(data, rc, &r);
  if (w) {
    if (zkl_is_cut(rc)) w->op.t.redo = 1;
    else if (rc == ZOK) write_done(w, rc, st);
    else write_refused(w, rc);
  }
  zkl_task_leave(r);
}

static void write_created_cb(int rc, const char *value, const void *data) {
  (void)value;
  write_plain_cb(rc, NULL, data);
}

static void write_multi_cb(int rc, const void *data) {
  zkl_req *r;
  write_op *w = (write_op *)zkl_task_enter(data, rc, &r);
  if (!w) { zkl_task_leave(r); return; }
  if (zkl_is_cut(rc)) {
    w->op.t.redo = 1;
    w->maybe = 1; /* applied or not: nobody can tell any more */
  } else if (rc == ZOK) {
    write_done(w, rc, &w->mstat);
  } else if (w->expect != ZKL_ANY_VERSION &&
             (w->mres[1].err == ZBADVERSION ||
              w->mres[1].err == ZNODEEXISTS ||
              (w->mres[1].err == ZNONODE && w->expect >= 0))) {
    /* a conditional write: the node changed since it was read */
    write_finish(&w->op.t, ZBADVERSION, w->op.t.path);
  } else if (w->mres[0].err != ZOK &&
             w->mres[0].err != ZRUNTIMEINCONSISTENCY) {
    write_finish(&w->op.t, w->mres[0].err, w->fence); /* the check failed */
    if (w->mres[0].err == ZNONODE && !w->maybe) {
      w->op.t.err.code = ZKL_ELOCK_LOST;
      snprintf(w->op.t.err.msg, sizeof w->op.t.err.msg,
               "lock lost: %s is gone", w->fence);
    }
  } else {
    write_refused(w, rc);
  }
  zkl_task_leave(r);
}

static void write_stat_cb(int rc, const struct Stat *st, const void *data) {
  zkl_req *r;
  write_op *w = (write_op *)zkl_task_enter(data, rc, &r);
  if (w) {
    if (zkl_is_cut(rc)) {
      w->op.t.redo = 1;
    } else {
      if (rc == ZOK) w->op.zxid = st->czxid;
      write_finish(&w->op.t, ZOK, NULL);
    }
  }
  zkl_task_leave(r);
}

/* fenced: check our lock node, then set or create, all or nothing */
static int write_multi(write_op *w, zkl_req *r) {
  zkl_op *op = &w->op;
  if (!zkl_zh_usable(op->t.c->zh)) return ZINVALIDSTATE; /* (util.c) */
  zoo_check_op_init(&w->mops[0], w->fence, -1);
  if (w->expect >= 0)
    zoo_set_op_init(&w->mops[1], op->t.path, op->data, op->datalen,
                    w->expect, &w->mstat);
  else
    zkl_write_op_init(&w->mops[1], op->t.c, op->t.path, op->data,
                      op->datalen,
                      op->stage == W_CREATE || w->expect == ZKL_ABSENT,
                      &w->mstat, w->mname, sizeof w->mname);
  memset(w->mres, 0, sizeof w->mres);
  return zoo_amulti(op->t.c->zh, 2, w->mops, w->mres, write_multi_cb, r);
}

static void write_step(zkl_op *op) {
  write_op *w = (write_op *)op;
  zhandle_t *zh = op->t.c->zh;
  zkl_req *r = zkl_task_req(&op->t, 0);
  int rc = ZSYSTEMERROR;
  if (r && op->stage == W_STAT)
    rc = zoo_aexists(zh, op->t.path, 0, write_stat_cb, r);
  else if (r && w->fence)
    rc = write_multi(w, r);
  else if (r && op->stage == W_CREATE)
    rc = zoo_acreate(zh, op->t.path, op->data, op->datalen, &op->t.c->acl, 0,
                     write_created_cb, r);
  else if (r)
    rc = zoo_aset(zh, op->t.path, op->data, op->datalen, -1, write_plain_cb,
                  r);
  zkl_op_sent(op, r, rc, op->t.path);
}

static void write_free(zkl_op *op) { free(((write_op *)op)->fence); }

static const zkl_op_class write_set = {
  ZKL_OP_TASK_CLASS("set", write_finish), ZKL_OP_SET,
  write_step, -1, W_CREATE, NULL, NULL, write_free
};
static const zkl_op_class write_fenced = {
  ZKL_OP_TASK_CLASS("fenced", write_finish), ZKL_OP_FENCED,
  write_step, -1, ZKL_STAGE_MAIN, NULL, NULL, write_free
};

zkl_op *zkl_op_set(zkl_client *c, const char *path, const char *data,
                   int datalen, int create, zkl_error *err) {
  write_op *w = (write_op *)zkl_op_new(sizeof *w, &write_set, c, path, data,
                                       datalen, err);
  if (!w) return NULL;
  w->create = create;
  return zkl_op_start(&w->op, err);
}

zkl_op *zkl_op_fenced(zkl_client *c, const char *lock_node, const char *path,
                      const char *data, int datalen, int expect,
                      zkl_error *err) {
  write_op *w = (write_op *)zkl_op_new(sizeof *w, &write_fenced, c, path,
                                       data, datalen, err);
  if (!w) return NULL;
  w->create = 1;
  w->expect = expect < ZKL_ABSENT ? ZKL_ANY_VERSION : expect;
  if (!(w->fence = strdup(lock_node))) {
    zkl_task_unref(&w->op.t); /* (not linked yet: frees it) */
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return NULL;
  }
  return zkl_op_start(&w->op, err);
}
