/* TLS and SASL sessions (docs/security.md).  What a secure client asked
 * for (zkl_secure), the checks made before any connection, how a session
 * is opened with it, and the diagnosis of a connection that does not come:
 * the C client only logs "error in ssl connect" and tries again for ever,
 * so the timer thread, once the first connection is a second late, makes
 * one TLS handshake of its own to the first server and says why.
 *
 * Two builds (docs/security.md, "Builds"):
 *  - the TLS build (make's default) links the static C client built from
 *    Debian's source with OpenSSL and Cyrus SASL (tools/zkclient.sh):
 *    HAVE_OPENSSL_H, HAVE_CYRUS_SASL_H and ZKL_WITH_OPENSSL are defined;
 *  - a build against a system libzookeeper_mt (Debian's has neither):
 *    zookeeper_init_ssl is looked up as a weak symbol, so a library
 *    built with OpenSSL elsewhere still gives TLS; SASL needs the TLS
 *    build's headers. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#ifdef ZKL_WITH_OPENSSL
#include <openssl/err.h>
#include <openssl/ssl.h>
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

int zkl_sasl_available(void) {
#ifdef HAVE_CYRUS_SASL_H
  return 1;
#else
  return 0;
#endif
}

static const char zkl_no_tls[] =
  "this zklock is linked with a ZooKeeper C client built without TLS "
  "(Debian's libzookeeper_mt is): build zklock with `make` (its TLS build, "
  "docs/security.md), or link a C client built with OpenSSL";

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
  *result = s->user ? s->user : "";
  if (len) *len = (unsigned)strlen(*result);
  return SASL_OK;
}

static int secure_secret(sasl_conn_t *conn, void *ctx, int id,
                         sasl_secret_t **out) {
  zkl_secure *s = ctx;
  (void)conn;
  if (!s || !out || id != SASL_CB_PASS || !s->secret) return SASL_BADPARAM;
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
  if (s && o->ca) {
    size_t n = strlen(o->ca) + strlen(o->cert) + strlen(o->key) +
               (o->key_password ? strlen(o->key_password) : 0) + 4;
    s->tls = malloc(n);
    s->ca = strdup(o->ca); s->cert = strdup(o->cert);
    s->key = strdup(o->key); s->key_password = dupornull(o->key_password);
    bad = !s->tls || !s->ca || !s->cert || !s->key ||
          (o->key_password && !s->key_password);
    if (!bad) /* the C client's form: "ca,cert,key[,password]" */
      snprintf(s->tls, n, "%s,%s,%s%s%s", o->ca, o->cert, o->key,
               o->key_password ? "," : "",
               o->key_password ? o->key_password : "");
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
    zkl_seterr(err, ZKL_ENO_AUTH, "this zklock was built without SASL (a build "
               "against the system's libzookeeper_mt): build zklock with "
               "`make` (its TLS and SASL build, docs/security.md)");
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
static const char *secure_ossl_why(const char *dflt) {
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
static int secure_use_key(SSL_CTX *ctx, const zkl_secure *s) {
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
  for (i = 0; i < 3; i++) {
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
    zkl_seterr(err, ZKL_ETLS, "%s", zkl_no_tls);
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

static zhandle_t *secure_init_blocked(const zkl_secure *s, const char *hosts,
                                      watcher_fn fn, int timeout_ms,
                                      void *ctx) {
  zhandle_t *zh;
  if (s && s->tls && zookeeper_init_ssl) {
    pthread_mutex_lock(&secure_init_mu);
    /* (no log callback argument: the first lines go to stderr) */
    zh = zookeeper_init_ssl(hosts, s->tls, fn, timeout_ms, NULL, ctx,
                            ZOO_NO_LOG_CLIENTENV);
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
    return zookeeper_init_sasl(hosts, fn, timeout_ms, NULL, ctx, 0,
                               zkl_log_line, &p);
  }
#endif
  return zookeeper_init2(hosts, fn, timeout_ms, NULL, ctx, 0, zkl_log_line);
}

/* ---- why a connection does not come ----------------------------------- */

/* host and port of the server entry at *at (a connect string), and *at
 * moved past it; 0 at the end (or an entry we cannot read). */
static int secure_next_host(const char **at, char *host, size_t hn,
                            char *port, size_t pn) {
  const char *hosts = *at;
  size_t n = strcspn(hosts, ",/");
  const char *colon;
  char first[300];
  if (n == 0 || n >= sizeof first) return 0;
  *at = hosts + n + (hosts[n] == ',');
  memcpy(first, hosts, n);
  first[n] = '\0';
  colon = strrchr(first, ':');
  if (!colon) return 0;
  if (first[0] == '[') { /* [v6]:port */
    const char *close = strchr(first, ']');
    if (!close || close + 1 != colon) return 0;
    snprintf(host, hn, "%.*s", (int)(close - first - 1), first + 1);
  } else {
    snprintf(host, hn, "%.*s", (int)(colon - first), first);
  }
  snprintf(port, pn, "%s", colon + 1);
  return host[0] && port[0];
}

/* A TCP connection within the deadline; -1 when none (no verdict), and
 * *refused when every address refused it (nothing listens there). */
static int secure_dial(const char *host, const char *port, double until,
                       int *refused) {
  struct addrinfo hints, *res = NULL, *a;
  int fd = -1, tried = 0, refusals = 0;
  *refused = 0;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, port, &hints, &res) != 0) return -1;
  for (a = res; a && fd < 0; a = a->ai_next) {
    struct pollfd p;
    int e = 0, ms;
    socklen_t el = sizeof e;
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    tried++;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      refusals += errno == ECONNREFUSED;
      close(fd); fd = -1; continue;
    }
    p.fd = fd; p.events = POLLOUT;
    ms = (int)((until - zkl_now()) * 1000);
    if (ms <= 0 || poll(&p, 1, ms) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0 || e != 0) {
      refusals += e == ECONNREFUSED;
      close(fd); fd = -1;
    }
  }
  freeaddrinfo(res);
  *refused = fd < 0 && tried > 0 && refusals == tried;
  return fd;
}

#ifdef ZKL_WITH_OPENSSL
/* 1 when the newest error is an alert the peer sent; *cert: one about
 * our certificate. */
static int secure_alert(int *cert) {
  int r = ERR_GET_REASON(ERR_peek_last_error());
  if (r < SSL_AD_REASON_OFFSET) return 0;
  if (cert) {
    switch (r - SSL_AD_REASON_OFFSET) {
    case SSL3_AD_BAD_CERTIFICATE: case SSL3_AD_UNSUPPORTED_CERTIFICATE:
    case SSL3_AD_CERTIFICATE_REVOKED: case SSL3_AD_CERTIFICATE_EXPIRED:
    case SSL3_AD_CERTIFICATE_UNKNOWN: case TLS1_AD_UNKNOWN_CA:
    case TLS1_AD_ACCESS_DENIED: case TLS13_AD_CERTIFICATE_REQUIRED:
      *cert = 1; break;
    default: *cert = 0;
    }
  }
  return 1;
}

/* The verdict on an alert the server sent (secure_alert) during the TLS
 * `what` ("handshake", "session"): about our certificate, or not.  1. */
static int secure_said_alert(char *why, size_t n, const char *host,
                             const char *port, const zkl_secure *s,
                             int cert_alert, const char *what) {
  if (cert_alert)
    snprintf(why, n, "the server %s:%s refused the client certificate %s "
             "(%s)", host, port, s->cert, secure_ossl_why("an alert"));
  else
    snprintf(why, n, "the server %s:%s ended the TLS %s (%s)", host, port,
             what, secure_ossl_why("an alert"));
  return 1;
}

/* Waits for the socket as OpenSSL asked; 0 at the deadline. */
static int secure_wait(SSL *ssl, int fd, int rc, double until) {
  struct pollfd p;
  int e = SSL_get_error(ssl, rc), ms = (int)((until - zkl_now()) * 1000);
  if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return -1;
  if (ms <= 0) return 0;
  p.fd = fd;
  p.events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
  return poll(&p, 1, ms) == 1 ? 1 : 0;
}

#define PROBE_HANDSHAKE 2.0 /* s */
#define PROBE_SETTLE 0.5    /* s: for a refusal sent after the handshake */

/* One server's TLS verdict (see zkl_secure_probe), by `end` at the
 * latest; *refused: nothing listens there. */
static int secure_probe_one(const zkl_secure *s, const char *host,
                            const char *port, double end, char *why,
                            size_t n, int *refused) {
  double until = zkl_now() + PROBE_HANDSHAKE;
  SSL_CTX *ctx;
  SSL *ssl = NULL;
  int fd, rc, w, verdict = 0, cert_alert = 0;
  const char *tls_note;
  if (until > end) until = end;
  if ((fd = secure_dial(host, port, until, refused)) < 0) return 0;
  ERR_clear_error();
  ctx = SSL_CTX_new(TLS_client_method());
  if (!ctx) { close(fd); return 0; }
  if (s && s->tls) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    /* (the C client trusts the system's CAs too) */
    if (SSL_CTX_load_verify_locations(ctx, s->ca, NULL) != 1 ||
        SSL_CTX_set_default_verify_paths(ctx) != 1 ||
        SSL_CTX_use_certificate_chain_file(ctx, s->cert) != 1 ||
        !secure_use_key(ctx, s))
      goto done; /* (checked at connect: changed since) */
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
  }
  ssl = SSL_new(ctx);
  if (!ssl || SSL_set_fd(ssl, fd) != 1) goto done;
  while ((rc = SSL_connect(ssl)) != 1 &&
         (w = secure_wait(ssl, fd, rc, until)) > 0) {}
  if (rc == 1 && s && s->tls) {
    /* TLS 1.3: a server refuses the client's certificate after the
     * client's side of the handshake is done; read a moment for that */
    char b;
    until = zkl_now() + PROBE_SETTLE;
    if (until > end + PROBE_SETTLE) until = end + PROBE_SETTLE;
    while ((rc = SSL_read(ssl, &b, 1)) <= 0 &&
           (w = secure_wait(ssl, fd, rc, until)) > 0) {}
    if (rc <= 0 && SSL_get_error(ssl, rc) == SSL_ERROR_SSL &&
        secure_alert(&cert_alert))
      verdict = secure_said_alert(why, n, host, port, s, cert_alert,
                                  "session");
  } else if (!s || !s->tls) {
    if (rc == 1 || SSL_get0_peer_certificate(ssl) || secure_alert(NULL))
      verdict = snprintf(why, n, "the server %s:%s speaks TLS: connect "
                         "with tls = { ca = ..., cert = ..., key = ... } "
                         "(docs/security.md)", host, port) > 0;
  } else if (rc != 1 && SSL_get_verify_result(ssl) != X509_V_OK) {
    verdict = snprintf(why, n, "the server %s:%s has a certificate that "
                       "tls.ca %s does not verify: %s", host, port, s->ca,
                       X509_verify_cert_error_string(
                         SSL_get_verify_result(ssl))) > 0;
  } else if (rc != 1 && secure_alert(&cert_alert)) {
    verdict = secure_said_alert(why, n, host, port, s, cert_alert,
                                "handshake");
  } else if (rc != 1 && SSL_get_error(ssl, rc) != SSL_ERROR_WANT_READ &&
             SSL_get_error(ssl, rc) != SSL_ERROR_WANT_WRITE) {
    /* no alert, no certificate: whatever answered does not speak TLS */
    tls_note = secure_ossl_why(NULL);
    verdict = snprintf(why, n, "the server %s:%s does not speak TLS (a "
                       "plaintext port? TLS is on its secureClientPort)%s%s",
                       host, port, tls_note ? ": " : "",
                       tls_note ? tls_note : "") > 0;
  }
done:
  if (ssl) SSL_free(ssl);
  SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
  SSL_CTX_free(ctx);
  close(fd);
  ERR_clear_error();
  return verdict;
}

#else
/* Without OpenSSL: whether anything listens, no TLS verdict. */
static int secure_probe_one(const zkl_secure *s, const char *host,
                            const char *port, double end, char *why,
                            size_t n, int *refused) {
  int fd = secure_dial(host, port, end, refused);
  (void)s; (void)why; (void)n;
  if (fd >= 0) close(fd);
  return 0;
}
#endif

/* Every server of the connect string must give the same kind of verdict
 * (the C client would reach any one that works); the first server's is
 * said.  Within PROBE_ALL, for at most PROBE_HOSTS servers. */
#define PROBE_ALL 5.0 /* s */
#define PROBE_HOSTS 5
int zkl_secure_probe(const zkl_secure *s, const char *hosts, char *why,
                     size_t n) {
  char host[256], port[32], other[512], first[300] = "";
  const char *at = hosts;
  double end = zkl_now() + PROBE_ALL;
  int i, all_tls = 1, all_refused = 1;
  for (i = 0; i < PROBE_HOSTS && *at && *at != '/'; i++) {
    int refused = 0, tls;
    if (!secure_next_host(&at, host, sizeof host, port, sizeof port) ||
        zkl_now() >= end)
      return ZKL_PROBE_NONE;
    if (i == 0) snprintf(first, sizeof first, "%s:%s", host, port);
    tls = secure_probe_one(s, host, port, end, i == 0 ? why : other,
                           i == 0 ? n : sizeof other, &refused);
    all_tls &= tls;
    all_refused &= refused;
    if (!all_tls && !all_refused) return ZKL_PROBE_NONE;
  }
  if (i == 0 || (*at && *at != '/')) return ZKL_PROBE_NONE;
  if (all_refused) {
    snprintf(why, n, "%s refused the connection%s: nothing listens there? "
             "(a ZooKeeper server's port is its clientPort, or its "
             "secureClientPort for TLS)", first,
             i > 1 ? ", and so did every other server" : "");
    return ZKL_PROBE_REFUSED;
  }
  return all_tls ? ZKL_PROBE_TLS : ZKL_PROBE_NONE;
}
