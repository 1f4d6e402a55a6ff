/* Why the first connection does not come (docs/security.md): the C
 * client only logs "error in ssl connect" and tries again for ever, so the
 * timer thread, once the first connection is a second late
 * (session.c), makes a connection and a TLS handshake of its own to each
 * server and says why: nothing listens, the server refused our
 * certificate, its own does not verify, it speaks TLS to a plaintext
 * client or plaintext to a TLS one.  Without OpenSSL (a build against a
 * system libzookeeper_mt): only whether anything listens. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "session.h"

#ifdef ZKL_WITH_OPENSSL
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#endif

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
  if (cert_alert && !s->cert)
    snprintf(why, n, "the server %s:%s requires a client certificate (%s): "
             "tls.cert and tls.key, or a server with ssl.clientAuth=none "
             "(docs/security.md)", host, port, secure_ossl_why("an alert"));
  else if (cert_alert)
    snprintf(why, n, "the server %s:%s refused the client certificate %s "
             "(%s)", host, port, s->cert, secure_ossl_why("an alert"));
  else
    snprintf(why, n, "the server %s:%s ended the TLS %s (%s)", host, port,
             what, secure_ossl_why("an alert"));
  return 1;
}

/* 1 when the handshake's failure rc was the peer closing the connection
 * (OpenSSL 3 says "unexpected eof while reading"; 1.1, a syscall error
 * with no errno, or a reset) */
static int secure_eof(SSL *ssl, int rc) {
  int e = SSL_get_error(ssl, rc);
  if (e == SSL_ERROR_SYSCALL) return 1;
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
  if (e == SSL_ERROR_SSL && ERR_GET_REASON(ERR_peek_last_error()) ==
                              SSL_R_UNEXPECTED_EOF_WHILE_READING)
    return 1;
#endif
  return 0;
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

/* The certificate must name `host`: an IP address as one, else a DNS
 * name; 0 when OpenSSL could not take it. */
static int secure_expect_host(SSL *ssl, const char *host) {
  unsigned char b[16];
  /* (as the C client checks: the subject alternative names only, a
   * wildcard a whole label) */
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS |
                           X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
  if (inet_pton(AF_INET, host, b) == 1 || inet_pton(AF_INET6, host, b) == 1)
    return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1;
  return SSL_set1_host(ssl, host) == 1;
}

static int secure_host_mismatch(long v) {
  return v == X509_V_ERR_HOSTNAME_MISMATCH ||
         v == X509_V_ERR_IP_ADDRESS_MISMATCH;
}

/* The subject alternative names of a certificate, as "DNS:a, IP:b"
 * (what a message about a host mismatch shows). */
static void secure_cert_names(X509 *x, char *out, size_t n) {
  GENERAL_NAMES *gens = x ? X509_get_ext_d2i(x, NID_subject_alt_name, NULL,
                                            NULL) : NULL;
  size_t at = 0;
  int i;
  snprintf(out, n, "no subject alternative name");
  for (i = 0; gens && i < sk_GENERAL_NAME_num(gens) && at + 1 < n; i++) {
    GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);
    char ip[64] = "";
    int w = 0;
    if (g->type == GEN_DNS) {
      const unsigned char *d = ASN1_STRING_get0_data(g->d.dNSName);
      w = snprintf(out + at, n - at, "%sDNS:%.*s", at ? ", " : "",
                   ASN1_STRING_length(g->d.dNSName), (const char *)d);
    } else if (g->type == GEN_IPADD) {
      int len = ASN1_STRING_length(g->d.iPAddress);
      const void *d = ASN1_STRING_get0_data(g->d.iPAddress);
      if (len == 4 || len == 16)
        inet_ntop(len == 4 ? AF_INET : AF_INET6, d, ip, sizeof ip);
      w = snprintf(out + at, n - at, "%sIP:%s", at ? ", " : "",
                   ip[0] ? ip : "?");
    }
    if (w > 0) at += (size_t)w < n - at ? (size_t)w : n - at - 1;
  }
  if (gens) GENERAL_NAMES_free(gens);
}

/* The names of the server's certificate when its host check failed: a
 * handshake that failed keeps no peer certificate, so the verification
 * callback notes them (the probe runs on one thread at a time per
 * client; this buffer is the thread's own). */
static __thread char secure_mismatch_names[200];

static int secure_verify_cb(int ok, X509_STORE_CTX *x) {
  int e = X509_STORE_CTX_get_error(x);
  if (!ok && X509_STORE_CTX_get_error_depth(x) == 0 &&
      (e == X509_V_ERR_HOSTNAME_MISMATCH ||
       e == X509_V_ERR_IP_ADDRESS_MISMATCH))
    secure_cert_names(X509_STORE_CTX_get_current_cert(x),
                      secure_mismatch_names, sizeof secure_mismatch_names);
  return ok;
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
        (s->cert && (SSL_CTX_use_certificate_chain_file(ctx, s->cert) != 1 ||
                     !secure_use_key(ctx, s))))
      goto done; /* (checked at connect: changed since) */
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
  }
  ssl = SSL_new(ctx);
  if (!ssl || SSL_set_fd(ssl, fd) != 1) goto done;
  /* (the host check the C client makes: tools/zkclient-tls-peer.patch) */
  if (s && s->tls && !s->no_host_check && zkl_tls_peer()) {
    if (!secure_expect_host(ssl, host)) goto done;
    secure_mismatch_names[0] = '\0';
    SSL_set_verify(ssl, SSL_VERIFY_PEER, secure_verify_cb);
  }
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
  } else if (rc != 1 && secure_host_mismatch(SSL_get_verify_result(ssl))) {
    const char *names = secure_mismatch_names[0] ? secure_mismatch_names
                                                  : "other names";
    verdict = snprintf(why, n, "the server %s:%s has a certificate for "
                       "another host: it names %s, not %s (tls.verify_host "
                       "= false turns the check off: docs/security.md)",
                       host, port, names, host) > 0;
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
    /* no alert, no certificate: whatever answered does not speak TLS;
     * or closed the connection without a word, as a plaintext port does
     * (a ClientHello is no request) and as a TLS port whose server
     * cannot do TLS (Debian's, without Netty's codec on its class path:
     * docs/security.md, "The server") */
    tls_note = secure_ossl_why(NULL);
    if (secure_eof(ssl, rc))
      verdict = snprintf(why, n, "the server %s:%s closed the connection "
                         "in the TLS handshake (%s): a plaintext port (TLS "
                         "is on its secureClientPort), or a server whose "
                         "TLS is broken: look at its log (docs/"
                         "security.md, \"The server\")", host, port,
                         tls_note ? tls_note : "end of file") > 0;
    else
      verdict = snprintf(why, n, "the server %s:%s does not speak TLS (a "
                         "plaintext port? TLS is on its secureClientPort)"
                         "%s%s", host, port, tls_note ? ": " : "",
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
