/* TLS and SASL sessions (docs/security.md).  What a secure client asked
 * for (zkl_secure), the checks made before any connection, and how a
 * session is opened with it.  The diagnosis of a connection that does not
 * come is probe.c's.
 *
 * Two builds (docs/security.md, "Builds"):
 *  - the TLS build (make's default) links the static C client built from
 *    Debian's source with OpenSSL and Cyrus SASL (tools/zkclient.sh):
 *    HAVE_OPENSSL_H, HAVE_CYRUS_SASL_H and ZKL_WITH_OPENSSL are defined;
 *  - a build against a system libzookeeper_mt (Debian's has neither):
 *    zookeeper_init_ssl is looked up as a weak symbol, so a library
 *    built with OpenSSL elsewhere still gives TLS; SASL needs the TLS
 *    build's headers. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session.h"

#ifdef ZKL_WITH_OPENSSL
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#endif

#ifdef HAVE_OPENSSL_H
#pragma weak zookeeper_init_ssl
#else
/* not declared by a header without OpenSSL: ours, weak (NULL if absent) */
extern zhandle_t *zookeeper_init_ssl(const char *host, const char *cert,
                                     watcher_fn fn, int recv_timeout,
                                     const clientid_t *clientid,
                                     void *context, int flags)
  __attribute__((weak));
#endif

int zkl_tls_available(void) { return zookeeper_init_ssl != NULL; }

int zkl_tls_peer(void) {
#ifdef ZOO_ZKLOCK_TLS_NO_HOST_CHECK
  return zkl_tls_available();
#else
  return 0;
#endif
}

int zkl_sasl_available(void) {
#ifdef HAVE_CYRUS_SASL_H
  return 1;
#else
  return 0;
#endif
}

/* The file this module was loaded from, for the messages of a build
 * without TLS or SASL: with LUA_CPATH (or a rock tree) first, it may not
 * be the build the user made. */
static const char *secure_module_file(void) {
  Dl_info info;
  if (dladdr((void *)(uintptr_t)zkl_secure_check, &info) && info.dli_fname)
    return info.dli_fname;
  return "zklock.core";
}

static void secure_no_build(zkl_error *err, int code, const char *what) {
  zkl_seterr(err, code, "the zklock loaded, %s, was built without %s (its "
             "ZooKeeper C client has none): build zklock with `make` "
             "(docs/security.md, \"Builds\") and load that one (LUA_CPATH)",
             secure_module_file(), what);
}

static char *dupornull(const char *s) { return s ? strdup(s) : NULL; }

/* ---- SASL callbacks (Cyrus), answered from the client's copy ----------- */

#ifdef HAVE_CYRUS_SASL_H
static pthread_once_t sasl_once = PTHREAD_ONCE_INIT;
static int sasl_init_rc = SASL_OK;
/* (once per process, and never undone: sasl_client_done at unload or
 * exit could pull the plug-ins from under a C client thread still in a
 * login) */
static void secure_sasl_init(void) { sasl_init_rc = sasl_client_init(NULL); }

/* The mechanism starts here (a plug-in for it, its own credentials:
 * GSSAPI's ticket): a first step with no server, dropped.  0 with err. */
static int secure_sasl_try(const zkl_secure *s, zkl_error *err) {
  sasl_conn_t *conn = NULL;
  const char *out = NULL, *chosen = NULL;
  unsigned outlen = 0;
  int rc = sasl_client_new(s->service, s->server, NULL, NULL, s->cbs, 0,
                           &conn);
  if (rc == SASL_OK)
    rc = sasl_client_start(conn, s->mechanism, NULL, &out, &outlen, &chosen);
  if (rc != SASL_OK && rc != SASL_CONTINUE)
    zkl_seterr(err, ZKL_ENO_AUTH, "sasl: mechanism %s cannot start here: %s%s",
               s->mechanism, conn ? sasl_errdetail(conn)
                                  : sasl_errstring(rc, NULL, NULL),
               rc == SASL_NOMECH ? " (no Cyrus SASL plug-in for it: "
               "libsasl2-modules, libsasl2-modules-gssapi-mit...)" : "");
  if (conn) sasl_dispose(&conn);
  return rc == SASL_OK || rc == SASL_CONTINUE;
}

static int secure_simple(void *ctx, int id, const char **result,
                         unsigned *len) {
  zkl_secure *s = ctx;
  if (!s || !result || (id != SASL_CB_USER && id != SASL_CB_AUTHNAME))
    return SASL_BADPARAM;
  __atomic_fetch_or(&s->asked, ZKL_SASL_ASKED_USER, __ATOMIC_RELAXED);
  *result = s->user ? s->user : "";
  if (len) *len = (unsigned)strlen(*result);
  return SASL_OK;
}

static int secure_secret(sasl_conn_t *conn, void *ctx, int id,
                         sasl_secret_t **out) {
  zkl_secure *s = ctx;
  (void)conn;
  if (!s || !out || id != SASL_CB_PASS || !s->secret) return SASL_BADPARAM;
  __atomic_fetch_or(&s->asked, ZKL_SASL_ASKED_PASS, __ATOMIC_RELAXED);
  *out = (sasl_secret_t *)s->secret;
  return SASL_OK;
}

static int secure_realm(void *ctx, int id, const char **avail,
                        const char **result) {
  zkl_secure *s = ctx;
  (void)avail;
  if (!s || !result || id != SASL_CB_GETREALM) return SASL_BADPARAM;
  *result = s->realm ? s->realm : "";
  return SASL_OK;
}

typedef int (*secure_cb_fn)(void);
#endif

/* ---- the request ------------------------------------------------------- */

zkl_secure *zkl_secure_new(const zkl_secure_opts *o, zkl_error *err) {
  zkl_secure *s = calloc(1, sizeof *s);
  int bad = !s;
  if (s && o->ca && !o->cert != !o->key) {
    zkl_secure_free(s);
    zkl_seterr(err, ZKL_ETLS, "tls: cert and key go together");
    return NULL;
  }
  if (s && o->ca) {
    int mine = o->cert && o->key; /* (a client certificate) */
    size_t n = strlen(o->ca) + (mine ? strlen(o->cert) + strlen(o->key) : 0) +
               (mine && o->key_password ? strlen(o->key_password) : 0) + 4;
    s->tls = malloc(n);
    s->ca = strdup(o->ca);
    s->cert = mine ? strdup(o->cert) : NULL;
    s->key = mine ? strdup(o->key) : NULL;
    s->key_password = mine ? dupornull(o->key_password) : NULL;
    s->no_host_check = o->no_host_check;
    bad = !s->tls || !s->ca || (mine && (!s->cert || !s->key)) ||
          (mine && o->key_password && !s->key_password);
    /* the C client's form: "ca,cert,key[,password]", or "ca" alone (no
     * client certificate: tools/zkclient-tls-peer.patch) */
    if (!bad && mine)
      snprintf(s->tls, n, "%s,%s,%s%s%s", o->ca, o->cert, o->key,
               o->key_password ? "," : "",
               o->key_password ? o->key_password : "");
    else if (!bad)
      snprintf(s->tls, n, "%s", o->ca);
  }
  if (s && !bad && o->mechanism) {
#ifdef HAVE_CYRUS_SASL_H
    size_t plen = o->password ? o->password_len : 0;
    sasl_secret_t *sec;
    s->mechanism = strdup(o->mechanism);
    s->user = dupornull(o->user);
    s->realm = dupornull(o->realm);
    s->service = strdup(o->service ? o->service : "zookeeper");
    s->server = strdup(o->server ? o->server : "zk-sasl-md5");
    sec = malloc(sizeof *sec + plen + 1);
    if (sec) {
      sec->len = (unsigned long)plen;
      if (plen) memcpy(sec->data, o->password, plen);
      sec->data[plen] = '\0';
    }
    s->secret = sec;
    s->secret_len = sizeof *sec + plen + 1;
    s->cbs = calloc(5, sizeof(sasl_callback_t));
    bad = !s->mechanism || (o->user && !s->user) ||
          (o->realm && !s->realm) || !s->service || !s->server || !sec ||
          !s->cbs;
    if (!bad) {
      sasl_callback_t *cb = s->cbs;
      cb[0].id = SASL_CB_GETREALM;
      cb[0].proc = (secure_cb_fn)(void (*)(void))secure_realm;
      cb[1].id = SASL_CB_USER;
      cb[1].proc = (secure_cb_fn)(void (*)(void))secure_simple;
      cb[2].id = SASL_CB_AUTHNAME;
      cb[2].proc = (secure_cb_fn)(void (*)(void))secure_simple;
      cb[3].id = SASL_CB_PASS;
      cb[3].proc = (secure_cb_fn)(void (*)(void))secure_secret;
      cb[4].id = SASL_CB_LIST_END;
      cb[0].context = cb[1].context = cb[2].context = cb[3].context = s;
    }
#else
    zkl_secure_free(s);
    secure_no_build(err, ZKL_ENO_AUTH, "SASL");
    return NULL;
#endif
  }
  if (bad) {
    zkl_secure_free(s);
    zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
    return NULL;
  }
  return s;
}

void zkl_secure_free(zkl_secure *s) {
  if (!s) return;
  if (s->key_password) memset(s->key_password, 0, strlen(s->key_password));
  if (s->tls) memset(s->tls, 0, strlen(s->tls));
  if (s->secret) memset(s->secret, 0, s->secret_len);
  free(s->tls); free(s->ca); free(s->cert); free(s->key);
  free(s->key_password);
  free(s->mechanism); free(s->user); free(s->realm); free(s->service);
  free(s->server); free(s->secret); free(s->cbs);
  free(s);
}

/* ---- checks before connecting ------------------------------------------ */

#ifdef ZKL_WITH_OPENSSL
/* OpenSSL's reason for the newest error on this thread, or `dflt`. */
const char *secure_ossl_why(const char *dflt) {
  unsigned long e = ERR_peek_last_error();
  const char *r = e ? ERR_reason_error_string(e) : NULL;
  return r ? r : dflt;
}

/* The key's password: key_password, or none (OpenSSL's own callback
 * would ask on the terminal). */
static int secure_passwd(char *buf, int size, int rw, void *u) {
  size_t n = u ? strlen(u) : 0;
  (void)rw;
  if (!u || size <= 0 || n >= (size_t)size) return -1;
  memcpy(buf, u, n + 1);
  return (int)n;
}

/* 1 when the key (under its password) loaded into ctx */
int secure_use_key(SSL_CTX *ctx, const zkl_secure *s) {
  SSL_CTX_set_default_passwd_cb(ctx, secure_passwd);
  SSL_CTX_set_default_passwd_cb_userdata(ctx, s->key_password);
  return SSL_CTX_use_PrivateKey_file(ctx, s->key, SSL_FILETYPE_PEM) == 1;
}

/* The client's own side as OpenSSL reads it: CA, certificate, key (with
 * its password), their match, and the certificate's dates. */
static int secure_check_files(const zkl_secure *s, zkl_error *err) {
  SSL_CTX *ctx;
  X509 *x;
  int ok = 0;
  ERR_clear_error();
  ctx = SSL_CTX_new(TLS_client_method());
  if (!ctx) {
    zkl_seterr(err, ZKL_ETLS, "tls: OpenSSL: %s", secure_ossl_why("no "
               "context"));
    return 0;
  }
  if (SSL_CTX_load_verify_locations(ctx, s->ca, NULL) != 1) {
    zkl_seterr(err, ZKL_ETLS, "tls.ca %s: not a readable PEM file of "
               "certificates (%s)", s->ca, secure_ossl_why("unreadable"));
  } else if (!s->cert) {
    ok = 1; /* (no client certificate) */
  } else if (SSL_CTX_use_certificate_chain_file(ctx, s->cert) != 1) {
    zkl_seterr(err, ZKL_ETLS, "tls.cert %s: not a readable PEM "
               "certificate (%s)", s->cert, secure_ossl_why("unreadable"));
  } else if (!secure_use_key(ctx, s) &&
             ERR_GET_REASON(ERR_peek_last_error()) ==
               X509_R_KEY_VALUES_MISMATCH) {
    zkl_seterr(err, ZKL_ETLS, "tls.key %s is not the key of tls.cert %s",
               s->key, s->cert);
  } else if (!SSL_CTX_get0_privatekey(ctx)) {
    zkl_seterr(err, ZKL_ETLS, "tls.key %s: not a readable PEM private key%s "
               "(%s)", s->key, s->key_password ? ", or the wrong "
               "key_password" : " (an encrypted key needs key_password)",
               secure_ossl_why("unreadable"));
  } else if (SSL_CTX_check_private_key(ctx) != 1) {
    zkl_seterr(err, ZKL_ETLS, "tls.key %s is not the key of tls.cert %s",
               s->key, s->cert);
  } else if (!(x = SSL_CTX_get0_certificate(ctx))) {
    zkl_seterr(err, ZKL_ETLS, "tls.cert %s: no certificate", s->cert);
  } else if (X509_cmp_current_time(X509_get0_notAfter(x)) < 0) {
    zkl_seterr(err, ZKL_ETLS, "tls.cert %s has expired: a server would "
               "refuse it", s->cert);
  } else if (X509_cmp_current_time(X509_get0_notBefore(x)) > 0) {
    zkl_seterr(err, ZKL_ETLS, "tls.cert %s is not valid yet: a server "
               "would refuse it", s->cert);
  } else {
    ok = 1;
  }
  SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
  SSL_CTX_free(ctx);
  ERR_clear_error();
  return ok;
}
#else
static int secure_check_files(const zkl_secure *s, zkl_error *err) {
  const char *names[3] = { "ca", "cert", "key" };
  const char *files[3];
  int i;
  files[0] = s->ca; files[1] = s->cert; files[2] = s->key;
  for (i = 0; i < 3 && files[i]; i++) {
    FILE *f = fopen(files[i], "r");
    if (!f) {
      zkl_seterr(err, ZKL_ETLS, "tls.%s %s: %s", names[i], files[i],
                 strerror(errno));
      return 0;
    }
    fclose(f);
  }
  return 1;
}
#endif

int zkl_secure_check(const zkl_secure *s, zkl_error *err) {
  if (!s) return 1;
  if (s->tls && !zkl_tls_available()) {
    secure_no_build(err, ZKL_ETLS, "TLS");
    return 0;
  }
  if (s->tls && !zkl_tls_peer() && !s->cert) {
    zkl_seterr(err, ZKL_ETLS, "tls without cert and key: the ZooKeeper C "
               "client this zklock is linked with always presents a client "
               "certificate (the TLS build's does not need one: "
               "docs/security.md, \"Builds\")");
    return 0;
  }
  if (s->tls && !zkl_tls_peer() && !s->no_host_check) {
    zkl_seterr(err, ZKL_ETLS, "tls: the ZooKeeper C client this zklock is "
               "linked with cannot check the server's host name against "
               "its certificate (the TLS build's does): tls.verify_host = "
               "false to connect without the check (docs/security.md)");
    return 0;
  }
  if (s->tls && s->mechanism) {
    zkl_seterr(err, ZKL_ETLS, "tls and sasl together: the ZooKeeper C client "
               "3.8 opens a session with one or the other (docs/security.md)");
    return 0;
  }
#ifdef HAVE_CYRUS_SASL_H
  if (s->mechanism) {
    pthread_once(&sasl_once, secure_sasl_init);
    if (sasl_init_rc != SASL_OK) {
      zkl_seterr(err, ZKL_ENO_AUTH, "sasl: Cyrus SASL did not start: %s",
                 sasl_errstring(sasl_init_rc, NULL, NULL));
      return 0;
    }
    if (!secure_sasl_try(s, err)) return 0;
  }
#endif
  return !s->tls || secure_check_files(s, err);
}

/* ---- opening a session ------------------------------------------------- */

/* zookeeper_init_ssl splits its string with strtok, whose state is the
 * process's: one call at a time (the Lua thread and every client's timer
 * thread open sessions). */
static pthread_mutex_t secure_init_mu = PTHREAD_MUTEX_INITIALIZER;

/* The C client's threads, made by zookeeper_init*, take the caller's
 * signal mask: SIGPIPE blocked there, so that its SSL_write on a socket
 * the server closed (no MSG_NOSIGNAL on that path) fails with EPIPE
 * instead of killing the process (the signal stays pending on that
 * thread, never delivered). */
static zhandle_t *secure_init_blocked(const zkl_secure *s, const char *hosts,
                                      watcher_fn fn, int timeout_ms,
                                      void *ctx);

zhandle_t *zkl_secure_init(const zkl_secure *s, const char *hosts,
                           watcher_fn fn, int timeout_ms, void *ctx) {
  sigset_t pipe, saved;
  zhandle_t *zh;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &saved);
  zh = secure_init_blocked(s, hosts, fn, timeout_ms, ctx);
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  return zh;
}

/* Our C client (tools/zkclient-tls-peer.patch) checks the server's
 * certificate against the host dialled unless told not to. */
#ifdef ZOO_ZKLOCK_TLS_NO_HOST_CHECK
#define NO_HOST_FLAG(s) ((s)->no_host_check ? ZOO_ZKLOCK_TLS_NO_HOST_CHECK : 0)
#else
#define NO_HOST_FLAG(s) 0
#endif

/* Our C client (tools/zkclient-io-completions.patch) runs completions and
 * watchers on its IO thread when asked: one thread hand-off less per
 * reply (docs/design.md, section 2).  Our callbacks only take the client's
 * mutex briefly and never wait for the IO thread.  Debian's library
 * (ZK=system) has no such flag: its completion thread runs them. */
#ifdef ZOO_ZKLOCK_IO_COMPLETIONS
#define INIT_FLAGS ZOO_ZKLOCK_IO_COMPLETIONS
#else
#define INIT_FLAGS 0
#endif

int zkl_io_completions(void) { return INIT_FLAGS != 0; }
int zkl_follow_default(void) { return ZKL_FOLLOW_DEFAULT; }

static zhandle_t *secure_init_blocked(const zkl_secure *s, const char *hosts,
                                      watcher_fn fn, int timeout_ms,
                                      void *ctx) {
  zhandle_t *zh;
  if (s && s->tls && zookeeper_init_ssl) {
    pthread_mutex_lock(&secure_init_mu);
    /* (no log callback argument: the first lines go to stderr) */
    zh = zookeeper_init_ssl(hosts, s->tls, fn, timeout_ms, NULL, ctx,
                            ZOO_NO_LOG_CLIENTENV | INIT_FLAGS |
                              NO_HOST_FLAG(s));
    pthread_mutex_unlock(&secure_init_mu);
    if (zh) zoo_set_log_callback(zh, zkl_log_line);
    return zh;
  }
#ifdef HAVE_CYRUS_SASL_H
  if (s && s->mechanism) {
    zoo_sasl_params_t p;
    p.service = s->service;
    p.host = s->server;
    p.mechlist = s->mechanism;
    p.callbacks = s->cbs;
    /* (the callbacks' context: what they record is this session's) */
    __atomic_store_n(&((zkl_secure *)s)->asked, 0, __ATOMIC_RELAXED);
    return zookeeper_init_sasl(hosts, fn, timeout_ms, NULL, ctx,
                               INIT_FLAGS, zkl_log_line, &p);
  }
#endif
  return zookeeper_init2(hosts, fn, timeout_ms, NULL, ctx, INIT_FLAGS,
                         zkl_log_line);
}

/* ---- a login that failed ----------------------------------------------- */

/* The C client logs a server's refusal only at debug (its rc), and stops
 * the session the same way whatever failed.  For DIGEST-MD5, which asks
 * for the credentials only to answer the server's challenge, what our
 * callbacks were asked tells the cases apart: the password was asked, so
 * the server refused the answer; nothing was asked: the server sent no
 * challenge (a server without SASL answers with an empty token); else the
 * mechanism gave up here, and the C client's log says why at error.
 * Another mechanism (PLAIN asks at its start) is not told apart. */
void zkl_secure_sasl_why(const zkl_secure *s, zkl_error *err) {
  char who[300] = "";
  int asked;
  if (!s || !s->mechanism) {
    zkl_seterr(err, ZKL_ENO_AUTH, "authentication failed");
    return;
  }
  asked = __atomic_load_n(&s->asked, __ATOMIC_RELAXED);
  if (s->user) snprintf(who, sizeof who, " as '%s'", s->user);
  if (strcmp(s->mechanism, "DIGEST-MD5") != 0)
    zkl_seterr(err, ZKL_ENO_AUTH, "SASL %s authentication%s failed (refused "
               "by the server, or the mechanism failed here: the C client's "
               "log at error says which)", s->mechanism, who);
  else if (asked & ZKL_SASL_ASKED_PASS)
    zkl_seterr(err, ZKL_ENO_AUTH, "SASL %s authentication%s refused by the "
               "server: a wrong password or an unknown user (the server "
               "does not say which; its log does)", s->mechanism, who);
  else if (!asked)
    zkl_seterr(err, ZKL_ENO_AUTH, "SASL %s authentication%s failed: the "
               "server sent no challenge, so it has no SASL set up (a JAAS "
               "Server section: docs/security.md, \"The server\")",
               s->mechanism, who);
  else
    zkl_seterr(err, ZKL_ENO_AUTH, "SASL %s authentication%s failed here: "
               "the mechanism gave up (the C client's log at error says "
               "why)", s->mechanism, who);
}
