/* One-shot operations whose outcome Lua polls for: a sorted listing
 * (participants), create / delete / set (barrier, revocation), waiting for
 * a node to go (barrier wait), and the double barrier's enter and leave
 * loops.  Like lock.c, every function below runs with the client's mutex
 * held unless it says "Lua thread"; requests carry the op's epoch.
 *
 * A deletion outlives its Lua box: an op dropped (collected) with a node
 * of ours still to delete keeps a reference on itself (selfref) and
 * retries across connection loss until the node or the session is gone.
 * Waits watch with get (no watch is left behind on a node that is gone:
 * an exists on a missing node would leave one for the session's life).
 * An enter waits on a children watch of the barrier's directory, which
 * holds our member node while we wait: "ready" appearing (or enough
 * members) fires it, and a cancelled enter's own deletion uses it up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zkl.h"

enum { S_MAIN, S_PARENTS, S_COUNT, S_MKREADY, S_DELOURS, S_RMREADY,
       S_WATCH, S_FCREATE, S_FSTAT };

static void op_step(zkl_op *op);

static void op_free_names(zkl_op *op) {
  int i;
  for (i = 0; i < op->n; i++) free(op->names[i]);
  free(op->names);
  op->names = NULL;
  op->n = 0;
}

void zkl_op_unref(zkl_op *op) {
  zkl_client *c = op->c;
  if (--op->refs > 0) return;
  if (op->prev) op->prev->next = op->next; else c->ops = op->next;
  if (op->next) op->next->prev = op->prev;
  op_free_names(op);
  free(op->path); free(op->ours); free(op->data); free(op->watch);
  free(op);
}

static void op_set_watch(zkl_op *op, char *path) {
  free(op->watch);
  op->watch = path;
}

static void op_finish(zkl_op *op, int rc, const char *what) {
  if (op->kind == ZKL_OP_FENCED && op->stage == S_FSTAT)
    rc = ZOK; /* created for certain; only its zxid is missing (0) */
  op->done = 1;
  op->epoch++;
  if (rc == ZOK) op->err.code = ZKL_OK;
  else if (zkl_client_usable(op->c, &op->err)) zkl_seterr_rc(&op->err, rc, what);
  if (rc != ZOK && op->kind == ZKL_OP_FENCED && op->maybe)
    zkl_seterr(&op->err, ZKL_ECONNECTION_LOSS, "fenced write to %s: the "
               "connection was cut with it in flight, and it could not be "
               "confirmed since: it may have been applied", op->path);
  op_set_watch(op, NULL); /* only now: `what` may be op->watch */
  zkl_client_touch(op->c, op->wake_id);
  zkl_client_changed(op->c);
  if (op->selfref) { /* its work is over: let go (callers hold a ref of
                        their own, or touch op no more) */
    op->selfref = 0;
    zkl_op_unref(op);
  }
}

/* a cut connection: try the current stage again once reconnected */
static void op_trouble(zkl_op *op, int rc, const char *what) {
  if (zkl_is_cut(rc)) op->redo = 1;
  else op_finish(op, rc, what);
}

void zkl_op_closing(zkl_req *r) {
  if (!r->op->done) op_finish(r->op, ZCLOSING, NULL);
}

static zkl_req *op_req(zkl_op *op) {
  return zkl_req_new(op->c, NULL, op, op->epoch, op->kind);
}

static int op_sent(zkl_op *op, zkl_req *r, int rc, const char *what) {
  if (rc == ZOK) return 1;
  if (r) zkl_req_done(r);
  op_trouble(op, rc ? rc : ZSYSTEMERROR, what);
  return 0;
}

static zkl_op *op_enter(const void *data, int rc, zkl_req **rp) {
  zkl_req *r = (zkl_req *)data;
  pthread_mutex_lock(&r->c->mu);
  zkl_client_heard(r->c, r->sent, rc);
  *rp = r;
  return r->op->epoch == r->epoch && !r->op->done ? r->op : NULL;
}

static void op_leave(zkl_req *r) {
  zkl_client *c = r->c;
  zkl_client_touch(c, r->op->wake_id);
  zkl_req_done(r);
  zkl_client_changed(c);
  pthread_mutex_unlock(&c->mu);
}

static void op_goto(zkl_op *op, int stage) {
  op->epoch++;
  op->stage = stage;
  op->redo = 0;
  op_step(op);
}

/* ---- member nodes of a double barrier: "<uuid>" (36 chars) ------------- */

static int op_is_member(const char *name) {
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

static int op_strcmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- completions --------------------------------------------------------- */

static void op_void_cb(int rc, const void *data);
static void op_set_cb(int rc, const struct Stat *st, const void *data);
static void op_string_cb(int rc, const char *value, const void *data);
static void op_gone_cb(int rc, const char *v, int vlen, const struct Stat *st,
                       const void *data);
static void op_children_cb(int rc, const struct String_vector *sv,
                           const void *data);

static void op_parents(zkl_op *op, const char *target) {
  char *p = strdup(target), *s;
  if (!p) { op_finish(op, ZSYSTEMERROR, "out of memory"); return; }
  op->epoch++;
  op->stage = S_PARENTS;
  op->parents_left = 0;
  op->parents_rc = ZOK;
  for (s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
    zkl_req *r;
    *s = '\0';
    r = op_req(op);
    if (!op_sent(op, r, r ? zoo_acreate(op->c->zh, p, NULL, -1, &op->c->acl,
                                       ZOO_CONTAINER, op_string_cb, r)
                          : ZSYSTEMERROR, p)) break;
    op->parents_left++;
    *s = '/';
  }
  free(p);
  if (op->parents_left == 0 && !op->done && !op->redo) /* a top-level node */
    op_finish(op, ZNONODE, "(the chroot of the connect string must exist)");
}

static void op_string_cb(int rc, const char *value, const void *data) {
  zkl_req *r;
  zkl_op *op = op_enter(data, rc, &r);
  (void)value;
  if (!op) { op_leave(r); return; }
  if (op->stage == S_PARENTS) {
    if (rc != ZOK && rc != ZNODEEXISTS && op->parents_rc == ZOK)
      op->parents_rc = rc;
    if (--op->parents_left == 0) {
      if (op->parents_rc == ZOK) op_goto(op, S_MAIN);
      else if (op->parents_rc == ZNONODE)
        op_finish(op, ZNONODE, "(the chroot of the connect string must exist)");
      else op_trouble(op, op->parents_rc, op->path);
    }
  } else if (op->stage == S_MAIN) { /* CREATE, DB_ENTER's member node */
    const char *target = op->kind == ZKL_OP_DB_ENTER ? op->ours : op->path;
    if (rc == ZOK || rc == ZNODEEXISTS) {
      op->result = rc == ZOK;
      if (op->kind == ZKL_OP_DB_ENTER) op_goto(op, S_COUNT);
      else op_finish(op, ZOK, NULL);
    } else if (rc == ZNONODE) {
      op_parents(op, target);
    } else {
      op_trouble(op, rc, target);
    }
  } else if (op->stage == S_MKREADY) {
    if (rc == ZOK || rc == ZNODEEXISTS) op_finish(op, ZOK, NULL); /* in */
    else op_trouble(op, rc, op->path);
  }
  op_leave(r);
}

static void op_set_cb(int rc, const struct Stat *st, const void *data) {
  zkl_req *r;
  zkl_op *op = op_enter(data, rc, &r);
  (void)st;
  if (op) {
    if (zkl_is_cut(rc)) op->redo = 1;
    else op_finish(op, rc, op->path);
  }
  op_leave(r);
}

static void op_data_cb(int rc, const char *value, int value_len,
                       const struct Stat *st, const void *data) {
  zkl_req *r;
  zkl_op *op = op_enter(data, rc, &r);
  if (op) {
    if (zkl_is_cut(rc)) {
      op->redo = 1;
    } else if (rc == ZOK) {
      free(op->data);
      op->data = NULL;
      op->datalen = value_len > 0 ? value_len : 0;
      op->result = st ? st->version : 0;
      if (op->datalen && !(op->data = malloc((size_t)op->datalen)))
        op_finish(op, ZSYSTEMERROR, "out of memory");
      else {
        if (op->datalen) memcpy(op->data, value, (size_t)op->datalen);
        op_finish(op, ZOK, NULL);
      }
    } else {
      op_finish(op, rc, op->path);
    }
  }
  op_leave(r);
}

/* FENCED: check(our lock node) + set or create, all or nothing */
static void op_multi_cb(int rc, const void *data) {
  zkl_req *r;
  zkl_op *op = op_enter(data, rc, &r);
  if (!op) { op_leave(r); return; }
  if (zkl_is_cut(rc)) {
    op->redo = 1;
    op->maybe = 1; /* applied or not: nobody can tell any more */
  } else if (rc == ZOK && op->stage == S_FCREATE) {
    op->result = 0;
    op_goto(op, S_FSTAT); /* the create's zxid: the node's czxid */
  } else if (rc == ZOK) {
    op->result = op->mstat.version;
    op->zxid = op->mstat.mzxid;
    op_finish(op, ZOK, NULL);
  } else if (op->mres[0].err != ZOK &&
             op->mres[0].err != ZRUNTIMEINCONSISTENCY) {
    op_finish(op, op->mres[0].err, op->ours);
    if (op->mres[0].err == ZNONODE && !op->maybe) {
      op->err.code = ZKL_ELOCK_LOST;
      snprintf(op->err.msg, sizeof op->err.msg, "lock lost: %s is gone",
               op->ours);
    }
  } else if (op->stage == S_MAIN && rc == ZNONODE) {
    op_goto(op, S_FCREATE);             /* no such node yet: create it */
  } else if (op->stage == S_FCREATE && rc == ZNONODE) {
    op_parents(op, op->path);           /* its parents first */
  } else if (op->stage == S_FCREATE && rc == ZNODEEXISTS) {
    op_goto(op, S_MAIN);                /* someone was quicker: set */
  } else {
    op_finish(op, rc, op->path);
  }
  op_leave(r);
}

static void op_fstat_cb(int rc, const struct Stat *st, const void *data) {
  zkl_req *r;
  zkl_op *op = op_enter(data, rc, &r);
  if (op) {
    if (zkl_is_cut(rc)) {
      op->redo = 1;
    } else {
      if (rc == ZOK) op->zxid = st->czxid;
      op_finish(op, ZOK, NULL);
    }
  }
  op_leave(r);
}

static void op_void_cb(int rc, const void *data) { /* deletes */
  zkl_req *r;
  zkl_op *op = op_enter(data, rc, &r);
  if (!op) { op_leave(r); return; }
  if (zkl_is_cut(rc)) {
    op->redo = 1;
  } else if (op->stage == S_DELOURS) {
    if (rc != ZOK && rc != ZNONODE) op_finish(op, rc, op->ours); /* no auth */
    else if (op->cancel) op_finish(op, ZOK, NULL); /* timed-out enter: gone */
    else op_goto(op, S_MAIN);                      /* leave: look again */
  } else if (op->stage == S_RMREADY) {
    op_finish(op, ZOK, NULL);
  } else {
    op->result = rc == ZOK;
    op_finish(op, rc == ZNONODE ? ZOK : rc, op->path);
  }
  op_leave(r);
}

/* WAIT_GONE, DB_LEAVE's S_WATCH: get-with-watch on a node we wait to go
 * (a missing node leaves no watch behind) */
static void op_gone_cb(int rc, const char *v, int vlen, const struct Stat *st,
                       const void *data) {
  zkl_req *r;
  zkl_op *op = op_enter(data, rc, &r);
  (void)v; (void)vlen; (void)st;
  if (!op) { op_leave(r); return; }
  if (rc != ZOK && rc != ZNONODE) op_trouble(op, rc, op->watch);
  else if (rc == ZOK) { /* watch set: wait */ }
  else if (op->kind == ZKL_OP_WAIT_GONE) op_finish(op, ZOK, NULL);
  else op_goto(op, S_MAIN);                        /* DB_LEAVE: look again */
  op_leave(r);
}

static void op_leave_decide(zkl_op *op, char **m, int n) {
  const char *slash = strrchr(op->ours, '/'); /* (the binding checked it) */
  const char *ours = slash ? slash + 1 : op->ours;
  int i, present = 0;
  for (i = 0; i < n; i++) if (strcmp(m[i], ours) == 0) present = 1;
  if (n == 0) {
    op_goto(op, S_RMREADY);
  } else if (n == 1 && present) {
    op_goto(op, S_DELOURS);
  } else if (present && strcmp(m[0], ours) == 0) {
    op_set_watch(op, zkl_join(op->path, m[n - 1])); /* lowest: wait for */
    op_goto(op, S_WATCH);                           /* the highest      */
  } else if (present) {
    op_goto(op, S_DELOURS);                         /* go, then wait    */
  } else {
    op_set_watch(op, zkl_join(op->path, m[0]));     /* for the lowest   */
    op_goto(op, S_WATCH);
  }
}

static void op_children_cb(int rc, const struct String_vector *sv,
                           const void *data) {
  zkl_req *r;
  zkl_op *op = op_enter(data, rc, &r);
  int i, n = 0;
  char **m;
  if (!op) { op_leave(r); return; }
  if (rc == ZNONODE && op->kind != ZKL_OP_DB_ENTER) {
    op_finish(op, ZOK, NULL); /* no such path: nobody contends, or left */
    op_leave(r);
    return;
  }
  if (rc != ZOK) { op_trouble(op, rc, op->path); op_leave(r); return; }
  if (op->kind == ZKL_OP_CHILDREN) {
    zkl_entry *e = malloc(sizeof *e * (size_t)(sv->count + 1));
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
    op_finish(op, ZOK, NULL);
    op_leave(r);
    return;
  }
  m = malloc(sizeof *m * (size_t)(sv->count + 1));
  if (!m) { op_finish(op, ZSYSTEMERROR, "out of memory"); op_leave(r); return; }
  for (i = 0; i < sv->count; i++)
    if (op_is_member(sv->data[i])) m[n++] = sv->data[i];
  if (op->kind == ZKL_OP_DB_ENTER) {
    /* "ready": entered; enough members: make it; else the children watch
     * wakes us on the next change, and we look again then */
    for (i = 0; i < sv->count; i++)
      if (strcmp(sv->data[i], "ready") == 0) break;
    if (i < sv->count) op_finish(op, ZOK, NULL);
    else if (n >= op->members) op_goto(op, S_MKREADY);
  } else {
    qsort(m, (size_t)n, sizeof *m, op_strcmp);
    op_leave_decide(op, m, n);
  }
  free(m);
  op_leave(r);
}

/* FENCED: check our lock node, then set the target (S_MAIN) or create it
 * (S_FCREATE), in one multi-op. */
static int op_fenced_multi(zkl_op *op, zhandle_t *zh, zkl_req *r) {
  zoo_check_op_init(&op->mops[0], op->ours, -1);
  if (op->stage == S_FCREATE)
    zoo_create_op_init(&op->mops[1], op->path, op->data, op->datalen,
                       &op->c->acl, 0, op->mname, sizeof op->mname);
  else
    zoo_set_op_init(&op->mops[1], op->path, op->data, op->datalen, -1,
                    &op->mstat);
  memset(op->mres, 0, sizeof op->mres);
  return zoo_amulti(zh, 2, op->mops, op->mres, op_multi_cb, r);
}

/* Send the request of the current stage. */
static void op_step(zkl_op *op) {
  zhandle_t *zh = op->c->zh;
  zkl_req *r;
  char *ready = NULL;
  int rc = ZSYSTEMERROR;
  if (op->done) return;
  if (!zkl_client_usable(op->c, NULL)) { op_finish(op, ZINVALIDSTATE, NULL); return; }
  r = op_req(op);
  if (!r) { op_finish(op, ZSYSTEMERROR, "out of memory"); return; }
  switch (op->stage) {
  case S_MAIN:
    switch (op->kind) {
    case ZKL_OP_CHILDREN: case ZKL_OP_DB_LEAVE:
      rc = zoo_aget_children(zh, op->path, 0, op_children_cb, r); break;
    case ZKL_OP_CREATE:
      rc = zoo_acreate(zh, op->path, op->data, op->datalen, &op->c->acl,
                       op->flags, op_string_cb, r); break;
    case ZKL_OP_DB_ENTER:
      rc = zoo_acreate(zh, op->ours, NULL, -1, &op->c->acl, ZOO_EPHEMERAL,
                       op_string_cb, r); break;
    case ZKL_OP_DELETE:
      rc = zoo_adelete(zh, op->path, -1, op_void_cb, r); break;
    case ZKL_OP_SET:
      rc = zoo_aset(zh, op->path, op->data, op->datalen, -1, op_set_cb,
                    r); break;
    case ZKL_OP_GET:
      rc = zoo_aget(zh, op->path, 0, op_data_cb, r); break;
    case ZKL_OP_FENCED:
      rc = op_fenced_multi(op, zh, r); break;
    case ZKL_OP_WAIT_GONE:
      op_set_watch(op, strdup(op->path));
      rc = op->watch ? zoo_aget(zh, op->path, 1, op_gone_cb, r)
                     : ZSYSTEMERROR;
      break;
    }
    break;
  case S_COUNT: /* DB_ENTER: count the members, watch the directory */
    op_set_watch(op, strdup(op->path));
    rc = op->watch ? zoo_aget_children(zh, op->path, 1, op_children_cb, r)
                   : ZSYSTEMERROR;
    break;
  case S_MKREADY:
    ready = zkl_join(op->path, "ready");
    rc = ready ? zoo_acreate(zh, ready, NULL, -1, &op->c->acl, 0,
                             op_string_cb, r) : ZSYSTEMERROR;
    break;
  case S_DELOURS:
    rc = zoo_adelete(zh, op->ours, -1, op_void_cb, r); break;
  case S_RMREADY:
    ready = zkl_join(op->path, "ready");
    rc = ready ? zoo_adelete(zh, ready, -1, op_void_cb, r) : ZSYSTEMERROR;
    break;
  case S_WATCH:
    rc = op->watch ? zoo_aget(zh, op->watch, 1, op_gone_cb, r)
                   : ZSYSTEMERROR;
    break;
  case S_FSTAT:
    rc = zoo_aexists(zh, op->path, 0, op_fstat_cb, r); break;
  case S_FCREATE:
    rc = op_fenced_multi(op, zh, r); break;
  }
  free(ready);
  op_sent(op, r, rc, op->path);
}

/* ---- hooks from the session watcher -------------------------------------- */

void zkl_op_on_watch(zkl_op *op) {
  if (op->done || op->cancel) return;
  if (op->kind == ZKL_OP_DB_LEAVE) op_goto(op, S_MAIN);
  else if (op->kind == ZKL_OP_DB_ENTER) op_goto(op, S_COUNT); /* ready? */
  else op_goto(op, op->stage); /* WAIT_GONE: look again */
}

void zkl_op_on_connected(zkl_op *op) {
  if (op->done) return;
  if (op->redo || op->watch) op_goto(op, op->stage == S_PARENTS ? S_MAIN
                                                                : op->stage);
}

void zkl_op_on_expired(zkl_op *op) {
  if (!op->done) op_finish(op, ZSESSIONEXPIRED, NULL);
}

/* ---- the Lua thread's side ------------------------------------------------ */

static zkl_op *op_new(zkl_client *c, int kind, const char *path,
                      zkl_error *err) {
  zkl_op *op = calloc(1, sizeof *op);
  if (!op || !(op->path = strdup(path))) {
    free(op);
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return NULL;
  }
  op->c = c;
  op->refs = 1;
  op->kind = kind;
  return op;
}

/* Link and start it, or fail with err. */
static zkl_op *op_start(zkl_op *op, zkl_error *err) {
  zkl_client *c = op->c;
  pthread_mutex_lock(&c->mu);
  if (!zkl_client_usable(c, err)) {
    pthread_mutex_unlock(&c->mu);
    free(op->path); free(op->ours); free(op->data); free(op);
    return NULL;
  }
  c->refs++;
  op->next = c->ops;
  if (c->ops) c->ops->prev = op;
  c->ops = op;
  op_step(op);
  pthread_mutex_unlock(&c->mu);
  return op;
}

zkl_op *zkl_op_children(zkl_client *c, const char *path,
                        const char *const *markers, zkl_error *err) {
  zkl_op *op = op_new(c, ZKL_OP_CHILDREN, path, err);
  if (!op) return NULL;
  op->markers = markers;
  return op_start(op, err);
}

static int op_setdata(zkl_op *op, const char *data, int len) {
  op->datalen = data ? len : -1;
  if (!data) return 1;
  op->data = malloc(len > 0 ? (size_t)len : 1);
  if (!op->data) return 0;
  if (len > 0) memcpy(op->data, data, (size_t)len);
  return 1;
}

zkl_op *zkl_op_create(zkl_client *c, const char *path, const char *data,
                      int datalen, int flags, zkl_error *err) {
  zkl_op *op = op_new(c, ZKL_OP_CREATE, path, err);
  if (!op) return NULL;
  op->flags = flags;
  if (!op_setdata(op, data, datalen)) {
    free(op->path); free(op);
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return NULL;
  }
  return op_start(op, err);
}

zkl_op *zkl_op_delete(zkl_client *c, const char *path, zkl_error *err) {
  zkl_op *op = op_new(c, ZKL_OP_DELETE, path, err);
  return op ? op_start(op, err) : NULL;
}

zkl_op *zkl_op_set(zkl_client *c, const char *path, const char *data,
                   int datalen, zkl_error *err) {
  zkl_op *op = op_new(c, ZKL_OP_SET, path, err);
  if (!op) return NULL;
  if (!op_setdata(op, data, datalen)) {
    free(op->path); free(op);
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return NULL;
  }
  return op_start(op, err);
}

zkl_op *zkl_op_get(zkl_client *c, const char *path, zkl_error *err) {
  zkl_op *op = op_new(c, ZKL_OP_GET, path, err);
  return op ? op_start(op, err) : NULL;
}

zkl_op *zkl_op_fenced(zkl_client *c, const char *lock_node, const char *path,
                      const char *data, int datalen, zkl_error *err) {
  zkl_op *op = op_new(c, ZKL_OP_FENCED, path, err);
  if (!op) return NULL;
  if (!op_setdata(op, data, datalen) || !(op->ours = strdup(lock_node))) {
    free(op->data); free(op->path); free(op);
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return NULL;
  }
  return op_start(op, err);
}

zkl_op *zkl_op_wait_gone(zkl_client *c, const char *path, zkl_error *err) {
  zkl_op *op = op_new(c, ZKL_OP_WAIT_GONE, path, err);
  return op ? op_start(op, err) : NULL;
}

zkl_op *zkl_op_db(zkl_client *c, int kind, const char *path,
                  const char *ours, int members, zkl_error *err) {
  zkl_op *op = op_new(c, kind, path, err);
  if (!op) return NULL;
  op->members = members;
  op->ours = strdup(ours);
  if (!op->ours) {
    free(op->path); free(op);
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return NULL;
  }
  return op_start(op, err);
}

int zkl_op_poll(zkl_op *op, unsigned long *gen) {
  int done;
  pthread_mutex_lock(&op->c->mu);
  if (gen) *gen = op->c->gen;
  done = op->done;
  pthread_mutex_unlock(&op->c->mu);
  return done;
}

int zkl_op_cancel(zkl_op *op) {
  int cancelled = 0;
  pthread_mutex_lock(&op->c->mu);
  if (!op->done && !op->cancel) {
    cancelled = 1;
    op->cancel = 1;
    op_set_watch(op, NULL);
    if (op->kind == ZKL_OP_DB_ENTER && zkl_client_usable(op->c, NULL))
      op_goto(op, S_DELOURS); /* a timed-out enter takes its node back */
    else
      op_finish(op, ZOK, NULL);
  }
  pthread_mutex_unlock(&op->c->mu);
  return cancelled;
}

void zkl_op_drop(zkl_op *op) {
  zkl_client *c = op->c;
  pthread_mutex_lock(&c->mu);
  if (!op->done) { /* nobody waits any more: stop, but finish a deletion */
    int member = op->kind == ZKL_OP_DB_ENTER || op->kind == ZKL_OP_DB_LEAVE;
    if (member && !(op->cancel && op->stage == S_DELOURS) &&
        zkl_client_usable(c, NULL)) {
      op->cancel = 1; /* our member node goes (it may be gone: fine) */
      op_set_watch(op, NULL);
      op_goto(op, S_DELOURS);
    } else if (op->kind != ZKL_OP_DELETE) { /* (or the session is gone) */
      op->cancel = 1;
      op_set_watch(op, NULL);
      op_finish(op, ZOK, NULL);
    }
    if (!op->done && !op->selfref) { /* a deletion left: see it through */
      op->selfref = 1;
      op->refs++;
    }
  }
  zkl_op_unref(op);
  pthread_mutex_unlock(&c->mu);
  zkl_client_unref(c);
}
