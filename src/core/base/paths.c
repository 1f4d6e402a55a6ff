/* What ZooKeeper accepts as a node path and as a connect string: pure
 * functions, the one place that says why an argument is refused (the
 * binding raises with these reasons, and zklock.runtime asks for them;
 * docs/limits.md).
 *
 * Paths.  The server (PathUtils.validatePath, 3.8) reads a path as UTF-8
 * into UTF-16 code units and refuses a NUL, an empty, "." or ".."
 * component, a trailing '/', and the units 0x01-0x1F, 0x7F-0x9F,
 * 0xD800-0xF8FF and 0xFFF0-0xFFFF (bounds included: checked in the
 * bytecode of Debian's 3.8.0 jar).  So it refuses every character beyond
 * U+FFFF too (a surrogate pair), and bytes that are not UTF-8 (they decode
 * as U+FFFD).  Refused by the server, a create came back as ZBADARGUMENTS
 * ("zk_error"); a read of such a path answered "no node".  The C client
 * itself refuses bytes 1-31 and 127, and its multi-op then freed a path
 * twice.  All of it is refused here, before anything is sent.
 *
 * Connect strings.  The C client takes "host:port,host:port[/chroot]": the
 * chroot from the first '/', hosts split at ',', each one's port after its
 * last ':' (a decimal number here; the client's strtol also read "0x50").
 * It stops at a NUL (so "h:1\0/app" connected without its chroot), and
 * either refused a missing port late, as a zk_error, or (",") had no host
 * and said "connection lost". */
#include <stdio.h>
#include <string.h>

#include "../zkl.h"

/* The code point of the UTF-8 sequence at p (n bytes left), its length in
 * *len; -1 when it is no well-formed sequence: a stray continuation byte,
 * a truncated sequence, an overlong form, a surrogate, beyond U+10FFFF. */
static long paths_utf8(const unsigned char *p, size_t n, int *len) {
  unsigned long cp;
  int k, i;
  if (p[0] < 0x80) { *len = 1; return p[0]; }
  if (p[0] < 0xc2) return -1; /* continuation, or an overlong 2-byte lead */
  else if (p[0] < 0xe0) { k = 2; cp = p[0] & 0x1fu; }
  else if (p[0] < 0xf0) { k = 3; cp = p[0] & 0x0fu; }
  else if (p[0] < 0xf5) { k = 4; cp = p[0] & 0x07u; }
  else return -1;
  if (n < (size_t)k) return -1;
  for (i = 1; i < k; i++) {
    if ((p[i] & 0xc0) != 0x80) return -1;
    cp = cp << 6 | (p[i] & 0x3fu);
  }
  if ((k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000) ||
      cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return -1;
  *len = k;
  return (long)cp;
}

/* Does the server refuse code point cp (the control characters apart)? */
static int paths_refused(long cp) {
  return (cp >= 0xd800 && cp <= 0xf8ff) || (cp >= 0xfff0 && cp <= 0xffff) ||
         cp > 0xffff;
}

/* The byte at i of p (n bytes), '\0' past the end. */
static unsigned char paths_at(const char *p, size_t n, size_t i) {
  return i < n ? (unsigned char)p[i] : '\0';
}

const char *zkl_path_problem(const char *p, size_t len, size_t max,
                             char *buf, size_t size) {
  size_t i;
  int step;
  if (!p || !buf || size == 0) return "no path";
  if (max == 0 || max > ZKL_PATH_MAX) max = ZKL_PATH_MAX;
  if (len == 0 || p[0] != '/') return "path must start with '/'";
  if (len == 1) return "path must not be the root";
  if (len > max) {
    if (max < ZKL_PATH_MAX)
      snprintf(buf, size, "path too long (over %zu bytes: its nodes' paths "
               "would pass %d)", max, ZKL_PATH_MAX);
    else
      snprintf(buf, size, "path too long (over %zu bytes)", max);
    return buf;
  }
  if (p[len - 1] == '/') return "path must not end with '/'";
  if (memchr(p, '\0', len)) return "path contains a NUL byte";
  for (i = 0; i < len; i += (size_t)step) {
    unsigned char b = (unsigned char)p[i];
    long cp;
    step = 1;
    if (b == '/') {
      unsigned char c1 = paths_at(p, len, i + 1), c2 = paths_at(p, len, i + 2);
      if (c1 == '/') return "empty path component";
      if (c1 == '.' && (c2 == '/' || c2 == '\0' ||
                        (c2 == '.' && (paths_at(p, len, i + 3) == '/' ||
                                       paths_at(p, len, i + 3) == '\0'))))
        return "relative path component";
      continue;
    }
    if (b < 0x20 || b == 0x7f) return "path contains a control character";
    if (b < 0x80) continue;
    cp = paths_utf8((const unsigned char *)p + i, len - i, &step);
    if (cp < 0) {
      snprintf(buf, size, "path is not valid UTF-8 (at byte %zu)", i + 1);
      return buf;
    }
    if (cp <= 0x9f) return "path contains a control character"; /* C1 */
    if (paths_refused(cp)) {
      snprintf(buf, size, "path contains U+%04lX, a character ZooKeeper "
               "refuses", (unsigned long)cp);
      return buf;
    }
  }
  return NULL;
}

const char *zkl_hosts_problem(const char *h, size_t len, char *buf,
                              size_t size) {
  const char *slash, *e, *end;
  size_t hl;
  if (!h || !buf || size == 0) return "no connect string";
  if (len == 0)
    return "empty connect string; expected \"host:port[,host:port...]"
           "[/chroot]\"";
  if (memchr(h, '\0', len)) return "connect string contains a NUL byte";
  slash = memchr(h, '/', len);
  hl = slash ? (size_t)(slash - h) : len;
  if (slash && len - hl > 1) {
    char why[128];
    const char *w = zkl_path_problem(slash, len - hl, ZKL_PATH_MAX, why,
                                     sizeof why);
    if (w) {
      snprintf(buf, size, "chroot: %s", w);
      return buf;
    }
  }
  if (hl == 0) return "no host:port before the chroot";
  for (e = h, end = h + hl; e <= end; e++) {
    const char *next = memchr(e, ',', (size_t)(end - e)), *colon = NULL, *q;
    const char *stop = next ? next : end;
    int n, port = 0, bad = 0;
    while (e < stop && (*e == ' ' || *e == '\t')) e++; /* (as the client) */
    n = (int)(stop - e) > 200 ? 200 : (int)(stop - e); /* quoted below */
    if (e == stop) {
      snprintf(buf, size, "empty host in the connect string (host:port "
               "expected between commas)");
      return buf;
    }
    for (q = e; q < stop; q++) {
      if (*q == ':') colon = q;
      if ((unsigned char)*q <= ' ' || *q == 0x7f) bad = 1;
    }
    if (bad) {
      snprintf(buf, size, "host '%.*s' contains a space or a control "
               "character", n, e);
      return buf;
    }
    if (!colon) {
      snprintf(buf, size, "host '%.*s' has no port (host:port expected)", n,
               e);
      return buf;
    }
    if (colon == e) {
      snprintf(buf, size, "host '%.*s' has no name before its port", n, e);
      return buf;
    }
    for (q = colon + 1; q < stop && *q >= '0' && *q <= '9' && port <= 65535;
         q++)
      port = port * 10 + (*q - '0');
    if (q != stop || port < 1 || port > 65535) {
      snprintf(buf, size, "host '%.*s' has a bad port (a number from 1 to "
               "65535 expected)", n, e);
      return buf;
    }
    e = stop; /* (the loop steps over the comma) */
  }
  return NULL;
}

const char *zkl_hosts_chroot(const char *hosts) {
  const char *slash = hosts ? strchr(hosts, '/') : NULL;
  return slash && slash[1] != '\0' ? slash : NULL;
}
