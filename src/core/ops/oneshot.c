/* One-shot ops: a listing (sorted by lock order when markers are given:
 * participants, revocation), create, delete and get.  Each sends one
 * request; create makes missing parents first (as containers). */
#include <stdlib.h>
#include <string.h>

#include "../internal.h"

typedef struct {
  zkl_op op;
  const char *const *markers; /* CHILDREN: NULL lists every child */
  int flags;                  /* CREATE: ZooKeeper create flags */
} oneshot;

/* ---- completions -------------------------------------------------------- */

static void oneshot_children_cb(int rc, const struct String_vector *sv,
                                const void *data) {
  zkl_req *r;
  oneshot *o = (oneshot *)zkl_task_enter(data, rc, &r);
  zkl_op *op = (zkl_op *)o;
  if (!o) { zkl_task_leave(r); return; }
  if (rc == ZNONODE) {
    zkl_op_finish(op, ZOK, NULL); /* no such path: nobody contends */
  } else if (rc != ZOK) {
    zkl_task_trouble(&op->t, rc, op->t.path);
  } else {
    zkl_entry *e = malloc(sizeof *e * (size_t)(sv->count + 1));
    int i, n = 0;
    if (e && o->markers) {
      n = zkl_names_sort(sv->data, sv->count, o->markers, e);
    } else if (e) {
      for (n = 0; n < sv->count; n++) e[n].name = sv->data[n];
    }
    op->names = calloc((size_t)n + 1, sizeof *op->names);
    for (i = 0; op->names && i < n; i++) {
      char *name = strdup(e[i].name);
      if (!name) break;
      op->names[op->n++] = name;
    }
    free(e);
    if (!op->names || op->n < n)
      zkl_op_finish(op, ZSYSTEMERROR, "out of memory");
    else zkl_op_finish(op, ZOK, NULL);
  }
  zkl_task_leave(r);
}

static void oneshot_create_cb(int rc, const char *value, const void *data) {
  zkl_req *r;
  zkl_op *op = (zkl_op *)zkl_task_enter(data, rc, &r);
  (void)value;
  if (op) {
    if (rc == ZOK || rc == ZNODEEXISTS) {
      op->result = rc == ZOK;
      zkl_op_finish(op, ZOK, NULL);
    } else if (rc == ZNONODE) {
      zkl_op_parents(op, op->t.path);
    } else {
      zkl_task_trouble(&op->t, rc, op->t.path);
    }
  }
  zkl_task_leave(r);
}

static void oneshot_delete_cb(int rc, const void *data) {
  zkl_req *r;
  zkl_op *op = (zkl_op *)zkl_task_enter(data, rc, &r);
  if (op) {
    if (zkl_is_cut(rc)) {
      op->t.redo = 1;
    } else {
      op->result = rc == ZOK;
      zkl_op_finish(op, rc == ZNONODE ? ZOK : rc, op->t.path);
    }
  }
  zkl_task_leave(r);
}

static void oneshot_get_cb(int rc, const char *value, int value_len,
                           const struct Stat *st, const void *data) {
  zkl_req *r;
  zkl_op *op = (zkl_op *)zkl_task_enter(data, rc, &r);
  if (op) {
    if (zkl_is_cut(rc)) {
      op->t.redo = 1;
    } else if (rc == ZOK) {
      free(op->data);
      op->data = NULL;
      op->datalen = value_len > 0 ? value_len : 0;
      op->result = st ? st->version : 0;
      if (op->datalen && !(op->data = malloc((size_t)op->datalen))) {
        zkl_op_finish(op, ZSYSTEMERROR, "out of memory");
      } else {
        if (op->datalen) memcpy(op->data, value, (size_t)op->datalen);
        zkl_op_finish(op, ZOK, NULL);
      }
    } else {
      zkl_op_finish(op, rc, op->t.path);
    }
  }
  zkl_task_leave(r);
}

/* ---- steps -------------------------------------------------------------- */

static void oneshot_children_step(zkl_op *op) {
  zkl_req *r = zkl_task_req(&op->t, 0);
  zkl_op_sent(op, r, r ? zoo_aget_children(op->t.c->zh, op->t.path, 0,
                                           oneshot_children_cb, r) : 0,
              op->t.path);
}

static void oneshot_create_step(zkl_op *op) {
  zkl_req *r = zkl_task_req(&op->t, 0);
  zkl_op_sent(op, r, r ? zoo_acreate(op->t.c->zh, op->t.path, op->data,
                                     op->datalen, &op->t.c->acl,
                                     ((oneshot *)op)->flags,
                                     oneshot_create_cb, r) : 0,
              op->t.path);
}

static void oneshot_delete_step(zkl_op *op) {
  zkl_req *r = zkl_task_req(&op->t, 0);
  zkl_op_sent(op, r, r ? zoo_adelete(op->t.c->zh, op->t.path, -1,
                                     oneshot_delete_cb, r) : 0,
              op->t.path);
}

static void oneshot_get_step(zkl_op *op) {
  zkl_req *r = zkl_task_req(&op->t, 0);
  zkl_op_sent(op, r, r ? zoo_aget(op->t.c->zh, op->t.path, 0,
                                  oneshot_get_cb, r) : 0,
              op->t.path);
}

/* a deletion is seen through even when nobody waits for it any more */
static void oneshot_delete_drop(zkl_op *op) { (void)op; }

static const zkl_op_class oneshot_children = {
  ZKL_OP_TASK_CLASS("children", zkl_op_task_finish), ZKL_OP_CHILDREN,
  oneshot_children_step, -1, ZKL_STAGE_MAIN, NULL, NULL, NULL
};
static const zkl_op_class oneshot_create = {
  ZKL_OP_TASK_CLASS("create", zkl_op_task_finish), ZKL_OP_CREATE,
  oneshot_create_step, -1, ZKL_STAGE_MAIN, NULL, NULL, NULL
};
static const zkl_op_class oneshot_delete = {
  ZKL_OP_TASK_CLASS("delete", zkl_op_task_finish), ZKL_OP_DELETE,
  oneshot_delete_step, -1, ZKL_STAGE_MAIN, NULL, oneshot_delete_drop, NULL
};
static const zkl_op_class oneshot_get = {
  ZKL_OP_TASK_CLASS("get", zkl_op_task_finish), ZKL_OP_GET,
  oneshot_get_step, -1, ZKL_STAGE_MAIN, NULL, NULL, NULL
};

/* ---- constructors (Lua thread) ------------------------------------------ */

zkl_op *zkl_op_children(zkl_client *c, const char *path,
                        const char *const *markers, zkl_error *err) {
  oneshot *o = (oneshot *)zkl_op_new(sizeof *o, &oneshot_children, c, path,
                                     NULL, 0, err);
  if (!o) return NULL;
  o->markers = markers;
  return zkl_op_start(&o->op, err);
}

zkl_op *zkl_op_create(zkl_client *c, const char *path, const char *data,
                      int datalen, int flags, zkl_error *err) {
  oneshot *o = (oneshot *)zkl_op_new(sizeof *o, &oneshot_create, c, path,
                                     data, datalen, err);
  if (!o) return NULL;
  o->flags = flags;
  return zkl_op_start(&o->op, err);
}

zkl_op *zkl_op_delete(zkl_client *c, const char *path, zkl_error *err) {
  zkl_op *op = zkl_op_new(sizeof(oneshot), &oneshot_delete, c, path, NULL, 0,
                          err);
  return op ? zkl_op_start(op, err) : NULL;
}

zkl_op *zkl_op_get(zkl_client *c, const char *path, zkl_error *err) {
  zkl_op *op = zkl_op_new(sizeof(oneshot), &oneshot_get, c, path, NULL, 0,
                          err);
  return op ? zkl_op_start(op, err) : NULL;
}
