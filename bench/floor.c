/* floor.create_delete: the least any ZooKeeper lock can cost per
 * acquire+release, a create(EPHEMERAL|SEQUENCE) then a delete, with the
 * plain synchronous C client and no recipe logic.
 * usage: floor HOST:PORT CYCLES */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  zhandle_t *zh;
  int i, n, rc;
  double t0, total, *lat;
  char name[256];
  if (argc < 3) {
    fprintf(stderr, "usage: %s HOST:PORT CYCLES\n", argv[0]);
    return 2;
  }
  n = atoi(argv[2]);
  lat = calloc((size_t)n, sizeof *lat);
  zoo_set_debug_level((ZooLogLevel)0);
  zh = zookeeper_init(argv[1], NULL, 10000, NULL, NULL, 0);
  if (!zh || !lat) return 1;
  /* as zklock does: no name resolution on every IO-thread wake-up */
  zoo_set_servers_resolution_delay(zh, -1);
  for (i = 0; i < 200 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++)
    usleep(50000);
  rc = zoo_create(zh, "/floor", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
  if (rc != ZOK && rc != ZNODEEXISTS) {
    fprintf(stderr, "create /floor: %s\n", zerror(rc));
    return 1;
  }
  total = now();
  for (i = 0; i < n; i++) {
    t0 = now();
    rc = zoo_create(zh, "/floor/n-", "x", 1, &ZOO_OPEN_ACL_UNSAFE,
                    ZOO_EPHEMERAL | ZOO_SEQUENCE, name, sizeof name);
    if (rc == ZOK) rc = zoo_delete(zh, name, -1);
    if (rc != ZOK) {
      fprintf(stderr, "cycle %d: %s\n", i, zerror(rc));
      return 1;
    }
    lat[i] = now() - t0;
  }
  total = now() - total;
  qsort(lat, (size_t)n, sizeof *lat, cmp);
  printf("floor.create_delete ops=%d ops_per_s=%.1f p50_us=%.0f p99_us=%.0f\n",
         n, n / total, lat[n / 2] * 1e6, lat[(n * 99) / 100] * 1e6);
  zoo_delete(zh, "/floor", -1);
  zookeeper_close(zh);
  free(lat);
  return 0;
}
