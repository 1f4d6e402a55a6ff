/* floor.create_delete: the least any ZooKeeper lock can cost per
 * acquire+release, a create(EPHEMERAL|SEQUENCE) then a delete, with the
 * plain synchronous C client and no recipe logic.
 * usage: floor HOST:PORT CYCLES [list]
 * With `list` (build/floor_list: built against the C client zklock
 * builds, whose completions run on the IO thread): floor.create_list_delete,
 * the lock protocol itself in C, zklock's three requests and no more: the
 * create with the listing piped behind it (one wake-up of the IO thread,
 * zoo_zklock_batch), then the delete, each awaited on a condition
 * variable signalled from the completion, as zklock's are (docs/
 * performance.md).
 * Prints one line (docs/performance.md) with cpu_us_per_cycle: clock()
 * over the loop, the CPU time (user+system) of the whole process, every
 * thread (ours and the C client's IO and completion threads).  It waits
 * for the session on a condition variable, not by polling, so that the
 * whole-process check (bench/whole.lua) sees the connect as it is. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zookeeper/zookeeper.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int connected;

static void watcher(zhandle_t *zh, int type, int state, const char *path,
                    void *ctx) {
  (void)zh; (void)path; (void)ctx;
  if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) {
    pthread_mutex_lock(&mu);
    connected = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
  }
}

#ifdef ZOO_ZKLOCK_IO_COMPLETIONS
/* the lock protocol's cycle: replies land here, on the IO thread */
static int replied, list_rc;
static char created[256];

static void reply(int rc) {
  pthread_mutex_lock(&mu);
  if (rc != ZOK && list_rc == ZOK) list_rc = rc;
  replied++;
  pthread_cond_signal(&cv);
  pthread_mutex_unlock(&mu);
}
static void create_cb(int rc, const char *value, const void *data) {
  (void)data;
  if (rc == ZOK) snprintf(created, sizeof created, "%s", value);
  pthread_mutex_lock(&mu);
  if (rc != ZOK) list_rc = rc;
  pthread_mutex_unlock(&mu); /* (the listing behind it wakes the loop) */
}
static void list_cb(int rc, const struct String_vector *v, const void *d) {
  (void)v; (void)d;
  reply(rc);
}
static void delete_cb(int rc, const void *data) {
  (void)data;
  reply(rc);
}
static int await_reply(void) {
  int rc;
  pthread_mutex_lock(&mu);
  while (!replied) pthread_cond_wait(&cv, &mu);
  replied = 0;
  rc = list_rc;
  list_rc = ZOK;
  pthread_mutex_unlock(&mu);
  return rc;
}

/* create + piped listing, then delete: the names it made go in name */
static int lock_cycle(zhandle_t *zh, char *name, size_t len) {
  int rc;
  zoo_zklock_batch(zh, 1);
  rc = zoo_acreate(zh, "/floor/n-", "x", 1, &ZOO_OPEN_ACL_UNSAFE,
                   ZOO_EPHEMERAL | ZOO_SEQUENCE, create_cb, NULL);
  if (rc == ZOK) rc = zoo_aget_children(zh, "/floor", 0, list_cb, NULL);
  zoo_zklock_batch(zh, 0);
  if (rc == ZOK) rc = await_reply();
  if (rc != ZOK) return rc;
  snprintf(name, len, "%s", created);
  rc = zoo_adelete(zh, name, -1, delete_cb, NULL);
  return rc == ZOK ? await_reply() : rc;
}
#define INIT_FLAGS ZOO_ZKLOCK_IO_COMPLETIONS
#else
static int lock_cycle(zhandle_t *zh, char *name, size_t len) {
  (void)zh; (void)name; (void)len;
  return ZAPIERROR; /* (this build: Debian's C client; see usage) */
}
#define INIT_FLAGS 0
#endif

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  zhandle_t *zh;
  int i, n, rc, list;
  double t0, total, *lat;
  clock_t c0;
  struct timespec until;
  char name[256];
  if (argc < 3) {
    fprintf(stderr, "usage: %s HOST:PORT CYCLES [list]\n", argv[0]);
    return 2;
  }
  n = atoi(argv[2]);
  list = argc > 3 && strcmp(argv[3], "list") == 0;
  if (list && !INIT_FLAGS) {
    fprintf(stderr, "%s: list needs the C client zklock builds "
            "(build/floor_list)\n", argv[0]);
    return 2;
  }
  lat = calloc((size_t)n + 1, sizeof *lat); /* (n may be 0) */
  zoo_set_debug_level((ZooLogLevel)0);
  zh = zookeeper_init(argv[1], watcher, 10000, NULL, NULL,
                      list ? INIT_FLAGS : 0);
  if (!zh || !lat) return 1;
  /* as zklock does: no name resolution on every IO-thread wake-up */
  zoo_set_servers_resolution_delay(zh, -1);
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 10;
  pthread_mutex_lock(&mu);
  while (!connected &&
         pthread_cond_timedwait(&cv, &mu, &until) == 0) {}
  pthread_mutex_unlock(&mu);
  rc = zoo_create(zh, "/floor", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
  if (rc != ZOK && rc != ZNODEEXISTS) {
    fprintf(stderr, "create /floor: %s\n", zerror(rc));
    return 1;
  }
  c0 = clock();
  total = now();
  for (i = 0; i < n; i++) {
    t0 = now();
    if (list) {
      rc = lock_cycle(zh, name, sizeof name);
    } else {
      rc = zoo_create(zh, "/floor/n-", "x", 1, &ZOO_OPEN_ACL_UNSAFE,
                      ZOO_EPHEMERAL | ZOO_SEQUENCE, name, sizeof name);
      if (rc == ZOK) rc = zoo_delete(zh, name, -1);
    }
    if (rc != ZOK) {
      fprintf(stderr, "cycle %d: %s\n", i, zerror(rc));
      return 1;
    }
    lat[i] = now() - t0;
  }
  total = now() - total;
  c0 = clock() - c0;
  qsort(lat, (size_t)n, sizeof *lat, cmp);
  printf("floor.%s ops=%d ops_per_s=%.1f p50_us=%.0f p99_us=%.0f "
         "cpu_us_per_cycle=%.1f\n", list ? "create_list_delete" :
         "create_delete", n, n / total, lat[n / 2] * 1e6,
         lat[(n * 99) / 100] * 1e6, (double)c0 / CLOCKS_PER_SEC / n * 1e6);
  zoo_delete(zh, "/floor", -1);
  zookeeper_close(zh);
  free(lat);
  return 0;
}
