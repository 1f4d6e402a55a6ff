/* What the session knows of the server: whether requests can be sent at
 * all, and when the server last heard us, which bounds when it may expire
 * the session (docs/guarantees.md).  Every function runs with the
 * client's mutex held. */
#include <pthread.h>

#include "../internal.h"

int zkl_client_usable(zkl_client *c, zkl_error *err) {
  switch (c->state) {
  case ZKL_EXPIRED:
    zkl_seterr(err, ZKL_ESESSION_EXPIRED, "session expired");
    return 0;
  case ZKL_AUTH_FAILED:
    zkl_secure_sasl_why(c->secure, err);
    return 0;
  case ZKL_TLS_FAILED:
    zkl_seterr(err, ZKL_ETLS, "%s", c->tls_why ? c->tls_why : "TLS failed");
    return 0;
  case ZKL_CLOSED:
    zkl_seterr(err, ZKL_ECLOSED, "client is closed");
    return 0;
  case ZKL_NO_CHROOT:
    zkl_seterr(err, ZKL_ENO_NODE, "the chroot %s of the connect string does "
               "not exist: create it, or connect without it", c->chroot);
    return 0;
  }
  if (c->closing) {
    zkl_seterr(err, ZKL_ECLOSED, "client is closed");
    return 0;
  }
  if (!c->zh) { /* between sessions: the timer thread shut the old one
                 * (expired, or lost: not heard from for a session
                 * timeout) and opens the next; "closed" only after
                 * zk:close() (docs/api.md, "A closed client"; issue 32) */
    zkl_seterr(err, ZKL_ESESSION_EXPIRED, "session expired (a new one is "
               "being opened)");
    return 0;
  }
  return 1;
}

int zkl_client_checked(const zkl_client *c) {
  return !c->chroot || c->chroot_ok;
}

void zkl_client_heard(zkl_client *c, double sent, int rc) {
  switch (rc) { /* what only a server's answer says (the library fails
                 * unanswered requests with whatever broke the connection) */
  case ZOK: case ZNONODE: case ZNODEEXISTS: case ZNOTEMPTY: case ZBADVERSION:
  case ZNOAUTH: case ZNOCHILDRENFOREPHEMERALS: case ZINVALIDACL:
  case ZBADARGUMENTS: case ZUNIMPLEMENTED:
    if (sent > c->heard) c->heard = sent;
    if (rc == ZOK || rc == ZNONODE || rc == ZNODEEXISTS) follow_answered(c);
    break;
  default:
    break;
  }
}

void zkl_client_kick(zkl_client *c) {
  if (!c->timer_idle) return; /* it wakes within a third of the timeout */
  c->timer_idle = 0;
  pthread_cond_signal(&c->tcv);
}

void zkl_client_rearm(zkl_client *c) {
  c->timer_idle = 0;
  pthread_cond_signal(&c->tcv);
}

double zkl_client_expiry(const zkl_client *c) {
  return c->heard + c->timeout_ms / 1000.0;
}

/* What the server's own clock may be behind ours (a tenth of the timeout),
 * plus what it may not know of our activity: a follower tells the leader
 * of the sessions it heard from only at its pings, every half tick, and a
 * follower frozen right after answering us never does.  A tick is at most
 * half the timeout (the server's minimum session timeout is two ticks), so
 * that is up to a quarter of it (docs/design.md, section 9.2). */
double zkl_client_margin(const zkl_client *c) {
  return c->timeout_ms / 1000.0 * 0.35;
}
