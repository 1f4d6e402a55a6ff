/* Lock node names: recognising contenders and ordering them.
 *
 * A contender is a child whose name carries a marker ("-lock-", "__lock__",
 * "__READ__", ...) followed by the sequence suffix ZooKeeper appended: a
 * signed 32-bit counter printed with "%010d".  The counter wraps to
 * -2147483648 after 2^31, so suffixes are compared as uint32, never as
 * strings.  Pure functions: no ZooKeeper, no Lua. */
#include <stdlib.h>
#include <string.h>

#include "zkl.h"

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

const char *const zkl_markers_mutex[] = { "-lock-", "__lock__", NULL };
const char *const zkl_markers_lease[] = { "-lease-", NULL };
const char *const zkl_markers_rw[] = { "__READ__", "__WRIT__", NULL };
