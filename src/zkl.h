/* zklock C core: shared declarations.  Nothing here knows about Lua. */
#ifndef ZKLOCK_ZKL_H
#define ZKLOCK_ZKL_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <zookeeper/zookeeper.h>

/* Internal to the module however it is built (Makefile or luarocks):
 * luaopen_zklock_core stays the only exported symbol. */
#pragma GCC visibility push(hidden)

/* ---- names.c ---------------------------------------------------------- */
typedef struct zkl_entry {
  const char *name; /* child name, borrowed */
  uint32_t seq;     /* sequence suffix, compared as uint32 */
  int which;        /* index of the marker that matched */
} zkl_entry;

extern const char *const zkl_markers_mutex[];
extern const char *const zkl_markers_lease[];
extern const char *const zkl_markers_rw[];

int zkl_name_parse(const char *name, const char *const *markers,
                   uint32_t *seq, int *which);
/* Keep the contenders among names, sorted by sequence; returns their count. */
int zkl_names_sort(char *const *names, int n, const char *const *markers,
                   zkl_entry *out);
int zkl_names_find(const zkl_entry *e, int n, const char *name);

/* ---- errors ----------------------------------------------------------- */
/* Codes returned to Lua as the third value (zklock.errors). */
#define ZKL_CODES(X)                      \
  X(TIMEOUT, "timeout")                   \
  X(CONNECTION_LOSS, "connection_loss")   \
  X(SESSION_EXPIRED, "session_expired")   \
  X(CLOSED, "closed")                     \
  X(NO_AUTH, "no_auth")                   \
  X(LOCK_LOST, "lock_lost")               \
  X(NO_NODE, "no_node")                   \
  X(NODE_EXISTS, "node_exists")           \
  X(NOT_EMPTY, "not_empty")               \
  X(FORKED, "forked")                     \
  X(ZK_ERROR, "zk_error")

enum zkl_code {
  ZKL_OK = 0,
#define ZKL_ENUM(n, s) ZKL_E##n,
  ZKL_CODES(ZKL_ENUM)
#undef ZKL_ENUM
  ZKL_NCODES
};

const char *zkl_code_name(int code);
int zkl_code_from_rc(int rc);
/* "ZCONNECTIONLOSS: connection loss" */
const char *zkl_rc_name(int rc);

typedef struct zkl_error {
  int code;       /* enum zkl_code */
  char msg[256];
} zkl_error;

void zkl_seterr(zkl_error *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void zkl_seterr_rc(zkl_error *e, int rc, const char *what);

double zkl_now(void); /* monotonic seconds: condvar waits, deadlines */
/* Seconds on a clock that keeps running while the machine is suspended
 * (CLOCK_BOOTTIME): what "last heard" and the session's expiry are
 * measured in, since the server's clock runs on during a suspend
 * (docs/guarantees.md). */
double zkl_bootnow(void);

/* Longest path and data the binding accepts (docs/limits.md). */
#define ZKL_PATH_MAX 4096
#define ZKL_DATA_DEFAULT (1024 * 1024 - 8192)

/* ---- client.c --------------------------------------------------------- */
enum { ZKL_CONNECTING, ZKL_CONNECTED, ZKL_EXPIRED, ZKL_AUTH_FAILED,
       ZKL_CLOSED };

struct zkl_lock;

typedef struct zkl_client {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  zhandle_t *zh;          /* NULL once closed */
  int refs;               /* Lua boxes: the client's and every recipe's */
  int state;
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
  int renewing;           /* the timer is replacing zh (watcher waits) */
  zhandle_t *old_zh;      /* the expired handle being closed */
  double probe_at;        /* when the last probe was sent */
  char *hosts;            /* connect string, for a new session */
  char *auth_scheme, *auth_cred; int auth_len;
  unsigned long n_sessions, n_lost;
  pid_t pid;              /* process that opened the session */
  struct ACL_vector acl;  /* of every node created (owned) */
  int max_data;           /* longest data accepted, bytes */
  struct zkl_lock *locks; /* live lock attempts, for watch dispatch */
  struct zkl_op *ops;     /* live ops, for watch dispatch */
  struct zkl_req *reqs;   /* outstanding requests */
  struct zkl_event *ev_head, *ev_tail; /* callbacks Lua owes the user */
  int n_events;
  unsigned long n_watch_events, n_requests;
  unsigned long n_own_events; /* of those: only about our own lock nodes */
  /* OpenResty: the event loop waits on a unix socket instead of cv.
   * wake_fd is our end: one byte is written when something changed and
   * the last byte has not been taken (wake_pending).  Objects with a wake
   * id queue it on `ready` when they may have changed, so only their own
   * waiters are woken; ready_all: wake every waiter (session events,
   * or the list overflowed). */
  int wake_fd, wake_listen, wake_pending, ready_all;
  char *wake_path;        /* the listening socket's path until accepted */
  double wake_since;      /* monotonic time of the first untaken change */
  unsigned *ready;
  int n_ready, cap_ready;
} zkl_client;

/* Something Lua must call back about (revocation asked), queued on a
 * ZooKeeper thread and taken by the Lua thread (zk:dispatch()). */
enum { ZKL_EV_REVOKE, ZKL_EV_LOST };
typedef struct zkl_event {
  struct zkl_event *next;
  int type;
  char *path; /* the lock node concerned */
} zkl_event;

void zkl_event_push(zkl_client *c, int type, const char *path); /* mu held */

/* The ACL presets; a list is built with zkl_acl_list. */
enum { ZKL_ACL_OPEN, ZKL_ACL_CREATOR, ZKL_ACL_READ };
/* acl: taken over by the client (freed with it, and on failure). */
zkl_client *zkl_client_new(const char *hosts, int timeout_ms,
                           struct ACL_vector *acl, int renew, zkl_error *err);
/* A preset as a vector the caller owns: 0 with err when out of memory. */
int zkl_acl_preset(int preset, struct ACL_vector *out, zkl_error *err);
/* A copy of v with its own strings: 0 with err when out of memory. */
int zkl_acl_copy(const struct ACL_vector *v, struct ACL_vector *out,
                 zkl_error *err);
void zkl_acl_free(struct ACL_vector *v);
/* "cdrwa" -> ZOO_PERM_*; -1 on a letter that is none of those */
int zkl_acl_perms(const char *s);
/* Sent now and again to every new session; 0 with err on failure. */
int zkl_client_add_auth(zkl_client *c, const char *scheme, const char *cred,
                        int len, zkl_error *err);
/* The server answered a request sent at `sent` (rc: its answer): it heard
 * us then.  With mu held. */
void zkl_client_heard(zkl_client *c, double sent, int rc);
/* A lock became held: the timer thread starts probing. mu held. */
void zkl_client_kick(zkl_client *c);
/* heard + timeout: the server may expire the session from then on */
double zkl_client_expiry(const zkl_client *c);
/* seconds before that expiry at which holds stop being believed */
double zkl_client_margin(const zkl_client *c);
void zkl_client_close(zkl_client *c);
void zkl_client_unref(zkl_client *c); /* Lua thread only */
int zkl_client_forked(const zkl_client *c);
/* Wait until c->gen differs from gen or timeout (seconds, <0 = forever).
 * Returns the current gen. */
unsigned long zkl_client_wait(zkl_client *c, unsigned long gen,
                              double timeout);
void zkl_client_changed(zkl_client *c); /* with mu held */
void zkl_client_touch(zkl_client *c, unsigned wake_id); /* with mu held */
/* Lua thread: *slot = id (an object's wake id) under the mutex; returns the
 * change counter read at that moment. */
unsigned long zkl_client_set_wake(zkl_client *c, unsigned *slot, unsigned id);
/* The wake socket (Lua thread): listen on a fresh path (returned, owned
 * by c); accept the one connection made to it.  0 with err on failure. */
const char *zkl_client_wake_listen(zkl_client *c, zkl_error *err);
int zkl_client_wake_accept(zkl_client *c, zkl_error *err);
/* 1 while the session is usable for requests; else sets err. */
int zkl_client_usable(zkl_client *c, zkl_error *err); /* with mu held */

/* Requests: one per outstanding asynchronous call, each holding a reference
 * on its owner.  The completion ignores results of an older epoch. */
typedef struct zkl_req {
  struct zkl_req *prev, *next;
  zkl_client *c;
  struct zkl_lock *l;     /* owner, or NULL */
  struct zkl_op *op;      /* owner, or NULL */
  int epoch;
  int kind;
  double sent;            /* monotonic, taken before sending */
} zkl_req;

zkl_req *zkl_req_new(zkl_client *c, struct zkl_lock *l, struct zkl_op *op,
                     int epoch, int kind); /* with mu held */
void zkl_req_done(zkl_req *r); /* with mu held; drops the owner's ref */

/* ---- op.c: one-shot operations Lua polls for --------------------------- */
enum { ZKL_OP_CHILDREN, ZKL_OP_CREATE, ZKL_OP_DELETE, ZKL_OP_SET,
       ZKL_OP_WAIT_GONE, ZKL_OP_DB_ENTER, ZKL_OP_DB_LEAVE, ZKL_OP_GET,
       ZKL_OP_FENCED };
typedef struct zkl_op {
  struct zkl_op *prev, *next; /* client's list */
  zkl_client *c;
  int refs;       /* the Lua box + outstanding requests */
  int kind;
  int done;       /* 1: finished (err.code says how) */
  int result;     /* CREATE: 1 created, 0 existed; DELETE: 1 deleted;
                     GET: the data's version (data in data/datalen) */
  int epoch, stage, redo, cancel;
  int members;    /* double barrier */
  unsigned wake_id; /* OpenResty waiter's token, or 0 */
  int parents_left, parents_rc;
  zkl_error err;
  const char *const *markers;
  char *path;     /* node (CREATE...) or directory (CHILDREN, DB_*) */
  char *ours;     /* double barrier: our member node's full path */
  char *data; int datalen;
  int flags;      /* CREATE: ZooKeeper create flags */
  char *watch;    /* full path whose watch event moves us on */
  char **names;   /* CHILDREN: sorted contenders */
  int n;
  /* FENCED: check(ours) + set(path) or create(path), in one multi-op */
  zoo_op_t mops[2];
  zoo_op_result_t mres[2];
  struct Stat mstat;
  int64_t zxid;   /* FENCED: the write's mzxid */
  char mname[8];  /* FENCED: the created name (not used) */
  int maybe;      /* FENCED: a try was cut: a failure is not certain */
  int selfref;    /* dropped with a deletion left to do: keeps itself */
} zkl_op;

/* All from the Lua thread; NULL with err set when it cannot start. */
zkl_op *zkl_op_children(zkl_client *c, const char *path,
                        const char *const *markers, zkl_error *err);
zkl_op *zkl_op_create(zkl_client *c, const char *path, const char *data,
                      int datalen, int flags, zkl_error *err);
zkl_op *zkl_op_delete(zkl_client *c, const char *path, zkl_error *err);
zkl_op *zkl_op_set(zkl_client *c, const char *path, const char *data,
                   int datalen, zkl_error *err);
zkl_op *zkl_op_wait_gone(zkl_client *c, const char *path, zkl_error *err);
zkl_op *zkl_op_get(zkl_client *c, const char *path, zkl_error *err);
/* Write data to path (creating it and its parents) only while the node
 * `lock_node` exists, atomically: fails with LOCK_LOST when it does not. */
zkl_op *zkl_op_fenced(zkl_client *c, const char *lock_node, const char *path,
                      const char *data, int datalen, zkl_error *err);
/* enter: create `ours` (ephemeral), then wait for <path>/ready, creating it
 * once `members` member nodes exist; leave: the recipe's leave loop. */
zkl_op *zkl_op_db(zkl_client *c, int kind, const char *path,
                  const char *ours, int members, zkl_error *err);
int zkl_op_poll(zkl_op *op, unsigned long *gen);
int zkl_op_cancel(zkl_op *op); /* 1: stopped it (0: it had finished); stop waiting (a timed-out enter also
                                   deletes its member node) */
void zkl_op_unref(zkl_op *op); /* with mu held */
void zkl_op_drop(zkl_op *op);  /* the Lua box is gone */
void zkl_op_closing(zkl_req *r);
void zkl_op_on_watch(zkl_op *op);      /* mu held */
void zkl_op_on_connected(zkl_op *op);  /* mu held */
void zkl_op_on_expired(zkl_op *op);    /* mu held */

/* shared by lock.c and op.c */
/* 36 chars + NUL, random (v4); 0 when no random bytes can be had
 * (getrandom refused and /dev/urandom unreadable). */
int zkl_uuid(char *out);
char *zkl_join(const char *dir, const char *name);
int zkl_is_cut(int rc);

/* ---- lock.c: mutex / semaphore / read-write lock state machine -------- */
enum { ZKL_KIND_MUTEX, ZKL_KIND_LEASE, ZKL_KIND_READ, ZKL_KIND_WRITE };
enum { ZKL_PENDING, ZKL_HELD, ZKL_DONE, ZKL_FAILED, ZKL_WAITING };

typedef struct zkl_lock {
  struct zkl_lock *prev, *next; /* client's list */
  zkl_client *c;
  int refs;        /* the Lua box + outstanding requests */
  int kind, max_leases;
  int state;       /* internal phase, see lock.c */
  int epoch;
  int abandon;     /* release asked: delete our node, then done */
  int lost;        /* the lock was held and is no longer */
  int create_out;  /* a create is outstanding */
  int list_piped;  /* a listing was sent right behind the create */
  int redo;        /* the last request was cut: redo on reconnect */
  int parents_left, parents_rc;
  char *path;      /* lock directory */
  char *prefix;    /* full path of the node to create, without sequence */
  char *data; int datalen;
  char uuid[40];
  char *node;      /* our child's name once known */
  char *watch;     /* full path of the watched predecessor */
  char *ignore;    /* read lock of the write holder: our own writer node */
  int revocable;   /* watch our node's data for "__REVOKE__" */
  int selfref;     /* given up with work left: keeps itself alive */
  int self_gen;    /* bumped whenever `node` changes: tags self watches */
  int revoke_version; /* data version of the last revocation queued */
  int self_armed;  /* self_gen of the node the self watch was sent for */
  unsigned wake_id;/* OpenResty waiter's token, or 0 */
  int64_t czxid;
  int64_t session; /* session that created our node */
  zkl_error err;
} zkl_lock;

zkl_lock *zkl_lock_new(zkl_client *c, const char *path, int kind,
                       int max_leases, const char *data, int datalen,
                       const char *ignore, zkl_error *err);
void zkl_lock_revocable(zkl_lock *l); /* arm the revocation watch */
char *zkl_lock_nodepath(zkl_lock *l); /* malloc'd, or NULL; mu held */
int zkl_lock_start(zkl_lock *l, zkl_error *err);
/* ZKL_PENDING (a request in flight), ZKL_WAITING (queued behind another
 * node), ZKL_HELD, ZKL_DONE or ZKL_FAILED; *gen for waiting. */
int zkl_lock_poll(zkl_lock *l, unsigned long *gen, zkl_error *err);
/* Give the lock up: delete our node (now or once the create returns). */
void zkl_lock_release(zkl_lock *l);
void zkl_lock_drop(zkl_lock *l); /* the Lua box is gone */
int zkl_lock_held(zkl_lock *l);

/* hooks called by client.c with mu held */
void zkl_lock_on_connected(zkl_lock *l);
void zkl_lock_on_expired(zkl_lock *l);
/* The timer thread: a hold not confirmed by the server by `deadline` is
 * lost.  Returns 1 while l is a hold still believed. */
int zkl_lock_check_lost(zkl_lock *l, double now, double deadline);
/* 3: the node l waits for; 2: l's own node, acted on; 1: l's own node,
 * nothing to do (our own deletion); 0: neither */
int zkl_lock_on_watch(zkl_lock *l, int type, const char *path);
void zkl_lock_unref(zkl_lock *l);   /* with mu held */
void zkl_lock_closing(zkl_req *r);  /* a request the closed library dropped */
void zkl_lock_on_closed(zkl_lock *l); /* the client closed: finish */

/* ---- netutil.c (for zklock.testing) ------------------------------------ */
int zkl_free_port(void);
char *zkl_four_letter(const char *host, int port, const char *cmd,
                      double timeout, zkl_error *err);

#pragma GCC visibility pop

#endif
