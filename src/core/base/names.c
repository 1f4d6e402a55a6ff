/* Lock node names: recognising contenders and ordering them.
 *
 * A contender is a child whose name carries a marker ("-lock-", "__lock__",
 * "__READ__", ...) followed by the sequence suffix ZooKeeper appended: a
 * signed 32-bit counter printed with "%010d".  The counter wraps to
 * -2147483648 after 2^31, so suffixes are compared as uint32, never as
 * strings.  Pure functions: no ZooKeeper, no Lua. */
#include <stdlib.h>
#include <string.h>

#include "../zkl.h"

/* Find the last occurrence of needle in s (markers sit right before the
 * suffix; the uuid in front of them never contains one). */
static const char *names_rfind(const char *s, const char *needle) {
  const char *found = NULL, *p = s;
  if (*needle == '\0') return NULL;
  while ((p = strstr(p, needle)) != NULL) found = p++;
  return found;
}

static int names_suffix(const char *s, uint32_t *seq) {
  const char *p = s;
  long long v = 0;
  int digits = 0, neg = 0;
  if (*p == '-') { neg = 1; p++; }
  for (; *p; p++, digits++) {
    if (*p < '0' || *p > '9' || digits >= 10) return 0;
    v = v * 10 + (*p - '0');
  }
  if (digits == 0) return 0;
  if (neg) v = -v;
  if (v < -2147483648LL || v > 2147483647LL) return 0;
  *seq = (uint32_t)(int32_t)v;
  return 1;
}

int zkl_name_parse(const char *name, const char *const *markers,
                   uint32_t *seq, int *which) {
  int i;
  for (i = 0; markers[i] != NULL; i++) {
    const char *m = names_rfind(name, markers[i]);
    if (m && names_suffix(m + strlen(markers[i]), seq)) {
      if (which) *which = i;
      return 1;
    }
  }
  return 0;
}

static int names_cmp(const void *a, const void *b) {
  const zkl_entry *x = a, *y = b;
  if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
  return strcmp(x->name, y->name);
}

int zkl_names_sort(char *const *names, int n, const char *const *markers,
                   zkl_entry *out) {
  int i, k = 0;
  for (i = 0; i < n; i++) {
    uint32_t seq;
    int which = 0;
    if (zkl_name_parse(names[i], markers, &seq, &which)) {
      out[k].name = names[i];
      out[k].seq = seq;
      out[k].which = which;
      k++;
    }
  }
  qsort(out, (size_t)k, sizeof *out, names_cmp);
  return k;
}

int zkl_names_find(const zkl_entry *e, int n, const char *name) {
  int i;
  for (i = 0; i < n; i++)
    if (strcmp(e[i].name, name) == 0) return i;
  return -1;
}

/* ---- the recipes' names (Curator's: docs/design.md, section 11) --------- */

/* Each marker once: what a node name of that kind contains.  kazoo's Lock
 * names its nodes "__lock__"; zklock creates Curator's "-lock-". */
#define MARK_LOCK  "-lock-"
#define MARK_KAZOO "__lock__"
#define MARK_LEASE "-lease-"
#define MARK_READ  "__READ__"
#define MARK_WRITE "__WRIT__"
#define MARK_LATCH "-latch-"  /* Curator LeaderLatch */

static const char *const names_mutex[] = { MARK_LOCK, MARK_KAZOO, NULL };
static const char *const names_lease[] = { MARK_LEASE, NULL };
static const char *const names_rw[] = { MARK_READ, MARK_WRITE, NULL };
static const char *const names_read[] = { MARK_READ, NULL };
static const char *const names_write[] = { MARK_WRITE, NULL };
static const char *const names_latch[] = { MARK_LATCH, NULL };

const char *const *zkl_markers(int family) {
  switch (family) {
  case ZKL_FAMILY_LEASE: return names_lease;
  case ZKL_FAMILY_RW: return names_rw;
  case ZKL_FAMILY_READ: return names_read;
  case ZKL_FAMILY_WRITE: return names_write;
  case ZKL_FAMILY_LATCH: return names_latch;
  default: return names_mutex;
  }
}

int zkl_kind_family(int kind) {
  switch (kind) {
  case ZKL_KIND_LEASE: return ZKL_FAMILY_LEASE;
  case ZKL_KIND_READ: case ZKL_KIND_WRITE: return ZKL_FAMILY_RW;
  case ZKL_KIND_LATCH: return ZKL_FAMILY_LATCH;
  default: return ZKL_FAMILY_MUTEX;
  }
}

const char *zkl_kind_marker(int kind) {
  switch (kind) {
  case ZKL_KIND_LEASE: return MARK_LEASE;
  case ZKL_KIND_READ: return "-" MARK_READ;
  case ZKL_KIND_WRITE: return "-" MARK_WRITE;
  case ZKL_KIND_LATCH: return MARK_LATCH;
  default: return MARK_LOCK;
  }
}

/* ---- who holds, who waits for whom (docs/design.md, section 4) -------- */

int zkl_names_blocker(int kind, int max_leases, const zkl_entry *e, int idx,
                      const char *ignore) {
  int j;
  switch (kind) {
  case ZKL_KIND_READ:
    if (ignore && zkl_names_find(e, idx, ignore) >= 0)
      return -1; /* we hold the write lock: reading is ours at once */
    for (j = idx - 1; j >= 0; j--)  /* nearest writer before us, but not */
      if (e[j].which == 1 &&        /* our own (the write holder reads) */
          !(ignore && strcmp(e[j].name, ignore) == 0))
        return j;
    return -1;
  case ZKL_KIND_WRITE:
    return idx == 0 ? -1 : idx - 1;
  default:
    /* a mutex (max_leases 1); leases: the holders of a semaphore are its
     * first max_leases lease nodes (the acquirer still waiting, if any,
     * made the newest: docs/design.md, section 4.10) */
    if (max_leases < 1) max_leases = 1;
    return idx < max_leases ? -1 : idx - max_leases;
  }
}

/* (seq, name) of a against b, the order zkl_names_sort gives */
static int names_before(uint32_t sa, const char *a, uint32_t sb,
                        const char *b) {
  if (sa != sb) return sa < sb;
  return strcmp(a, b) < 0;
}

int zkl_names_scan(int kind, char *const *names, int n, const char *ours,
                   const char *ignore, const char **blocker, int *ahead) {
  const char *const *markers = zkl_markers(zkl_kind_family(kind));
  uint32_t seq0, best_seq = 0;
  const char *best = NULL;
  int i, found = 0, below = 0, own_writer_ahead = 0;
  *blocker = NULL;
  *ahead = 0;
  if (!ours || !zkl_name_parse(ours, markers, &seq0, NULL)) return 0;
  for (i = 0; i < n; i++) {
    uint32_t seq;
    int which = 0;
    if (strcmp(names[i], ours) == 0) { found = 1; continue; }
    if (!zkl_name_parse(names[i], markers, &seq, &which)) continue;
    if (!names_before(seq, names[i], seq0, ours)) continue;
    if (kind == ZKL_KIND_READ) {
      if (ignore && strcmp(names[i], ignore) == 0) {
        own_writer_ahead = 1; /* the write holder reads: at once */
        continue;
      }
      if (which != 1) continue; /* readers do not hold readers back */
    }
    below++;
    if (!best || names_before(best_seq, best, seq, names[i])) {
      best = names[i];
      best_seq = seq;
    }
  }
  if (!found) return 0;
  if (own_writer_ahead) return 1;
  *blocker = best;
  *ahead = below;
  return 1;
}

int zkl_names_holders(int family, int max_leases, const zkl_entry *e, int n,
                      int *out) {
  int i, k = 0;
  for (i = 0; i < n; i++) {
    int kind = family == ZKL_FAMILY_RW
                 ? (e[i].which == 1 ? ZKL_KIND_WRITE : ZKL_KIND_READ)
               : family == ZKL_FAMILY_LEASE ? ZKL_KIND_LEASE
               : ZKL_KIND_MUTEX; /* (a latch leads as a mutex holds) */
    if (zkl_names_blocker(kind, max_leases, e, i, NULL) < 0) out[k++] = i;
  }
  return k;
}

int zkl_names_writer_between(const zkl_entry *e, int n, const char *w,
                             const char *r) {
  int wi = w ? zkl_names_find(e, n, w) : -1;
  int ri = r ? zkl_names_find(e, n, r) : -1, j;
  if (wi < 0) return 0;  /* our writer is gone: nobody is let in by it */
  if (ri < 0) ri = n;    /* our reader is gone: any writer after ours */
  for (j = wi + 1; j < ri; j++)
    if (e[j].which == 1) return 1;
  return 0;
}
