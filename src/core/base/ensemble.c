/* The client addresses of an ensemble's configuration: the data of
 * /zookeeper/config (ZooKeeper 3.5+), as a connect string for
 * zoo_set_servers.  A pure function, so that the rules have unit specs
 * (docs/design.md, section 18: following the ensemble).
 *
 * The data is one line per member, "server.<id>=<quorum addresses>:
 * <role>;[<client host>:]<client port>", then "version=<hex>" (no newline
 * after it); group. and weight. lines come with hierarchical quorums.
 * What Curator's EnsembleTracker does, this does: every member with a
 * client address is listed, participants and observers alike; a member
 * without one (a server configured with the static clientPort) is left
 * out; a client host that is missing or a wildcard (0.0.0.0, ::) means
 * the member's quorum host; an IPv6 host is written without its brackets
 * (the C client splits at the last ':'); a secure client address after
 * the plaintext one (ZooKeeper 3.9) is not ours; a line that does not
 * parse makes the whole configuration unusable (the caller keeps what it
 * has). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../zkl.h"

/* [s, e) with blanks stripped at both ends */
static void trim(const char **s, const char **e) {
  while (*s < *e && (**s == ' ' || **s == '\t' || **s == '\r')) (*s)++;
  while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t' ||
                     (*e)[-1] == '\r'))
    (*e)--;
}

static int starts(const char *s, const char *e, const char *prefix) {
  size_t n = strlen(prefix);
  return (size_t)(e - s) >= n && memcmp(s, prefix, n) == 0;
}

/* The host at the start of [s, e): a bracketed IPv6 address up to its
 * ']', else up to the first ':'.  Its end, or NULL when there is none. */
static const char *host_end(const char *s, const char *e) {
  const char *q;
  if (s < e && *s == '[') {
    q = memchr(s, ']', (size_t)(e - s));
    return q ? q + 1 : NULL;
  }
  for (q = s; q < e && *q != ':'; q++) {}
  return q > s ? q : NULL;
}

/* Is [s, e) a host a client can dial: no blank, no control character, no
 * separator of a connect string, no bare ':' outside brackets? */
static int host_ok(const char *s, const char *e) {
  const char *q;
  if (s >= e) return 0;
  for (q = s; q < e; q++) {
    unsigned char ch = (unsigned char)*q;
    if (ch <= ' ' || ch == 0x7f || ch == ',' || ch == '/' || ch == ';' ||
        ch == '|' || ch == '=')
      return 0;
    if (ch == ':' && *s != '[') return 0;
  }
  return 1;
}

static int wildcard(const char *s, const char *e) {
  static const char *const any[] = { "0.0.0.0", "::", "[::]",
                                     "[0:0:0:0:0:0:0:0]", NULL };
  int i;
  for (i = 0; any[i]; i++)
    if ((size_t)(e - s) == strlen(any[i]) &&
        memcmp(s, any[i], (size_t)(e - s)) == 0)
      return 1;
  return 0;
}

/* A port 1..65535 spelt in decimal, all of [s, e) */
static int port_of(const char *s, const char *e) {
  long v = 0;
  if (s >= e || e - s > 5) return 0;
  for (; s < e; s++) {
    if (*s < '0' || *s > '9') return 0;
    v = v * 10 + (*s - '0');
  }
  return v >= 1 && v <= 65535 ? (int)v : 0;
}

/* One server line's value [s, e): appends "host:port" to out (at *at,
 * comma first when not the first).  Returns 1 appended, 0 no client
 * address (left out), -1 malformed or no room. */
static int add_member(const char *s, const char *e, char *out, size_t size,
                      size_t *at) {
  const char *semi = memchr(s, ';', (size_t)(e - s));
  const char *qh, *qe, *ch, *ce, *ps, *colon, *q;
  int port, n;
  if (!semi) return 0;
  /* the quorum part: the first of its addresses ('|'), host first */
  qh = s;
  qe = host_end(qh, semi);
  if (!qe || !host_ok(qh, qe) || qe >= semi || *qe != ':') return -1;
  /* the client part: "port" or "host:port" (ZooKeeper 3.9 may add
   * ";secure port": not the plaintext client's) */
  ch = semi + 1;
  ce = memchr(ch, ';', (size_t)(e - ch));
  if (!ce) ce = e;
  trim(&ch, &ce);
  e = ce; /* (where the port ends) */
  colon = NULL;
  for (q = ch; q < ce; q++)
    if (*q == ':') colon = q;
  if (colon) {
    ps = colon + 1;
    ce = colon;
    if (ch < ce && *ch != '[' && memchr(ch, ':', (size_t)(ce - ch)) &&
        !wildcard(ch, ce))
      return -1; /* (an IPv6 client host must be bracketed) */
  } else {
    ps = ch;
    ce = ch; /* no host */
  }
  port = port_of(ps, e); /* (the caller trimmed the line) */
  if (!port) return -1;
  if (ch == ce || wildcard(ch, ce)) { /* the member's quorum host */
    ch = qh;
    ce = qe;
  } else if (!host_ok(ch, ce)) {
    return -1;
  }
  /* (an IPv6 host without its brackets: the C client splits host and
   * port at the last ':', and resolves what is before it as it is) */
  if (*ch == '[' && ce - ch > 2 && ce[-1] == ']') {
    ch++;
    ce--;
  }
  n = snprintf(out + *at, size - *at, "%s%.*s:%d", *at ? "," : "",
               (int)(ce - ch), ch, port);
  if (n < 0 || (size_t)n >= size - *at) return -1;
  *at += (size_t)n;
  return 1;
}

int zkl_config_hosts(const char *data, size_t len, char *out, size_t size,
                     uint64_t *version) {
  const char *p = data, *end = data + len;
  size_t at = 0;
  int count = 0;
  if (!data || !out || size == 0 || !version) return -1;
  out[0] = '\0';
  *version = 0;
  if (memchr(data, '\0', len)) return -1;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *s = p, *e = nl ? nl : end;
    p = nl ? nl + 1 : end;
    trim(&s, &e);
    if (s == e) continue;
    if (starts(s, e, "version=")) {
      uint64_t v = 0;
      const char *q = s + 8;
      if (q == e || e - q > 16) return -1;
      for (; q < e; q++) {
        int d = *q >= '0' && *q <= '9' ? *q - '0'
                : *q >= 'a' && *q <= 'f' ? *q - 'a' + 10
                : *q >= 'A' && *q <= 'F' ? *q - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v << 4 | (uint64_t)d;
      }
      *version = v;
    } else if (starts(s, e, "server.")) {
      const char *eq = memchr(s, '=', (size_t)(e - s));
      int r;
      if (!eq) return -1;
      r = add_member(eq + 1, e, out, size, &at);
      if (r < 0) {
        out[0] = '\0';
        return -1;
      }
      count += r;
    } /* (group., weight. and anything newer: not about clients) */
  }
  return count;
}
