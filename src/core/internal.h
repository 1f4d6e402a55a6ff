/* The core's own structures, for the files of src/core/ only.
 *
 * The house (docs/design.md, "Source map"): four rooms, bottom up; a file
 * uses only those above it, and the session calls tasks only through
 * their class.  A room's own header (session/session.h, lock/attempt.h)
 * is for its files alone.
 *   base/      helpers, no session: errors.c log.c util.c names.c acl.c
 *              paths.c, and zkcshim.c (the TLS build's C client's need)
 *   session/   the client and its session:
 *     notify.c    change counter, condvar wait, wake-up socket, ready
 *                 list, the event queue: how ZooKeeper's threads wake Lua
 *     liveness.c  what the session knows of the server: usable, last heard
 *     task.c      the life cycle every ZooKeeper task shares: requests,
 *                 enter/leave of completions, watch, finish, trouble,
 *                 parent creation, references
 *     secure.c    TLS and SASL: the request, the checks, the zhandle's
 *                 opening; probe.c: the diagnosis of a first connection
 *                 that does not come
 *     follow.c    following the ensemble: /zookeeper/config read and
 *                 watched, the servers moved by the timer thread
 *     session.c   the zhandle, its watcher, the timer thread, renewal;
 *                 dispatches every event to the tasks through
 *                 zkl_task_class; client.c: the client's life on the Lua
 *                 thread
 *   lock/      the lock attempt (a task), bottom up: node.c guard.c
 *              machine.c rehold.c, the state machine; class.c its class,
 *              api.c the Lua thread's side (lock/attempt.h)
 *   ops/       op.c, the base of ops Lua polls for (a task); the ops, each
 *              an op: oneshot.c write.c barrier.c dbarrier.c holders.c
 *              signal.c
 *
 * Threads: ZooKeeper's completion thread runs every callback; the timer
 * thread probes and declares holds lost; the Lua thread starts, polls and
 * drops.  All of them take the client's mutex first; none calls Lua. */
#ifndef ZKLOCK_INTERNAL_H
#define ZKLOCK_INTERNAL_H

#include <pthread.h>

#include "zkl.h"

#pragma GCC visibility push(hidden)

/* Following the ensemble is on by default only with the C client zklock
 * builds, whose zoo_zklock_set_servers moves on the IO thread
 * (tools/zkclient-follow.patch); the library's zoo_set_servers closes the
 * socket from the calling thread and strands requests in flight
 * (docs/design.md, section 18). */
#ifdef ZOO_ZKLOCK_SET_SERVERS
#define ZKL_FOLLOW_DEFAULT 1
#else
#define ZKL_FOLLOW_DEFAULT 0
#endif

typedef struct zkl_task zkl_task;
typedef struct zkl_req zkl_req;

/* ---- session/secure.c, probe.c ------------------------------------------ */
/* What a secure session asked for: the client's own copy. */
typedef struct zkl_secure {
  char *tls;            /* "ca[,cert,key[,password]]" (zookeeper_init_ssl) */
  char *ca, *cert, *key, *key_password; /* cert, key: NULL for none */
  int no_host_check;    /* tls.verify_host = false */
  char *mechanism, *user, *realm, *service, *server;
  void *secret;         /* sasl_secret_t: the password */
  size_t secret_len;
  void *cbs;            /* sasl_callback_t[]: lives as long as the handle */
  /* what the session's mechanism asked of our callbacks (ZKL_SASL_ASKED_*,
   * atomic: set on the C client's IO thread, zeroed at each session's
   * start): how a refused login is told apart (zkl_secure_sasl_why) */
  int asked;
} zkl_secure;
enum { ZKL_SASL_ASKED_USER = 1, ZKL_SASL_ASKED_PASS = 2 };
/* Why the SASL login of c's session failed (state "auth failed"), in
 * err: refused by the server, a server without SASL, or the mechanism
 * failed here. */
void zkl_secure_sasl_why(const zkl_secure *s, zkl_error *err);
zkl_secure *zkl_secure_new(const zkl_secure_opts *o, zkl_error *err);
void zkl_secure_free(zkl_secure *s);
/* Before any connection: this build can, and the files load. */
int zkl_secure_check(const zkl_secure *s, zkl_error *err);
/* zookeeper_init2, _ssl or _sasl as s asks (s NULL: plaintext) */
zhandle_t *zkl_secure_init(const zkl_secure *s, const char *hosts,
                           watcher_fn fn, int timeout_ms, void *ctx);
/* Why a connection does not come, from a connection (and a TLS handshake)
 * of our own with each server of hosts, with why: ZKL_PROBE_REFUSED,
 * every server refused the connection; ZKL_PROBE_TLS, every one gave a
 * TLS verdict (s NULL: a plaintext client, and the servers speak TLS);
 * ZKL_PROBE_NONE when it cannot tell.  Blocks up to 5.5 s: the timer
 * thread's, without the client's mutex. */
enum { ZKL_PROBE_NONE, ZKL_PROBE_TLS, ZKL_PROBE_REFUSED };
int zkl_secure_probe(const zkl_secure *s, const char *hosts, char *why,
                     size_t n);

struct zkl_client {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  zhandle_t *zh;          /* NULL once closed */
  int refs;               /* Lua boxes: the client's and every task's */
  int state;              /* ZKL_CONNECTING... */
  int closing;
  unsigned long gen;      /* bumped (and cv broadcast) on every change */
  int64_t session_id;
  int timeout_ms;         /* negotiated session timeout */
  int timeout_req;        /* the one asked for */
  /* The server last heard us no earlier than `heard`: the send time of
   * the newest request it answered.  It cannot expire the session before
   * heard + timeout; holds are believed until a margin before that. */
  double heard;
  /* The timer thread: probes the server while a lock is held (so `heard`
   * stays fresh), declares holds lost at heard + timeout, and opens a new
   * session after an expiry (renew). */
  pthread_t timer;
  pthread_cond_t tcv;
  int timer_on, timer_stop, timer_idle, probe_out, renew;
  /* seconds a hold taken with no wait goes without its self watch (the
   * bound on how late a foreign deletion of it is noticed; 0: at once):
   * connect's self_watch_delay (docs/design.md, section 4.5) */
  double self_delay;
  int renewing;           /* the timer is replacing zh (watcher waits) */
  zhandle_t *old_zh;      /* the expired handle being closed */
  double probe_at;        /* when the last probe was sent */
  char *hosts;            /* connect string, for a new session */
  /* Its chroot (NULL: none) must exist: each session looks for it once,
   * at its first connection, and counts as connected only once it was
   * found (chroot_ok); until then ops wait to send (docs/api.md). */
  const char *chroot;     /* (points into hosts) */
  char *chroot_note;      /* "(the chroot /x ... must exist)" */
  int chroot_ok, chroot_out;
  char *auth_scheme, *auth_cred; int auth_len;
  zkl_secure *secure;     /* TLS or SASL; NULL: plaintext */
  /* the diagnosis of a first connection a second late (session.c,
   * probe.c): tls_why says why it failed (state ZKL_TLS_FAILED) */
  /* boot clock: the next diagnosis while the first connection has not
   * come; the gap after it (doubling up to 8 s) */
  double diagnose_at, diagnose_gap;
  char *tls_why;
  /* what the diagnosis found that does not end the client: said when
   * zklock.connect times out (hint_code: ZKL_E...) */
  char *hint;
  int hint_code;
  unsigned long n_sessions, n_lost;
  unsigned long n_attempts; /* lock attempts made: their serials */
  /* Connection-state notices (Curator's model, docs/api.md): queued as
   * events while Lua listens (want_state). */
  int want_state;
  int connected_once;     /* some session has been connected */
  int renewed;            /* a new session is opening after an expiry */
  int lost_noticed;       /* "lost" said for the current trouble */
  double suspended_at;    /* boot clock: when the connection was lost */
  pid_t pid;              /* process that opened the session */
  struct ACL_vector acl;  /* of every node created (owned) */
  int max_data;           /* longest data accepted, bytes */
  zkl_task *tasks;        /* live tasks: every event goes to each */
  zkl_req *reqs;          /* outstanding requests */
  zkl_event *ev_head, *ev_tail; /* callbacks Lua owes the user */
  unsigned long n_watch_events, n_requests;
  unsigned long n_own_events; /* of those: only about our own lock nodes */
  /* OpenResty: the event loop waits on a unix socket instead of cv.
   * wake_fd is our end: one byte is written when something changed and
   * the last byte has not been taken (wake_pending).  Tasks with a wake
   * id queue it on `ready` when they may have changed, so only their own
   * waiters are woken; ready_all: wake every waiter (session events,
   * or the list overflowed). */
  int wake_fd, wake_listen, wake_pending, ready_all;
  double wake_by;         /* monotonic: the timer writes a byte then (0:
                           * none); an event loop's earliest deadline */
  char *wake_path;        /* the listening socket's path until accepted */
  double wake_since;      /* monotonic time of the first untaken change */
  unsigned *ready;
  int n_ready, cap_ready;
  /* Following the ensemble (session/follow.c, docs/design.md section
   * 18): on unless connect's follow_ensemble = false; a read of
   * /zookeeper/config out (again: asked again meanwhile); wanted once
   * the connection's first request is answered; the version
   * applied; one a completion kept for the timer thread to apply; the
   * connect string followed (servers and chroot; NULL: the one given);
   * how many times the servers moved. */
  int follow, cfg_out, cfg_again, cfg_wanted;
  uint64_t cfg_version, cfg_pending_version;
  char *cfg_pending;
  char *followed;
  unsigned long n_followed;
};

/* A callback Lua owes the user (session/notify.c's queue). */
struct zkl_event {
  zkl_event *next;
  int type;   /* ZKL_EV_* */
  char *path; /* the lock node concerned */
  unsigned long attempt; /* the lock attempt's serial; 0: none (state) */
};

/* ---- base/util.c -------------------------------------------------------- */
int zkl_is_cut(int rc); /* the connection was cut: try again later */
int zkl_zh_usable(zhandle_t *zh); /* not expired, not refused */
/* The session is gone (expired, closed): so is every ephemeral node. */
int zkl_is_gone(int rc);
struct timespec zkl_abstime(double end); /* zkl_now time -> timedwait */
/* Set-or-create, as zk:set, the fenced write and the write with a release
 * do it: what follows a write refused with rc, the last try a create
 * (creating) or a set. */
enum { ZKL_WRITE_FAIL, ZKL_WRITE_SET, ZKL_WRITE_CREATE, ZKL_WRITE_PARENTS };
int zkl_write_next(int rc, int creating);
/* The multi-op of that try: create path (name: the created name) or set
 * it (st: its new stat), with the client's ACL. */
void zkl_write_op_init(zoo_op_t *op, zkl_client *c, const char *path,
                       const char *data, int len, int creating,
                       struct Stat *st, char *name, int namelen);

/* ---- session/notify.c (mu held) ----------------------------------------- */
void zkl_client_changed(zkl_client *c); /* bump gen, broadcast, wake byte */
/* the same but the broadcast, which the caller makes once it has let go
 * of the mutex (a completion: task.c) */
void zkl_client_bump(zkl_client *c);
void zkl_client_touch(zkl_client *c, unsigned wake_id); /* queue a waiter */
void zkl_event_push(zkl_client *c, int type, const char *path,
                    unsigned long attempt); /* 0: about no attempt */
void zkl_notify_free(zkl_client *c); /* the unref: events, socket, list */

/* ---- session/liveness.c (mu held) --------------------------------------- */
/* 1 while the session is usable for requests; else sets err. */
int zkl_client_usable(zkl_client *c, zkl_error *err);
/* 0 while the session has yet to find its chroot: nothing may be sent
 * whose answer "no node" would pass for an outcome (ops wait for it). */
int zkl_client_checked(const zkl_client *c);
/* A request of this connection was answered by the server: the ensemble's
 * configuration may be read now (session/follow.c; mu held). */
void follow_answered(zkl_client *c);
/* The server answered a request sent at `sent` (rc: its answer): it heard
 * us then. */
void zkl_client_heard(zkl_client *c, double sent, int rc);
void zkl_client_kick(zkl_client *c); /* a hold began: the timer probes */
void zkl_client_rearm(zkl_client *c); /* the timer reckons its sleep anew */
double zkl_client_expiry(const zkl_client *c);   /* heard + timeout */
double zkl_client_margin(const zkl_client *c); /* holds end this early */

/* ---- session/task.c: the life cycle every ZooKeeper task shares --------- */

/* How the session talks to a task (all with mu held).  Every entry may be
 * NULL but finish and free. */
typedef struct zkl_task_class {
  const char *name;
  void (*on_connected)(zkl_task *t);  /* (re)connected: redo, look again */
  void (*on_expired)(zkl_task *t);    /* the session expired: finish */
  /* A watch event about path: ZKL_ABOUT_* */
  int (*on_watch)(zkl_task *t, int type, const char *path);
  /* The closing library dropped request r of ours (finished ZCLOSING). */
  void (*on_closing)(zkl_task *t, zkl_req *r);
  void (*on_closed)(zkl_task *t);     /* the client closed: finish */
  /* Timer thread: a hold not confirmed by the server by `deadline` is
   * lost, and so is one past its own time limit.  Returns 1 while t holds
   * something still believed; lowers *next to when it must look again. */
  int (*check_lost)(zkl_task *t, double now, double deadline, double *next);
  /* End: rc ZOK, or the failure (what: the path concerned).  It must end
   * with zkl_task_settle. */
  void (*finish)(zkl_task *t, int rc, const char *what);
  void (*parents_made)(zkl_task *t);  /* zkl_task_parents succeeded */
  void (*free)(zkl_task *t);          /* the last reference went */
  /* zk:close() begins, still connected: last requests, answered within
   * its grace (a TTL node's delete: nothing else deletes it) */
  void (*on_close)(zkl_task *t);
} zkl_task_class;

/* What a watch event was to a task (the session counts wake-ups). */
enum { ZKL_ABOUT_NONE, ZKL_ABOUT_OWN_QUIET, ZKL_ABOUT_OWN, ZKL_ABOUT_WAITED };

struct zkl_task {
  zkl_task *prev, *next;  /* the client's list */
  const zkl_task_class *cls;
  zkl_client *c;
  int refs;       /* the Lua box + outstanding requests (+ selfref) */
  int linked;     /* on the client's list (it then holds a client ref) */
  int selfref;    /* given up with work left: keeps itself alive */
  int epoch;      /* bumped on every move: older replies are ignored */
  int redo;       /* the last request was cut: redo on reconnect */
  unsigned wake_id; /* OpenResty waiter's token, or 0 */
  int parents_left, parents_rc;
  char *path;     /* the path the task is about (lock directory, node) */
  char *watch;    /* full path whose watch event moves the task on */
  zkl_error err;
};

/* One per outstanding asynchronous call, holding a reference on its task
 * (none for the session's probes). */
struct zkl_req {
  zkl_req *prev, *next;
  zkl_client *c;
  zkl_task *t;
  int epoch;      /* the task's epoch when sent (or another tag) */
  int kind;       /* the task's own label */
  double sent;    /* boot clock, taken before sending */
};

zkl_req *zkl_req_new(zkl_client *c, zkl_task *t, int epoch, int kind);
void zkl_req_done(zkl_req *r); /* drops the task's reference */

/* 0 with err when out of memory. */
int zkl_task_init(zkl_task *t, const zkl_task_class *cls, zkl_client *c,
                  const char *path, zkl_error *err);
void zkl_task_link(zkl_task *t);  /* on the client's list (mu held) */
void zkl_task_unref(zkl_task *t); /* the last one frees (mu held) */
void zkl_task_keep(zkl_task *t);  /* work left without a box: selfref */
void zkl_task_unkeep(zkl_task *t); /* that work ended (may free t) */
void zkl_task_set_watch(zkl_task *t, char *path); /* takes path */
int zkl_task_watches(const zkl_task *t, const char *path);
void zkl_task_notify(zkl_task *t); /* its waiters look again */
/* The error of a task finishing with rc: a dead session says best why. */
void zkl_task_seterr(zkl_task *t, int rc, const char *what);
/* The common end of every finish: no watch, waiters woken, selfref let
 * go (callers hold a reference of their own, or touch t no more). */
void zkl_task_settle(zkl_task *t);
/* A failure: cut connection -> redo on reconnect; else finish. */
void zkl_task_trouble(zkl_task *t, int rc, const char *what);
zkl_req *zkl_task_req(zkl_task *t, int kind); /* tagged with the epoch */
/* The task moves on: a new epoch (older replies are ignored), nothing to
 * redo. */
void zkl_task_move(zkl_task *t);
/* After sending r (rc: the send's result; r NULL: out of memory):
 * 1 when it went, else it is undone and the task in trouble. */
int zkl_task_sent(zkl_task *t, zkl_req *r, int rc, const char *what);
/* A send that failed (rc) where the task itself decides what follows: r
 * (if any) is undone; 1 when the connection was cut (then redo is set:
 * sent again on reconnect), 0 for any other failure. */
int zkl_task_unsent(zkl_task *t, zkl_req *r, int rc);
/* A completion's first and last words: take the mutex, note that the
 * server heard us; the task, or NULL when the reply is of an older epoch.
 * leave: waiters look again, r is done, the mutex let go. */
zkl_task *zkl_task_enter(const void *data, int rc, zkl_req **rp);
void zkl_task_leave(zkl_req *r);
/* The same for a request tagged with something else than the epoch: the
 * caller judges r->epoch itself; leave_if wakes waiters only on news. */
zkl_req *zkl_task_enter_req(const void *data, int rc);
void zkl_task_leave_if(zkl_req *r, int news);
/* Create the parents of target (and target itself when self_too) as
 * containers; then cls->parents_made, or finish/trouble. */
void zkl_task_parents(zkl_task *t, const char *target, int self_too);
unsigned long zkl_task_set_wake(zkl_task *t, unsigned id); /* Lua thread */

/* ---- ops/op.c: the base of every op ------------------------------------- */

/* Stages every op knows; each op numbers its own from ZKL_STAGE_OWN. */
enum { ZKL_STAGE_MAIN, ZKL_STAGE_PARENTS, ZKL_STAGE_OWN };

typedef struct zkl_op_class {
  zkl_task_class task;     /* (first: a task's cls is this) */
  int kind;                /* ZKL_OP_* */
  void (*step)(zkl_op *op); /* send the request of op->stage */
  /* The stage to run again on the watch event (-1: the current one). */
  int watch_stage;
  /* The stage that follows ZKL_STAGE_PARENTS (once the parents are made,
   * or on a reconnect while making them). */
  int parents_stage;
  /* Cancel (a wait timed out): NULL finishes at once. */
  void (*cancel)(zkl_op *op);
  /* The Lua box is gone (op not done): NULL cancels; work it leaves
   * undone keeps the op alive until done. */
  void (*drop)(zkl_op *op);
  void (*free)(zkl_op *op); /* its own fields (may be NULL) */
} zkl_op_class;

struct zkl_op {
  zkl_task t;
  int done;       /* finished (t.err.code says how) */
  int cancel;     /* nobody waits for the outcome any more */
  int stage;
  int result;     /* see zkl_op_result */
  int64_t zxid;
  char **names; int n;
  char *data; int datalen;
};

#define ZKL_OP_CLASS(op) ((const zkl_op_class *)(op)->t.cls)

/* Allocate size bytes (an op or a struct beginning with one); NULL with
 * err when out of memory.  data NULL: none (datalen -1). */
zkl_op *zkl_op_new(size_t size, const zkl_op_class *cls, zkl_client *c,
                   const char *path, const char *data, int datalen,
                   zkl_error *err);
/* Link and start it (Lua thread), or free it and fail with err. */
zkl_op *zkl_op_start(zkl_op *op, zkl_error *err);
void zkl_op_goto(zkl_op *op, int stage); /* new epoch, send the stage */
/* Nobody waits for the outcome any more, nor for a watch. */
void zkl_op_stop(zkl_op *op);
void zkl_op_finish(zkl_op *op, int rc, const char *what);
void zkl_op_parents(zkl_op *op, const char *target);
/* The class entries most ops share. */
void zkl_op_on_connected(zkl_task *t);
void zkl_op_on_expired(zkl_task *t);
int zkl_op_on_watch(zkl_task *t, int type, const char *path);
void zkl_op_on_closing(zkl_task *t, zkl_req *r);
void zkl_op_task_finish(zkl_task *t, int rc, const char *what);
void zkl_op_parents_made(zkl_task *t);
void zkl_op_task_free(zkl_task *t);
/* Send r for the current stage (rc: the send's result). */
void zkl_op_sent(zkl_op *op, zkl_req *r, int rc, const char *what);
/* Lua thread: the data of a set/create, copied. */

#define ZKL_OP_TASK_CLASS(name, finish)                                    \
  { name, zkl_op_on_connected, zkl_op_on_expired, zkl_op_on_watch,        \
    zkl_op_on_closing, zkl_op_on_expired, NULL, finish,                   \
    zkl_op_parents_made, zkl_op_task_free, NULL }

#pragma GCC visibility pop

#endif
