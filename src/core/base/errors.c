/* Error codes: the ZooKeeper client's return codes, their names, and the
 * zklock codes Lua sees (zklock.errors), from one X-macro table. */
#include <stdarg.h>
#include <stdio.h>

#include "../zkl.h"

static const char *const errors_codes[] = {
  "ok",
#define ZKL_STR(n, s) s,
  ZKL_CODES(ZKL_STR)
#undef ZKL_STR
};

const char *zkl_code_name(int code) {
  if (code < 0 || code >= ZKL_NCODES) return "zk_error";
  return errors_codes[code];
}

const char *zkl_rc_name(int rc) {
  switch (rc) {
  case ZOK: return "ZOK";
  case ZSYSTEMERROR: return "ZSYSTEMERROR";
  case ZRUNTIMEINCONSISTENCY: return "ZRUNTIMEINCONSISTENCY";
  case ZDATAINCONSISTENCY: return "ZDATAINCONSISTENCY";
  case ZCONNECTIONLOSS: return "ZCONNECTIONLOSS";
  case ZMARSHALLINGERROR: return "ZMARSHALLINGERROR";
  case ZUNIMPLEMENTED: return "ZUNIMPLEMENTED";
  case ZOPERATIONTIMEOUT: return "ZOPERATIONTIMEOUT";
  case ZBADARGUMENTS: return "ZBADARGUMENTS";
  case ZINVALIDSTATE: return "ZINVALIDSTATE";
  case ZNONODE: return "ZNONODE";
  case ZNOAUTH: return "ZNOAUTH";
  case ZBADVERSION: return "ZBADVERSION";
  case ZNOCHILDRENFOREPHEMERALS: return "ZNOCHILDRENFOREPHEMERALS";
  case ZNODEEXISTS: return "ZNODEEXISTS";
  case ZNOTEMPTY: return "ZNOTEMPTY";
  case ZSESSIONEXPIRED: return "ZSESSIONEXPIRED";
  case ZINVALIDCALLBACK: return "ZINVALIDCALLBACK";
  case ZINVALIDACL: return "ZINVALIDACL";
  case ZAUTHFAILED: return "ZAUTHFAILED";
  case ZCLOSING: return "ZCLOSING";
  case ZNOTHING: return "ZNOTHING";
  case ZSESSIONMOVED: return "ZSESSIONMOVED";
  case ZSESSIONCLOSEDREQUIRESASLAUTH: return "ZSESSIONCLOSEDREQUIRESASLAUTH";
  default: return "ZAPIERROR";
  }
}

int zkl_code_from_rc(int rc) {
  switch (rc) {
  case ZOK: return ZKL_OK;
  case ZCONNECTIONLOSS: case ZOPERATIONTIMEOUT: case ZSESSIONMOVED:
    return ZKL_ECONNECTION_LOSS;
  case ZSESSIONEXPIRED: return ZKL_ESESSION_EXPIRED;
  case ZCLOSING: case ZINVALIDSTATE: return ZKL_ECLOSED;
  case ZNOAUTH: case ZAUTHFAILED: case ZSESSIONCLOSEDREQUIRESASLAUTH:
    return ZKL_ENO_AUTH;
  case ZNONODE: return ZKL_ENO_NODE;
  case ZNODEEXISTS: return ZKL_ENODE_EXISTS;
  case ZNOTEMPTY: return ZKL_ENOT_EMPTY;
  case ZBADVERSION: return ZKL_EBAD_VERSION;
  default: return ZKL_EZK_ERROR;
  }
}

void zkl_seterr(zkl_error *e, int code, const char *fmt, ...) {
  va_list ap;
  if (!e) return;
  e->code = code;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
}

void zkl_seterr_maybe(zkl_error *e, const char *what) {
  zkl_seterr(e, ZKL_ECONNECTION_LOSS, "%s: the connection was cut with it "
             "in flight, and it could not be confirmed since: it may have "
             "been applied", what);
}

/* The C client's text for rc, but for ZNOAUTH: zerror says "not
 * authenticated", while the server answers it to a session whose
 * identities (authenticated or not) the node's ACL does not allow
 * (docs/security.md, "ACLs"). */
static const char *errors_text(int rc) {
  if (rc == ZNOAUTH)
    return "not allowed (the node's ACL does not grant this to the "
           "session's identities)";
  return zerror(rc);
}

void zkl_seterr_rc(zkl_error *e, int rc, const char *what) {
  zkl_seterr(e, zkl_code_from_rc(rc), "%s: %s%s%s", zkl_rc_name(rc),
             errors_text(rc), what ? " " : "", what ? what : "");
}
