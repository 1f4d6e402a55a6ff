/* What the files of the session room share and nothing outside it sees:
 * the session's threads (session.c) for the client's life (client.c), and
 * secure.c's OpenSSL helpers for the diagnosis (probe.c).  The rest of the
 * room (notify.c, liveness.c, task.c, the zkl_secure_* entries) serves the
 * whole core: internal.h. */
#ifndef ZKLOCK_SESSION_H
#define ZKLOCK_SESSION_H

#include "../internal.h"

#ifdef ZKL_WITH_OPENSSL
#include <openssl/ssl.h>
#endif

#pragma GCC visibility push(hidden)

/* ---- session.c ---------------------------------------------------------- */
/* Every task, as one loop; `next` is read first: a task may go. */
#define SESSION_EACH(c, t, tn) \
  for ((t) = (c)->tasks; (t) && ((tn) = (t)->next, 1); (t) = (tn))
/* The first connection this late is diagnosed (probe.c), then again and
 * again, the gap doubling up to DIAGNOSE_GAP_MAX (session.c). */
#define DIAGNOSE_AFTER 1.0 /* s */
/* Every session's watcher (ctx: the client): hands the event to the
 * tasks, wakes Lua.  ZooKeeper's thread; takes the mutex. */
void session_watcher(zhandle_t *zh, int type, int state, const char *path,
                     void *ctx);
void session_no_routine_dns(zhandle_t *zh); /* a new handle's resolving */
/* Finish as ZCLOSING what a closed handle still owed us (mu held). */
void session_drain(zkl_client *c);
void *session_timer(void *arg); /* the timer thread (arg: the client) */

/* ---- follow.c (mu held) ------------------------------------------------ */
/* Read /zookeeper/config (once a connection's first request was
 * answered: follow_answered, called by zkl_client_heard), then again with
 * a watch when it names members: the answer keeps a new list for
 * follow_apply.  Any thread with the mutex; asynchronous. */
void follow_read(zkl_client *c, zhandle_t *zh);
/* The timer thread moves the servers to the list kept (mu dropped
 * meanwhile). */
void follow_apply(zkl_client *c);
/* The connect string a new session opens with: the one followed, else
 * the one given. */
const char *follow_connect_string(const zkl_client *c);

/* ---- secure.c, for probe.c ---------------------------------------------- */
#ifdef ZKL_WITH_OPENSSL
/* OpenSSL's reason for the newest error on this thread, or `dflt`. */
const char *secure_ossl_why(const char *dflt);
/* 1 when the key (under its password) loaded into ctx */
int secure_use_key(SSL_CTX *ctx, const zkl_secure *s);
#endif

#pragma GCC visibility pop

#endif
