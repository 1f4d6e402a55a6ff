/* The double barrier (the ZooKeeper recipe, done in a loop;
 * docs/design.md, section 7).  Members are ephemeral nodes "<uuid>" under
 * the barrier's path.
 *
 *   enter: CREATE ours -> COUNT (children watch on the directory)
 *            -> enough members: MKREADY (create "ready") -> in
 *            -> "ready" there: in;  else the watch runs COUNT again
 *          timed out or dropped: DELOURS (our node goes) -> done
 *   leave: LIST -> none: RMREADY -> out
 *               -> only ours: DELOURS -> LIST
 *               -> ours is lowest: WATCH the highest -> LIST
 *               -> ours is there: DELOURS -> LIST
 *               -> else: WATCH the lowest -> LIST
 *
 * Enter waits on the directory's children watch, which holds our member
 * node while we wait: "ready" appearing (or enough members) fires it, and
 * a cancelled enter's own deletion uses it up.  Leave watches with get (a
 * missing node leaves no watch).  A member node of ours is deleted even
 * when nobody waits any more (the op keeps itself until then), across
 * connection loss, until it or the session is gone. */
#include <stdlib.h>
#include <string.h>

#include "../internal.h"

enum { D_MAIN = ZKL_STAGE_MAIN, D_COUNT = ZKL_STAGE_OWN, D_MKREADY,
       D_DELOURS, D_RMREADY, D_WATCH };

typedef struct {
  zkl_op op;
  char *ours;     /* our member node's full path */
  int members;    /* enter: how many make the barrier */
  int leave;      /* 1: the leave loop */
} dbarrier;

#define DB(op) ((dbarrier *)(op))

/* A member's name: "<uuid>" (36 chars). */
static int dbarrier_is_member(const char *name) {
  int i;
  for (i = 0; name[i]; i++) {
    char ch = name[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (ch != '-') return 0;
    } else if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) {
      return 0;
    }
  }
  return i == 36;
}

static int dbarrier_strcmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- enter -------------------------------------------------------------- */

static void dbarrier_created_cb(int rc, const char *value, const void *data) {
  zkl_req *r;
  zkl_op *op = (zkl_op *)zkl_task_enter(data, rc, &r);
  (void)value;
  if (op && op->stage == D_MAIN) { /* our member node */
    if (rc == ZOK || rc == ZNODEEXISTS) {
      op->result = rc == ZOK;
      zkl_op_goto(op, D_COUNT);
    } else if (rc == ZNONODE) {
      zkl_op_parents(op, DB(op)->ours);
    } else {
      zkl_task_trouble(&op->t, rc, DB(op)->ours);
    }
  } else if (op && op->stage == D_MKREADY) {
    if (rc == ZOK || rc == ZNODEEXISTS) zkl_op_finish(op, ZOK, NULL); /* in */
    else zkl_task_trouble(&op->t, rc, op->t.path);
  }
  zkl_task_leave(r);
}

/* enter: "ready" is there, or enough members make it */
static void dbarrier_count(zkl_op *op, const struct String_vector *sv) {
  int i, n = 0;
  for (i = 0; i < sv->count; i++) {
    if (strcmp(sv->data[i], "ready") == 0) {
      zkl_op_finish(op, ZOK, NULL);
      return;
    }
    if (dbarrier_is_member(sv->data[i])) n++;
  }
  if (n >= DB(op)->members) zkl_op_goto(op, D_MKREADY);
  /* else the children watch wakes us on the next change */
}

/* ---- leave -------------------------------------------------------------- */

static void dbarrier_decide(zkl_op *op, char **m, int n) {
  const char *slash = strrchr(DB(op)->ours, '/'); /* (the binding checked) */
  const char *ours = slash ? slash + 1 : DB(op)->ours;
  int i, present = 0;
  for (i = 0; i < n; i++) if (strcmp(m[i], ours) == 0) present = 1;
  if (n == 0) {
    zkl_op_goto(op, D_RMREADY);
  } else if (n == 1 && present) {
    zkl_op_goto(op, D_DELOURS);
  } else if (present && strcmp(m[0], ours) == 0) {
    zkl_task_set_watch(&op->t, zkl_join(op->t.path, m[n - 1]));
    zkl_op_goto(op, D_WATCH);                /* lowest: wait for the highest */
  } else if (present) {
    zkl_op_goto(op, D_DELOURS);              /* go, then wait */
  } else {
    zkl_task_set_watch(&op->t, zkl_join(op->t.path, m[0]));
    zkl_op_goto(op, D_WATCH);                /* for the lowest */
  }
}

static void dbarrier_leave_list(zkl_op *op, const struct String_vector *sv) {
  char **m = malloc(sizeof *m * (size_t)(sv->count + 1));
  int i, n = 0;
  if (!m) { zkl_op_finish(op, ZSYSTEMERROR, "out of memory"); return; }
  for (i = 0; i < sv->count; i++)
    if (dbarrier_is_member(sv->data[i])) m[n++] = sv->data[i];
  qsort(m, (size_t)n, sizeof *m, dbarrier_strcmp);
  dbarrier_decide(op, m, n);
  free(m);
}

static void dbarrier_children_cb(int rc, const struct String_vector *sv,
                                 const void *data) {
  zkl_req *r;
  zkl_op *op = (zkl_op *)zkl_task_enter(data, rc, &r);
  if (!op) { zkl_task_leave(r); return; }
  if (rc == ZNONODE && DB(op)->leave) zkl_op_finish(op, ZOK, NULL); /* out */
  else if (rc != ZOK) zkl_task_trouble(&op->t, rc, op->t.path);
  else if (DB(op)->leave) dbarrier_leave_list(op, sv);
  else dbarrier_count(op, sv);
  zkl_task_leave(r);
}

static void dbarrier_gone_cb(int rc, const char *v, int vlen,
                             const struct Stat *st, const void *data) {
  zkl_req *r;
  zkl_op *op = (zkl_op *)zkl_task_enter(data, rc, &r);
  (void)v; (void)vlen; (void)st;
  if (op) {
    if (rc == ZNONODE) zkl_op_goto(op, D_MAIN); /* gone: look again */
    else if (rc != ZOK) zkl_task_trouble(&op->t, rc, op->t.watch);
    /* ZOK: the watch is set: wait */
  }
  zkl_task_leave(r);
}

static void dbarrier_deleted_cb(int rc, const void *data) {
  zkl_req *r;
  zkl_op *op = (zkl_op *)zkl_task_enter(data, rc, &r);
  if (!op) { zkl_task_leave(r); return; }
  if (zkl_is_cut(rc)) {
    op->t.redo = 1;
  } else if (op->stage == D_DELOURS) {
    if (rc != ZOK && rc != ZNONODE)
      zkl_op_finish(op, rc, DB(op)->ours);          /* (no auth) */
    else if (op->cancel) zkl_op_finish(op, ZOK, NULL); /* enter given up */
    else zkl_op_goto(op, D_MAIN);                   /* leave: look again */
  } else {
    zkl_op_finish(op, ZOK, NULL);                   /* RMREADY: out */
  }
  zkl_task_leave(r);
}

/* ---- steps -------------------------------------------------------------- */

static void dbarrier_step(zkl_op *op) {
  zhandle_t *zh = op->t.c->zh;
  const char *path = op->t.path;
  zkl_req *r = zkl_task_req(&op->t, 0);
  char *ready = NULL;
  int rc = ZSYSTEMERROR;
  if (!r) { zkl_op_sent(op, r, rc, path); return; }
  switch (op->stage) {
  case D_MAIN:
    if (DB(op)->leave)
      rc = zoo_aget_children(zh, path, 0, dbarrier_children_cb, r);
    else
      rc = zoo_acreate(zh, DB(op)->ours, NULL, -1, &op->t.c->acl,
                       ZOO_EPHEMERAL, dbarrier_created_cb, r);
    break;
  case D_COUNT: /* count the members, watch the directory */
    zkl_task_set_watch(&op->t, strdup(path));
    if (op->t.watch)
      rc = zoo_aget_children(zh, path, 1, dbarrier_children_cb, r);
    break;
  case D_MKREADY:
    if ((ready = zkl_join(path, "ready")))
      rc = zoo_acreate(zh, ready, NULL, -1, &op->t.c->acl, 0,
                       dbarrier_created_cb, r);
    break;
  case D_DELOURS:
    rc = zoo_adelete(zh, DB(op)->ours, -1, dbarrier_deleted_cb, r);
    break;
  case D_RMREADY:
    if ((ready = zkl_join(path, "ready")))
      rc = zoo_adelete(zh, ready, -1, dbarrier_deleted_cb, r);
    break;
  case D_WATCH:
    if (op->t.watch)
      rc = zoo_aget(zh, op->t.watch, 1, dbarrier_gone_cb, r);
    break;
  }
  free(ready);
  zkl_op_sent(op, r, rc, path);
}

/* a timed-out enter takes its node back */
static void dbarrier_cancel(zkl_op *op) {
  if (!DB(op)->leave && zkl_client_usable(op->t.c, NULL))
    zkl_op_goto(op, D_DELOURS);
  else
    zkl_op_finish(op, ZOK, NULL);
}

/* nobody waits any more: our member node goes all the same (it may be
 * gone already: fine) */
static void dbarrier_drop(zkl_op *op) {
  int deleting = op->cancel && op->stage == D_DELOURS;
  zkl_op_stop(op);
  if (!deleting) {
    if (zkl_client_usable(op->t.c, NULL)) zkl_op_goto(op, D_DELOURS);
    else zkl_op_finish(op, ZOK, NULL); /* (the session took it) */
  }
}

static void dbarrier_free(zkl_op *op) { free(DB(op)->ours); }

static const zkl_op_class dbarrier_enter = {
  ZKL_OP_TASK_CLASS("double barrier enter", zkl_op_task_finish),
  ZKL_OP_DB_ENTER, dbarrier_step, D_COUNT, ZKL_STAGE_MAIN, dbarrier_cancel,
  dbarrier_drop, dbarrier_free
};
static const zkl_op_class dbarrier_leave = {
  ZKL_OP_TASK_CLASS("double barrier leave", zkl_op_task_finish),
  ZKL_OP_DB_LEAVE, dbarrier_step, D_MAIN, ZKL_STAGE_MAIN, NULL,
  dbarrier_drop, dbarrier_free
};

static zkl_op *dbarrier_new(const zkl_op_class *cls, zkl_client *c,
                            const char *path, const char *ours, int members,
                            zkl_error *err) {
  dbarrier *d = (dbarrier *)zkl_op_new(sizeof *d, cls, c, path, NULL, 0, err);
  if (!d) return NULL;
  d->members = members;
  d->leave = cls == &dbarrier_leave;
  if (!(d->ours = strdup(ours))) {
    zkl_task_unref(&d->op.t); /* (not linked yet: frees it) */
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return NULL;
  }
  return zkl_op_start(&d->op, err);
}

zkl_op *zkl_op_db_enter(zkl_client *c, const char *path, const char *ours,
                        int members, zkl_error *err) {
  return dbarrier_new(&dbarrier_enter, c, path, ours, members, err);
}

zkl_op *zkl_op_db_leave(zkl_client *c, const char *path, const char *ours,
                        zkl_error *err) {
  return dbarrier_new(&dbarrier_leave, c, path, ours, 1, err);
}
