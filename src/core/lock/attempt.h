/* The lock attempt's state, shared by the files of src/core/lock/ (listed
 * below: the state machine, run by ZooKeeper's completion thread, and the
 * Lua thread's side).  Nothing else sees it: the rest of the core knows an
 * attempt only as a task (internal.h), the binding only as an opaque
 * zkl_attempt (zkl.h). */
#ifndef ZKLOCK_ATTEMPT_H
#define ZKLOCK_ATTEMPT_H

#include "../internal.h"

#pragma GCC visibility push(hidden)

/* the phases of machine.c's diagram */
enum { L_IDLE, L_PARENTS, L_CREATING, L_RECOVER, L_LISTING, L_WATCHING,
       L_HELD, L_LINGER, L_DELETING, L_DONE, L_FAILED };
enum { R_CREATE, R_LIST, R_GET, R_EXISTS, R_DELETE, R_SYNC, R_SELF,
       R_READ, R_WRITE, R_CONTENDERS, R_RENEW };

/* A node the lock guards (docs/design.md, section 4.12): read with the
 * acquire (a get riding behind the listing that makes us holder), written
 * with the release (one multi-op: set or create it, delete our node). */
typedef struct {
  char *rpath;       /* read with the acquire, or NULL */
  int rflight;       /* epoch of the read in flight, -1: none */
  int rpending;      /* held, but the read is not back yet: not told */
  int rrc;           /* the read's result: ZOK or ZNONODE */
  char *rdata; int rlen;
  struct Stat rstat;
  char *wpath;       /* written with the release, or NULL */
  char *wdata; int wlen;
  int wcreate;       /* the node was missing: the multi creates it */
  int wsent;         /* a multi went out: without an answer, it may have
                        been applied */
  int wparents;      /* its parents are being made (then: the multi) */
  int wmaybe;        /* a try was cut: a failure is not certain */
  int wdone, wrc;    /* the write's outcome (wrc: a ZooKeeper code) */
  int64_t wversion, wzxid;
  zoo_op_t mops[2];
  zoo_op_result_t mres[2];
  struct Stat wstat;
  char wname[8];
} lock_guard;

struct zkl_attempt {
  zkl_task t;      /* path: the lock directory; watch: the predecessor */
  int kind, max_leases;
  unsigned long serial; /* the client's n-th attempt: tags its events */
  int state;       /* L_* */
  int abandon;     /* release asked: delete our node, then done */
  int lost;        /* the lock was held and is no longer */
  int create_out;  /* a create is outstanding */
  int list_piped;  /* a listing was sent right behind the create */
  char *prefix;    /* full path of the node to create, without sequence */
  char *data; int datalen;
  char uuid[40];
  char *node;      /* our child's name once known */
  char *ignore;    /* read lock of the write holder: our own writer node */
  int revocable;   /* watch our node's data for "__REVOKE__" */
  int notify_held; /* queue a "held" event when it comes to hold */
  int sole;        /* the watched predecessor is all that holds us back:
                      its deletion means we hold (no listing) */
  int ahead;       /* nodes ahead of ours at the first listing after our
                      create (-1: none yet): on_queued's position */
  /* a TTL node (docs/design.md, section 4.15): persistent, expired by
   * the server ttl_ms after its last change; renewed (a set of its data)
   * every third of that while queued or held (machine.c) */
  int64_t ttl_ms;  /* 0: ephemeral, as every other node */
  double renewed;  /* boot clock: send time of the create or renewal last
                      answered (0: none yet, a node found again) */
  double renew_at; /* boot clock: the next renewal is due */
  int renew_out;   /* a renewal is in flight */
  int64_t ttl_mtime; /* the node's last change, on the server's clock (ms:
                      the create's, the adopted node's, the last
                      renewal's; 0: none known) */
  int ttl_by_id;   /* named after the connect's `id` (and a slot), found
                      again by it; else a drawn uuid, as any node */
  int confirming;  /* held, but the wait for it outlasted what the last
                      answered request lets us believe (a sole
                      predecessor's deletion, no listing): the acquirer
                      is told once our node's get answers (machine.c,
                      lock_hold; docs/design.md, section 9.2) */
  int self_gen;    /* bumped whenever `node` changes: tags self watches */
  int revoke_version; /* data version of the last revocation queued */
  int self_armed;  /* self_gen of the node the self watch was sent for */
  int self_live;   /* that watch is set on the server (its get answered,
                      no event since): a deletion of ours would be told */
  double self_due; /* boot clock: when the deferred self watch of a hold
                      taken with no wait goes (0: none due; machine.c,
                      lock_arm_self; docs/design.md, section 4.5) */
  int del_cut;     /* our delete was cut in flight (sent again) */
  int del_gone;    /* our delete found no node, never cut: someone else
                      deleted it first (a hold lost, noticed late: its
                      self watch was deferred; section 4.5) */
  int64_t czxid;
  int64_t session; /* session that created our node */
  /* written by hold_limit only (node.c) */
  double max_hold; /* seconds a hold may last (0: no limit) */
  double hold_until; /* boot clock: when the current hold ends, or 0 */
  lock_guard *g;   /* a guarded node read or written, or NULL */
  /* a downgraded read: the write attempt whose node keeps later writers
   * out (a reference); the read holds only while it does, and ends with
   * it (docs/design.md, section 5) */
  struct zkl_attempt *over;
  int resting;     /* attempts whose `over` is this one (a read resting on
                      this write: lock_end_resting looks for them only
                      then, not through every task of the client) */
  /* a node held again with no request (rehold.c): a released hold may
   * linger (L_LINGER) until linger_until; a hold that lingers or is passed
   * in a cohort watches the directory for contenders */
  double linger_until; /* boot clock; 0: not lingering */
  int lingers;     /* the directory watch is ours (set while lingering) */
  int contended;   /* another node was seen in the directory: no reuse */
  int listed;      /* the last listing sent with that watch has answered:
                      `contended` is up to date (no reuse until then) */
  int listed_once; /* one has: a listing out now follows a change (or a
                      reconnection), a contender perhaps among it */
};

#define ATTEMPT(t) ((zkl_attempt *)(t))

extern const zkl_task_class zkl_attempt_class;

/* The files of src/core/lock/, bottom up (a file calls only those listed
 * before it; the session reaches an attempt through its class):
 *   node.c      our node: name, path, finish, delete; believed held (the
 *               margin, the hold's time limit)?
 *   guard.c     the guarded node: read with the acquire, written with the
 *               release (section 4.12)
 *   machine.c   the state machine: create, list, wait, hold, recover, the
 *               self watch, release
 *   rehold.c    a node held again with no request: lock caching (section
 *               4.13) and a cohort's pass (section 16)
 *   class.c     the class: what the session tells an attempt
 *   api.c       the Lua thread's side: make, start, poll, drop
 * All with the client's mutex held but the zkl_attempt_* entry points. */

/* node.c */
void lock_set_node(zkl_attempt *l, const char *name); /* copied; NULL: none */
char *lock_nodepath(const zkl_attempt *l); /* our node's full path, or NULL */
void lock_lost_event(zkl_attempt *l); /* a hold ended: on_lost queued */
void lock_finish(zkl_task *t, int rc, const char *what);
void lock_delete(zkl_attempt *l);     /* our node goes, then done */
int lock_margin_ok(zkl_attempt *l);   /* the server cannot have expired us */
/* a TTL node: the server cannot have expired it by now (else 1) */
int lock_ttl_ok(const zkl_attempt *l, double now);
/* A hold's time limit: set by hold_limit alone (max_hold seconds for
 * every hold, 0: none; the hold that is on ends `lasts` seconds from now,
 * 0 or ZKL_NO_LIMIT: never); read by lock_overdue alone, but for the
 * timer thread's wake-up (lock_check_lost). */
void hold_limit(zkl_attempt *l, double max_hold, double lasts);
int lock_overdue(const zkl_attempt *l, double now); /* past its max_hold */
int lock_held_now(zkl_attempt *l);    /* held, within margin and max_hold */
void lock_free(zkl_task *t);

/* guard.c */
void guard_read(zkl_attempt *l);      /* the guarded read, this epoch */
void guard_write(zkl_attempt *l);     /* the write-with-release multi */

/* machine.c */
void lock_parents(zkl_attempt *l);    /* make the directory and its parents */
void lock_parents_made(zkl_task *t);
void lock_create(zkl_attempt *l);     /* queue: create our node */
void lock_list(zkl_attempt *l);       /* list the directory, evaluate */
void lock_watch_dir(zkl_attempt *l);  /* a lease: watch the directory */
void lock_watch_self(zkl_attempt *l); /* read (and watch) our own node */
/* the timer thread: a deferred self watch due by now goes (else *next) */
void lock_self_due(zkl_attempt *l, double now, double *next);
void lock_node_gone(zkl_attempt *l);  /* deleted by someone else */
/* a TTL node: renew it now; the timer thread: renew one due by now (else
 * *next) */
void lock_renew(zkl_attempt *l);
void lock_renew_due(zkl_attempt *l, double now, double *next);
void lock_blocker_gone(zkl_attempt *l); /* the watched predecessor went */
void lock_release_locked(zkl_attempt *l); /* give it up: our node goes */
void lock_lost(zkl_attempt *l);       /* a hold ends without its owner's
                                         word: on_lost, our node goes, and
                                         the reads resting on it end too */
/* w's node goes: reads resting on it end as lost holds */
void lock_end_resting(zkl_attempt *w);

/* rehold.c */
void rehold_watch(zkl_attempt *l);    /* list the directory, with a watch */

#pragma GCC visibility pop

#endif
