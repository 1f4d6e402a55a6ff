/* The life cycle every ZooKeeper task shares (the lock attempt and every
 * op embed a zkl_task first).
 *
 * A task is malloc'd state reference-counted by its Lua box and by each
 * request in flight (zkl_req); given up with work left (a node still to
 * delete), it keeps a reference on itself (selfref) until that work ends.
 * Every move bumps its epoch, and a reply tagged with an older epoch is
 * ignored, so a task never acts twice on one step.  A request whose reply
 * says the connection was cut is redone once the session reconnects
 * (redo); any other failure finishes the task through its class.
 * Everything here runs with the client's mutex held, but the completion
 * entry (zkl_task_enter), which takes it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"

/* ---- requests ----------------------------------------------------------- */

zkl_req *zkl_req_new(zkl_client *c, zkl_task *t, int epoch, int kind) {
  zkl_req *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->c = c; r->t = t; r->epoch = epoch; r->kind = kind;
  r->sent = zkl_bootnow(); /* (compared with heard and expiry) */
  if (t) t->refs++;
  r->next = c->reqs;
  if (c->reqs) c->reqs->prev = r;
  c->reqs = r;
  if (t) c->n_requests++; /* (probes are not counted) */
  return r;
}

void zkl_req_done(zkl_req *r) {
  zkl_client *c = r->c;
  if (r->prev) r->prev->next = r->next; else c->reqs = r->next;
  if (r->next) r->next->prev = r->prev;
  if (r->t) zkl_task_unref(r->t);
  free(r);
  if (!c->reqs && c->closing) pthread_cond_broadcast(&c->cv); /* (close) */
}

/* ---- the task ----------------------------------------------------------- */

int zkl_task_init(zkl_task *t, const zkl_task_class *cls, zkl_client *c,
                  const char *path, zkl_error *err) {
  t->cls = cls;
  t->c = c;
  t->refs = 1;
  t->path = strdup(path);
  if (!t->path) zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
  return t->path != NULL;
}

void zkl_task_link(zkl_task *t) {
  zkl_client *c = t->c;
  t->next = c->tasks;
  if (c->tasks) c->tasks->prev = t;
  c->tasks = t;
  t->linked = 1;
  c->refs++; /* the task's box holds the client (dropped with it) */
}

void zkl_task_unref(zkl_task *t) {
  if (--t->refs > 0) return;
  if (t->linked) {
    zkl_client *c = t->c;
    if (t->prev) t->prev->next = t->next; else c->tasks = t->next;
    if (t->next) t->next->prev = t->prev;
  }
  free(t->path);
  free(t->watch);
  t->cls->free(t);
}

void zkl_task_keep(zkl_task *t) {
  if (t->selfref) return;
  t->selfref = 1;
  t->refs++;
}

void zkl_task_unkeep(zkl_task *t) {
  if (!t->selfref) return;
  t->selfref = 0;
  zkl_task_unref(t);
}

void zkl_task_set_watch(zkl_task *t, char *path) {
  free(t->watch);
  t->watch = path;
}

int zkl_task_watches(const zkl_task *t, const char *path) {
  return t->watch && strcmp(t->watch, path) == 0;
}

/* Inside a reply's completion (zkl_task_enter .. zkl_task_leave_if, on a
 * ZooKeeper completion thread), the waiters are woken once, when it lets
 * go of the mutex; elsewhere at once.  (issue 34: a waiter woken under the
 * mutex only blocks on it, a context switch more per reply) */
static __thread int task_in_reply, task_owed;

void zkl_task_notify(zkl_task *t) {
  zkl_client_touch(t->c, t->wake_id);
  if (task_in_reply) {
    zkl_client_bump(t->c);
    task_owed = 1;
  } else {
    zkl_client_changed(t->c);
  }
}

void zkl_task_seterr(zkl_task *t, int rc, const char *what) {
  if (rc == ZOK) {
    t->err.code = ZKL_OK;
    t->err.msg[0] = '\0';
  } else if (!zkl_is_gone(rc) || zkl_client_usable(t->c, &t->err)) {
    /* (a dead session says best why: "session expired", "client is
     * closed"; zkl_client_usable wrote that) */
    zkl_seterr_rc(&t->err, rc, what);
  }
}

void zkl_task_settle(zkl_task *t) {
  t->epoch++;
  zkl_task_set_watch(t, NULL); /* only now: `what` may have been t->watch */
  zkl_task_notify(t);
  zkl_task_unkeep(t);
}

void zkl_task_trouble(zkl_task *t, int rc, const char *what) {
  if (zkl_is_cut(rc)) t->redo = 1;
  else t->cls->finish(t, rc, what);
}

zkl_req *zkl_task_req(zkl_task *t, int kind) {
  return zkl_req_new(t->c, t, t->epoch, kind);
}

void zkl_task_move(zkl_task *t) {
  t->epoch++;
  t->redo = 0;
}

int zkl_task_sent(zkl_task *t, zkl_req *r, int rc, const char *what) {
  if (r && rc == ZOK) return 1;
  if (!r) {
    t->cls->finish(t, ZSYSTEMERROR, "(out of memory)");
    return 0;
  }
  zkl_req_done(r);
  zkl_task_trouble(t, rc, what);
  return 0;
}

int zkl_task_unsent(zkl_task *t, zkl_req *r, int rc) {
  if (r) zkl_req_done(r);
  if (!zkl_is_cut(rc)) return 0;
  t->redo = 1;
  return 1;
}

zkl_req *zkl_task_enter_req(const void *data, int rc) {
  zkl_req *r = (zkl_req *)data;
  pthread_mutex_lock(&r->c->mu);
  zkl_client_heard(r->c, r->sent, rc);
  task_in_reply = 1;
  task_owed = 0;
  return r;
}

zkl_task *zkl_task_enter(const void *data, int rc, zkl_req **rp) {
  zkl_req *r = zkl_task_enter_req(data, rc);
  *rp = r;
  return r->t->epoch == r->epoch ? r->t : NULL;
}

/* Whatever moved, waiters look again: woken once the mutex is let go of,
 * so that a waiter does not wake only to block on it (a context switch
 * per completion saved: issue 34).  The client outlives the completion:
 * it is freed after zookeeper_close, which joins this thread. */
void zkl_task_leave_if(zkl_req *r, int news) {
  zkl_client *c = r->c;
  if (news) zkl_client_touch(c, r->t->wake_id);
  zkl_req_done(r);
  if (news) zkl_client_bump(c);
  news |= task_owed;
  task_in_reply = task_owed = 0;
  pthread_mutex_unlock(&c->mu);
  if (news) pthread_cond_broadcast(&c->cv);
}

void zkl_task_leave(zkl_req *r) { zkl_task_leave_if(r, 1); }

unsigned long zkl_task_set_wake(zkl_task *t, unsigned id) {
  unsigned long gen;
  pthread_mutex_lock(&t->c->mu);
  t->wake_id = id;
  gen = t->c->gen;
  pthread_mutex_unlock(&t->c->mu);
  return gen;
}

/* ---- parents, as containers (docs/design.md, section 4.2) ---------- */

/* NoNode while making parents: the chroot is missing (it was there when
 * the session began, or the session would not have connected). */
static const char *task_chroot(const zkl_task *t) {
  return t->c->chroot_note ? t->c->chroot_note
                           : "(the chroot of the connect string must exist)";
}

static void task_parent_cb(int rc, const char *value, const void *data) {
  zkl_req *r;
  zkl_task *t = zkl_task_enter(data, rc, &r);
  (void)value;
  if (t) {
    if (rc != ZOK && rc != ZNODEEXISTS && t->parents_rc == ZOK)
      t->parents_rc = rc;
    if (--t->parents_left == 0) {
      if (t->parents_rc == ZOK) t->cls->parents_made(t);
      else if (t->parents_rc == ZNONODE)
        t->cls->finish(t, ZNONODE, task_chroot(t));
      else zkl_task_trouble(t, t->parents_rc, t->path);
    }
  }
  zkl_task_leave(r);
}

/* "/a", "/a/b", ...: answered in order on one session */
void zkl_task_parents(zkl_task *t, const char *target, int self_too) {
  char *p = strdup(target), *s;
  int failed = 0;
  if (!p) { t->cls->finish(t, ZSYSTEMERROR, "out of memory"); return; }
  zkl_task_move(t);
  t->parents_left = 0;
  t->parents_rc = ZOK;
  for (s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
    zkl_req *r;
    int rc;
    if (!s && !self_too) break;
    if (s) *s = '\0';
    r = zkl_task_req(t, -1);
    rc = r ? zoo_acreate(t->c->zh, p, NULL, -1, &t->c->acl, ZOO_CONTAINER,
                         task_parent_cb, r) : ZSYSTEMERROR;
    if (!zkl_task_sent(t, r, rc, p)) { failed = 1; break; }
    t->parents_left++;
    if (!s) break;
    *s = '/';
  }
  free(p);
  if (t->parents_left == 0 && !failed) /* a node under the root */
    t->cls->finish(t, ZNONODE, task_chroot(t));
}
