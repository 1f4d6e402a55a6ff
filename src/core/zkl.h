/* zklock's C core, as the Lua binding sees it: opaque objects and the
 * functions that drive them.  Nothing here knows about Lua; nothing here
 * shows a struct of the core (they live in core/internal.h).
 *
 * The objects: a client (one ZooKeeper session, renewed after an expiry),
 * lock attempts (one node's life in a lock's queue: docs/design.md,
 * section 4) and ops (one-shot tasks Lua polls for: listings, writes,
 * barrier waits, the double barrier).  Every call below is made from the
 * Lua thread; each takes the client's mutex itself where it must.
 * Each heading names the files, under src/core/, that define what
 * follows it; the layout of src/ is in docs/design.md, "Source map". */
#ifndef ZKLOCK_ZKL_H
#define ZKLOCK_ZKL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <zookeeper/zookeeper.h>

/* Internal to the module however it is built (Makefile or luarocks):
 * luaopen_zklock_core stays the only exported symbol. */
#pragma GCC visibility push(hidden)

typedef struct zkl_client zkl_client;
typedef struct zkl_attempt zkl_attempt;
typedef struct zkl_op zkl_op;
typedef struct zkl_event zkl_event;

/* ---- base/errors.c ------------------------------------------------------ */
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
  X(TLS, "tls")                           \
  X(UNKNOWN_HOST, "unknown_host")         \
  X(BAD_VERSION, "bad_version")           \
  X(ZK_ERROR, "zk_error")

enum zkl_code {
  ZKL_OK = 0,
#define ZKL_ENUM(n, s) ZKL_E##n,
  ZKL_CODES(ZKL_ENUM)
#undef ZKL_ENUM
  ZKL_NCODES
};

typedef struct zkl_error {
  int code;       /* enum zkl_code */
  char msg[256];
} zkl_error;

const char *zkl_code_name(int code);
int zkl_code_from_rc(int rc);
const char *zkl_rc_name(int rc); /* "ZCONNECTIONLOSS" */
void zkl_seterr(zkl_error *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "ZCONNECTIONLOSS: connection loss what" */
void zkl_seterr_rc(zkl_error *e, int rc, const char *what);
/* connection_loss: a write (what) was cut in flight and not confirmed
 * since, so it may have been applied */
void zkl_seterr_maybe(zkl_error *e, const char *what);

/* ---- base/util.c -------------------------------------------------------- */
double zkl_now(void); /* monotonic seconds: condvar waits, deadlines */
pid_t zkl_pid(void);  /* this process's id (kept; made again after fork) */
/* Seconds on a clock that keeps running while the machine is suspended
 * (CLOCK_BOOTTIME): what "last heard" and the session's expiry are
 * measured in, since the server's clock runs on during a suspend
 * (docs/guarantees.md). */
double zkl_bootnow(void);
/* 36 chars + NUL, random (v4); 0 when no random bytes can be had
 * (getrandom refused and /dev/urandom unreadable). */
int zkl_uuid(char *out);
/* 16 bytes b as a uuid of `version` (its version and variant bits set in
 * b): 36 chars + NUL */
void zkl_uuid_format(unsigned char *b, int version, char *out);
char *zkl_join(const char *dir, const char *name); /* malloc'd, or NULL */

/* ---- base/log.c: the C client's log ------------------------------------- */
/* Every session logs through zkl_log_line; lines go to stderr, or, once
 * captured, to a bounded queue the Lua thread empties with zkl_log_pop
 * (1: a line copied into buf, truncated to size; 0: none; *dropped: lines
 * lost to a full queue since the last pop). */
enum { ZKL_LOG_ERROR = 1, ZKL_LOG_WARN, ZKL_LOG_INFO, ZKL_LOG_DEBUG };
void zkl_log_line(const char *msg);
/* zklock's own line at `level` (formatted as the C client's, "...:ZOO_INFO@
 * where@0: text"): logged as zkl_log_line does when the C client logs at
 * that level (zkl_log_set_level, which the binding calls with
 * zoo_set_debug_level's), else dropped */
void zkl_log_note(int level, const char *msg);
void zkl_log_set_level(int level);
void zkl_log_capture(int on);
int zkl_log_pop(char *buf, size_t size, int *level, unsigned long *dropped);

/* ---- base/paths.c: what ZooKeeper accepts (pure functions) -------------- */
/* Longest path and data the binding accepts (docs/limits.md). */
#define ZKL_PATH_MAX 4096
#define ZKL_DATA_DEFAULT (1024 * 1024 - 8192)
/* Why the path p (len bytes) is refused, or NULL when ZooKeeper takes it:
 * absolute, not the root, at most max bytes (0: ZKL_PATH_MAX; less for a
 * recipe's directory, whose nodes' paths are longer), no trailing '/', no
 * empty, "." or ".." component, no NUL, valid UTF-8 without a control
 * character (U+0001-U+001F, U+007F-U+009F) or another character the
 * server refuses (U+D800-U+F8FF, U+FFF0-U+FFFF, beyond U+FFFF).  The
 * reason is a literal or written into buf (size bytes). */
const char *zkl_path_problem(const char *p, size_t len, size_t max,
                             char *buf, size_t size);
/* Why the connect string h (len bytes) is refused, or NULL:
 * "host:port[,host:port...][/chroot]", no NUL, no empty host, a port from
 * 1 to 65535, a chroot that is a path as above (or "/": none). */
const char *zkl_hosts_problem(const char *h, size_t len, char *buf,
                              size_t size);
/* The chroot of a connect string (from its first '/'), or NULL: none, or
 * just "/". */
const char *zkl_hosts_chroot(const char *hosts);

/* ---- base/ensemble.c: an ensemble's configuration (pure function) ------- */
/* The client addresses in data (len bytes of /zookeeper/config) as a
 * connect string "host:port,..." written to out (size bytes), and the
 * configuration's version.  Returns how many members it lists (0: none
 * has a client address, or the data is empty), or -1 when the data does
 * not parse or out is too small (out is then ""). */
int zkl_config_hosts(const char *data, size_t len, char *out, size_t size,
                     uint64_t *version);

/* ---- base/names.c: lock node names (pure functions) --------------------- */
typedef struct zkl_entry {
  const char *name; /* child name, borrowed */
  uint32_t seq;     /* sequence suffix, compared as uint32 */
  int which;        /* index of the marker that matched */
} zkl_entry;

/* The node kinds of the lock recipes; a family's markers recognise its
 * nodes (the read/write family: which 0 read, 1 write). */
enum { ZKL_KIND_MUTEX, ZKL_KIND_LEASE, ZKL_KIND_READ, ZKL_KIND_WRITE,
       ZKL_KIND_LATCH };
enum { ZKL_FAMILY_MUTEX, ZKL_FAMILY_LEASE, ZKL_FAMILY_RW, ZKL_FAMILY_READ,
       ZKL_FAMILY_WRITE, ZKL_FAMILY_LATCH };
const char *const *zkl_markers(int family);
int zkl_kind_family(int kind);
const char *zkl_kind_marker(int kind); /* what a new node's name carries */

int zkl_name_parse(const char *name, const char *const *markers,
                   uint32_t *seq, int *which);
/* Keep the contenders among names, sorted by sequence; returns their count. */
int zkl_names_sort(char *const *names, int n, const char *const *markers,
                   zkl_entry *out);
int zkl_names_find(const zkl_entry *e, int n, const char *name);
/* Which node must go before e[idx] holds a lock of `kind` (e sorted with
 * the kind's family markers): its index, or -1 when e[idx] holds.  A
 * reader whose own writer is `ignore` (the write holder reading) is not
 * held back by it. */
int zkl_names_blocker(int kind, int max_leases, const zkl_entry *e, int idx,
                      const char *ignore);
/* zkl_names_blocker's verdict in one pass over an unsorted listing, for a
 * mutex (one holder), a latch, a read or a write lock: O(n), no
 * allocation, for the completion thread that holds the client's mutex.
 * 0: `ours` is not in `names`; 1: *blocker is the name to wait for (NULL:
 * we hold), and *ahead how many nodes ahead of ours hold us back (0 when
 * we hold; a reader counts the writers ahead).  With 1 (the blocker sole)
 * and it gone and nothing else changed, we hold: sequence numbers only
 * grow, so no node can come in ahead of ours, and the deletion of a sole
 * blocker means we hold, without listing again (docs/design.md, section
 * 4.4). */
int zkl_names_scan(int kind, char *const *names, int n, const char *ours,
                   const char *ignore, const char **blocker, int *ahead);
/* The holders of a listing sorted with `family`'s markers: their indexes
 * into e, in order (out has room for n); returns how many. */
int zkl_names_holders(int family, int max_leases, const zkl_entry *e, int n,
                      int *out);
/* Does a writer's node sort between node w and node r (e sorted with the
 * read/write markers)?  A downgraded writer keeps its write node then
 * (docs/design.md, section 5).  w missing: 0; r missing: any
 * writer after w. */
int zkl_names_writer_between(const zkl_entry *e, int n, const char *w,
                             const char *r);

/* ---- base/acl.c --------------------------------------------------------- */
enum { ZKL_ACL_OPEN, ZKL_ACL_CREATOR, ZKL_ACL_READ };
/* A preset as a vector the caller owns: 0 with err when out of memory. */
int zkl_acl_preset(int preset, struct ACL_vector *out, zkl_error *err);
/* A copy of v with its own strings: 0 with err when out of memory. */
int zkl_acl_copy(const struct ACL_vector *v, struct ACL_vector *out,
                 zkl_error *err);
void zkl_acl_free(struct ACL_vector *v);
/* "cdrwa" -> ZOO_PERM_*; -1 on a letter that is none of those */
int zkl_acl_perms(const char *s);

/* ---- session/secure.c: what this build can secure ----------------------- */
/* How a session is secured (docs/security.md); all NULL: plaintext.
 * TLS: ca, cert and key (PEM files), key_password for an encrypted key;
 * cert and key both NULL: no client certificate (ssl.clientAuth=none);
 * no_host_check: the server's certificate need not name the host dialled;
 * SASL: mechanism ("DIGEST-MD5", "GSSAPI"...), user, password (of
 * password_len bytes), realm, and the server's service and name (default
 * "zookeeper" and "zk-sasl-md5", as Java clients).  Strings are copied. */
typedef struct zkl_secure_opts {
  const char *ca, *cert, *key, *key_password;
  const char *mechanism, *user, *password, *realm, *service, *server;
  size_t password_len;
  int no_host_check;
} zkl_secure_opts;
/* 1 when the linked C client has zookeeper_init_ssl; SASL: when built
 * with Cyrus SASL's headers */
int zkl_tls_available(void);
/* 1 when the C client checks the server's certificate against the host
 * dialled, and takes a CA without a client certificate (the TLS build:
 * tools/zkclient-tls-peer.patch) */
int zkl_tls_peer(void);
int zkl_sasl_available(void);
/* 1 when the linked C client runs completions on its IO thread
 * (docs/design.md, section 2.1) */
int zkl_io_completions(void);
/* Does a client follow the ensemble unless told not to (the C client
 * zklock builds: docs/design.md, section 18)? */
int zkl_follow_default(void);

/* ---- session/client.c: the client --------------------------------------- */
/* ZKL_NO_CHROOT: the session found no node at its connect string's chroot
 * (it stays so; every request fails with NO_NODE naming the chroot). */
/* ZKL_TLS_FAILED: the first connection did not come, and a handshake of
 * our own said why (a certificate refused, a plaintext port...:
 * session/probe.c); it stays so, and every request fails with TLS. */
enum { ZKL_CONNECTING, ZKL_CONNECTED, ZKL_EXPIRED, ZKL_AUTH_FAILED,
       ZKL_CLOSED, ZKL_NO_CHROOT, ZKL_TLS_FAILED };

/* acl: taken over by the client (freed with it, and on failure).
 * sec: NULL, or how the session is secured (checked first: a file that
 * does not load, an expired certificate, no TLS in this build fail here
 * with TLS). */
zkl_client *zkl_client_new(const char *hosts, int timeout_ms,
                           struct ACL_vector *acl, int renew, int max_data,
                           const zkl_secure_opts *sec, zkl_error *err);
/* Sent now and again to every new session; 0 with err on failure. */
int zkl_client_add_auth(zkl_client *c, const char *scheme, const char *cred,
                        int len, zkl_error *err);
void zkl_client_close(zkl_client *c);
void zkl_client_unref(zkl_client *c);
int zkl_client_forked(const zkl_client *c);
pid_t zkl_client_pid(const zkl_client *c);
int zkl_client_max_data(const zkl_client *c);
const char *zkl_client_chroot(const zkl_client *c); /* NULL: none */
/* connect's follow_ensemble (on when the client is made) */
void zkl_client_follow(zkl_client *c, int on);
/* The servers the client uses now (malloc'd, no chroot; NULL: out of
 * memory) and how many times following the ensemble moved them. */
char *zkl_client_servers(zkl_client *c, unsigned long *moves);
/* ZKL_CONNECTING...; *gen (if given): the change counter at that moment */
int zkl_client_state(zkl_client *c, unsigned long *gen);
int64_t zkl_client_session_id(zkl_client *c); /* 0 before the first */
/* Why the client takes no requests (expired, auth failed, no chroot,
 * closed): 1 with err; 0 while it does. */
int zkl_client_failure(zkl_client *c, zkl_error *err);
int zkl_client_timeout_ms(zkl_client *c);     /* negotiated */
/* 1 with err when the first connection is late and the diagnosis
 * (session/probe.c) found why without ending the client: every server refused
 * the connection (CONNECTION_LOSS), or a plaintext client's servers speak
 * TLS (TLS); 0 otherwise. */
int zkl_client_hint(zkl_client *c, zkl_error *err);

typedef struct zkl_stats {
  unsigned long sessions, lost, watch_events, own_events, requests;
  /* seconds since the send time of the latest request the server
   * answered ("last heard", session/liveness.c); < 0: none yet */
  double since_heard;
} zkl_stats;
void zkl_client_stats(zkl_client *c, zkl_stats *out);

/* ---- session/notify.c: waking Lua --------------------------------------- */
/* Wait until the change counter differs from gen or timeout seconds
 * pass (ZKL_FOREVER, or anything from 1e9 s: no limit).  A timeout that
 * has run out (<= 0, negative included) does not wait.  Returns the
 * current counter. */
#define ZKL_FOREVER 1e30
unsigned long zkl_client_wait(zkl_client *c, unsigned long gen,
                              double timeout);
/* The wake socket (OpenResty): listen on a fresh path (returned, owned
 * by c); accept the one connection made to it.  0 with err on failure. */
const char *zkl_client_wake_listen(zkl_client *c, zkl_error *err);
int zkl_client_wake_accept(zkl_client *c, zkl_error *err);
/* The wake socket for any event loop (zk:fd(), docs/api.md "Waiting in
 * an event loop"): a socket pair; the caller owns, reads and closes the
 * returned end (non-blocking).  -1 with err when one is set up already. */
int zkl_client_wake_pair(zkl_client *c, zkl_error *err);
/* Have a byte written at monotonic time `at` (replacing the time asked
 * for before; 0: none). */
void zkl_client_wake_by(zkl_client *c, double at);
/* Take the wake ids of what changed since the last call (*ids malloc'd,
 * the caller frees it), whether every waiter must look (*all), and when
 * the first change happened (*since, monotonic); returns whether a byte
 * was written for them.  The next change writes to the socket again. */
int zkl_client_take_ready(zkl_client *c, unsigned **ids, int *n, int *all,
                          double *since);

/* ---- session/notify.c, client.c: callbacks Lua owes the user ------------ */
/* Queued on a ZooKeeper thread, taken by the Lua thread. */
/* ZKL_EV_HELD: an attempt that asked for it (zkl_attempt_notify_held) came
 * to hold (its node's path).  Every event of a lock attempt carries the
 * attempt's serial (zkl_attempt_serial), so that news of an attempt its
 * owner has left behind is told apart from news of the current one; a
 * state notice carries 0. */
enum { ZKL_EV_REVOKE, ZKL_EV_LOST, ZKL_EV_STATE, ZKL_EV_HELD };
/* Revocation (Curator Revoker): a revoker sets a holder's node data to
 * this; a revocable holder's self watch reads it (docs/design.md, 8). */
#define ZKL_REVOKE "__REVOKE__"
/* Queue connection-state notices (ZKL_EV_STATE, the path being the new
 * state: "connected", "suspended", "reconnected", "lost", "renewed")
 * from now on, or stop (Lua thread). */
void zkl_client_want_state(zkl_client *c, int on);
/* How long a hold taken with no wait goes without its self watch
 * (connect's self_watch_delay; 0: at once; docs/design.md, section 4.5). */
#define ZKL_SELF_DELAY 0.1
void zkl_client_self_delay(zkl_client *c, double seconds);
zkl_event *zkl_client_take_events(zkl_client *c); /* the caller owns them */
/* The event's type, node path and attempt serial (0: none); returns the
 * next one, or NULL. */
const zkl_event *zkl_event_read(const zkl_event *e, int *type,
                                const char **path, unsigned long *attempt);
void zkl_events_free(zkl_event *e);

/* ---- lock/api.c: one lock attempt, as the Lua thread drives it ---------- */
enum { ZKL_PENDING, ZKL_HELD, ZKL_DONE, ZKL_FAILED, ZKL_WAITING };

zkl_attempt *zkl_attempt_new(zkl_client *c, const char *path, int kind,
                             int max_leases, const char *data, int datalen,
                             const char *ignore, zkl_error *err);
zkl_client *zkl_attempt_client(const zkl_attempt *l);
/* This attempt's serial: unique among the client's attempts, never 0;
 * its events carry it. */
unsigned long zkl_attempt_serial(const zkl_attempt *l);
const char *zkl_attempt_path(const zkl_attempt *l); /* the lock directory */
void zkl_attempt_revocable(zkl_attempt *l); /* arm the revocation watch */
/* A hold lasts at most `seconds` (0: no limit): then it ends as a lost
 * one (on_lost, our node deleted), whatever the holder is doing. */
void zkl_attempt_max_hold(zkl_attempt *l, double seconds);
/* From this many seconds on, an extend's limit is none. */
#define ZKL_NO_LIMIT 1e9
/* The hold that is on now (held, not lost, within its limit and the
 * liveness margin) ends `seconds` from now (> 0; ZKL_NO_LIMIT or more,
 * HUGE_VAL included: never): 1.  Otherwise 0, and nothing changes: an
 * ended hold is not revived.  Only this hold: the node's next hold (a
 * relock, a cohort's pass) lasts its own max_hold (docs/design.md,
 * section 9.6). */
int zkl_attempt_extend(zkl_attempt *l, double seconds);
/* Queue a ZKL_EV_HELD event (its node's path) when it comes to hold. */
void zkl_attempt_notify_held(zkl_attempt *l);
/* Before the start, a mutex's: its node is persistent with a TTL of
 * `seconds`, renewed while queued or held, and (by_id: the connect's
 * own `id` is the data) named after the participant id and a slot,
 * which finds it again after a restart (docs/design.md, section 4.15).
 * 0 with err otherwise. */
int zkl_attempt_ttl(zkl_attempt *l, double seconds, int by_id,
                    zkl_error *err);
int zkl_attempt_start(zkl_attempt *l, zkl_error *err);
/* ZKL_PENDING (a request in flight), ZKL_WAITING (queued behind another
 * node), ZKL_HELD, ZKL_DONE or ZKL_FAILED; *gen for waiting. */
int zkl_attempt_poll(zkl_attempt *l, unsigned long *gen, zkl_error *err);
/* Give the lock up: delete our node (now or once the create returns). */
void zkl_attempt_release(zkl_attempt *l);
void zkl_attempt_drop(zkl_attempt *l); /* the Lua box is gone */
int zkl_attempt_held(zkl_attempt *l);
/* The hold ran past its max_hold (the timer thread may not have ended it
 * yet): nothing may be written under it any more. */
int zkl_attempt_overdue(zkl_attempt *l);
/* Our node's name into node (size bytes) and its czxid: 0 when none. */
int zkl_attempt_info(zkl_attempt *l, char *node, size_t size, int64_t *czxid);
/* Where the first listing after our node's create put it: how many nodes
 * ahead of ours held it back (0: it held at once; a lease: the leases over
 * the count), or -1 before it (docs/api.md, "A place in the queue"). */
int zkl_attempt_ahead(zkl_attempt *l);
/* A downgraded read (docs/design.md, section 5): l holds only while the
 * write attempt w (same client) does, and ends with it; NULL: on its own
 * again. */
void zkl_attempt_rest_on(zkl_attempt *l, zkl_attempt *w);
/* From now on a change of l queues `id` on the ready list (OpenResty);
 * returns the change counter read at that moment. */
unsigned long zkl_attempt_set_wake(zkl_attempt *l, unsigned id);

/* ---- lock/rehold.c: a node held again with no request ------------------- */
/* Lock caching (docs/design.md, section 4.13).  linger: end the hold but
 * keep the node up to `seconds`, watching for contenders (1), or release
 * it the plain way (0).  relock: hold the lingering node again, at once,
 * with no request (1), or give it up (0: take a new attempt); -1 (only
 * with may_wait): not known yet, the listing is out: ask again once the
 * client's generation moves. */
int zkl_attempt_linger(zkl_attempt *l, double seconds);
int zkl_attempt_relock(zkl_attempt *l, double max_hold, int may_wait);
/* Lock cohorts (docs/design.md, section 16): a hold passed to another
 * waiter of this client, the node kept (max_hold: the new hold's; 0 none):
 * 1 when held and passed, 0 when not held (then nothing changes). */
int zkl_attempt_pass(zkl_attempt *l, double max_hold);
/* Was our node asked to revoke ("__REVOKE__" read while held and
 * revocable: the revoke event queued, its callback run or not)?  Such a
 * hold is not passed on. */
int zkl_attempt_revoke_asked(zkl_attempt *l);
/* Did our release's delete find our node gone, someone else having
 * deleted it (never a delete of ours sent again after a cut)?  A hold
 * lost before its self watch went (docs/design.md, section 4.5). */
int zkl_attempt_gone_first(zkl_attempt *l);
/* A hold that will linger or be passed watches the directory from now on
 * (the contenders watch), so that a contender that queues during it is
 * known by its release. */
void zkl_attempt_watch_contenders(zkl_attempt *l);
/* Has another node been seen in the directory since the contenders watch
 * was set?  *listed: -1 no watch; 0 its first listing is out; 1 the last
 * one answered; 2 the directory changed since and its listing is out. */
int zkl_attempt_contenders(zkl_attempt *l, int *listed);

/* ---- lock/guard.c: the guarded node ------------------------------------- */
/* docs/design.md, section 4.12.  read_with, before the start: read `path`
 * with the acquire.  read_result, once held: 1 with the data copied into
 * buf, its length in *len, and *version; 0: no node; -1: err; buf: room
 * for *len bytes (NULL: only the length).  release_write: end the hold
 * with one multi-op that sets or creates `path` and deletes our node (0:
 * not held, err); write_result, once done: 1 with *version and *zxid (0
 * when it created the node), or 0 with err (lock_lost: not written;
 * connection_loss: maybe). */
int zkl_attempt_read_with(zkl_attempt *l, const char *path, zkl_error *err);
int zkl_attempt_read_result(zkl_attempt *l, char *buf, int *len,
                            int64_t *version, zkl_error *err);
int zkl_attempt_release_write(zkl_attempt *l, const char *path,
                              const char *data, int len, zkl_error *err);
int zkl_attempt_write_result(zkl_attempt *l, int64_t *version,
                             int64_t *zxid, zkl_error *err);

/* ---- ops/op.c: every op, one-shot tasks Lua polls for ------------------- */
enum { ZKL_OP_CHILDREN, ZKL_OP_CREATE, ZKL_OP_DELETE, ZKL_OP_SET,
       ZKL_OP_WAIT_GONE, ZKL_OP_DB_ENTER, ZKL_OP_DB_LEAVE, ZKL_OP_GET,
       ZKL_OP_FENCED, ZKL_OP_HOLDERS, ZKL_OP_SIGNAL };

zkl_client *zkl_op_client(const zkl_op *op);
int zkl_op_kind(const zkl_op *op);
int zkl_op_poll(zkl_op *op, unsigned long *gen); /* 1 once done */
/* 1: stopped it (0: it had finished); a timed-out enter also deletes its
 * member node */
int zkl_op_cancel(zkl_op *op);
void zkl_op_drop(zkl_op *op); /* the Lua box is gone */
/* (as an attempt's: zkl_attempt_set_wake) */
unsigned long zkl_op_set_wake(zkl_op *op, unsigned id);

/* What a finished op found, taken out of it (names and data are then the
 * caller's to free with zkl_op_result_free). */
typedef struct zkl_op_result {
  int done;
  zkl_error err;
  int result;     /* CREATE: 1 created; DELETE: 1 deleted; SET: 1 created;
                     GET: the data's version; FENCED: the node's version */
  int64_t zxid;   /* FENCED: the write's zxid */
  char **names;   /* CHILDREN */
  int n;
  char *data;     /* GET */
  int datalen;
} zkl_op_result;
void zkl_op_take(zkl_op *op, zkl_op_result *out);
void zkl_op_result_free(zkl_op_result *r);

/* ---- ops/oneshot.c: listing, create, delete, get ------------------------ */
/* markers NULL: every child, unsorted. */
zkl_op *zkl_op_children(zkl_client *c, const char *path,
                        const char *const *markers, zkl_error *err);
zkl_op *zkl_op_create(zkl_client *c, const char *path, const char *data,
                      int datalen, int flags, zkl_error *err);
zkl_op *zkl_op_delete(zkl_client *c, const char *path, zkl_error *err);
zkl_op *zkl_op_get(zkl_client *c, const char *path, zkl_error *err);

/* ---- ops/write.c: set-or-create, plain or fenced ------------------------ */
/* Set path's data; `create`: create it (and its parents, as containers)
 * when missing.  fenced: only while the node `lock_node` exists,
 * atomically; fails with LOCK_LOST when it does not. */
zkl_op *zkl_op_set(zkl_client *c, const char *path, const char *data,
                   int datalen, int create, zkl_error *err);
/* fenced: only while lock_node exists; expect: ZKL_ANY_VERSION (set or
 * create), ZKL_ABSENT (create only), or the data version the node must
 * still have (else it fails with ZKL_EBAD_VERSION: a conditional update,
 * docs/design.md, section 4.12) */
#define ZKL_ANY_VERSION (-1)
#define ZKL_ABSENT (-2)
zkl_op *zkl_op_fenced(zkl_client *c, const char *lock_node, const char *path,
                      const char *data, int datalen, int expect,
                      zkl_error *err);

/* ---- ops/barrier.c, dbarrier.c: the barriers ---------------------------- */
/* The barrier: wait until path is gone. */
zkl_op *zkl_op_wait_gone(zkl_client *c, const char *path, zkl_error *err);
/* The double barrier.  enter: create `ours` (ephemeral), then wait for
 * <path>/ready, creating it once `members` member nodes exist; leave: the
 * recipe's leave loop. */
zkl_op *zkl_op_db_enter(zkl_client *c, const char *path, const char *ours,
                        int members, zkl_error *err);
zkl_op *zkl_op_db_leave(zkl_client *c, const char *path, const char *ours,
                        zkl_error *err);

/* ---- ops/holders.c: who holds ------------------------------------------- */
/* The holders of the lock whose nodes live in dir (family's rule,
 * max_leases; which: -1 any node, 0 read, 1 write only), or every
 * contender (all), each with its node's data, czxid and owner session;
 * sync: a sync first, so that the listing is as up to date as the leader
 * when it was sent. */
zkl_op *zkl_op_holders(zkl_client *c, const char *dir, int family,
                       int max_leases, int which, int all, int sync,
                       zkl_error *err);
typedef struct zkl_holder {
  char *node;       /* its full path */
  char *data;       /* its data (the participant id), datalen bytes */
  int datalen;
  int present;      /* 0: it went between the listing and its get */
  int64_t czxid;    /* the holder's fencing token */
  int64_t session;  /* the session that owns it */
} zkl_holder;
/* A finished holders op's records, taken out (*h the caller's to free with
 * zkl_holders_free); 0 with err when it failed or is not done. */
int zkl_op_take_holders(zkl_op *op, zkl_holder **h, int *n, zkl_error *err);
void zkl_holders_free(zkl_holder *h, int n);

/* ---- ops/signal.c: a signal --------------------------------------------- */
/* An op done once fired (or at an expiry, or the close); zkl_op_fire: 1
 * when it fired it. */
zkl_op *zkl_op_signal(zkl_client *c, zkl_error *err);
int zkl_op_fire(zkl_op *op);

#pragma GCC visibility pop

#endif
