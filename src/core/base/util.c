/* Generic helpers: clocks, the process id, random node names, path
 * joining, the reply codes that mean "try again" or "the session is
 * gone". */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "../internal.h"

double zkl_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double zkl_bootnow(void) {
  struct timespec ts;
#ifdef CLOCK_BOOTTIME
  if (clock_gettime(CLOCK_BOOTTIME, &ts) == 0)
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
#endif
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct timespec zkl_abstime(double end) {
  struct timespec ts;
  ts.tv_sec = (time_t)end;
  ts.tv_nsec = (long)((end - (double)ts.tv_sec) * 1e9);
  if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
  return ts;
}

/* ---- the process id, and random bytes, per process -------------------- */

/* Asked on every call from Lua (is this client our parent's?): one
 * getpid() each was a tenth of the uncontended cycle's system calls
 * (issue 34).  Kept, and made again in a forked child by an atfork
 * handler, which also drops the random bytes drawn ahead (a child must
 * not name its nodes as its parent does). */
static pthread_once_t util_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t util_mu = PTHREAD_MUTEX_INITIALIZER;
static volatile pid_t util_pid;
static unsigned char util_pool[512];
static size_t util_left; /* bytes of util_pool not handed out yet */

/* (the pool's mutex is held across fork: no thread holds it in the child) */
static void util_fork_prepare(void) { pthread_mutex_lock(&util_mu); }
static void util_fork_parent(void) { pthread_mutex_unlock(&util_mu); }
static void util_fork_child(void) {
  util_pid = getpid();
  util_left = 0;
  pthread_mutex_unlock(&util_mu);
}

static void util_init(void) {
  util_pid = getpid();
  pthread_atfork(util_fork_prepare, util_fork_parent, util_fork_child);
}

pid_t zkl_pid(void) {
  pthread_once(&util_once, util_init);
  return util_pid;
}

/* getrandom, or /dev/urandom where it is refused (old kernels, seccomp
 * filters answering ENOSYS or EPERM); 0 when neither gives bytes. */
static int util_random(unsigned char *b, size_t len) {
  size_t got = 0;
  int fd;
  while (got < len) {
    ssize_t n = getrandom(b + got, len - got, 0);
    if (n > 0) got += (size_t)n;
    else if (n < 0 && errno != EINTR) break;
  }
  if (got == len) return 1;
  fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  while (got < len) {
    ssize_t n = read(fd, b + got, len - got);
    if (n > 0) got += (size_t)n;
    else if (!(n < 0 && errno == EINTR)) break;
  }
  close(fd);
  return got == len;
}

/* len (<= sizeof util_pool) random bytes, drawn a pool at a time */
static int util_draw(unsigned char *b, size_t len) {
  int ok = 1;
  pthread_once(&util_once, util_init);
  pthread_mutex_lock(&util_mu);
  if (util_left < len) {
    ok = util_random(util_pool, sizeof util_pool);
    util_left = ok ? sizeof util_pool : 0;
  }
  if (ok) {
    memcpy(b, util_pool + sizeof util_pool - util_left, len);
    memset(util_pool + sizeof util_pool - util_left, 0, len);
    util_left -= len;
  }
  pthread_mutex_unlock(&util_mu);
  return ok;
}

void zkl_uuid_format(unsigned char *b, int version, char *out) {
  b[6] = (unsigned char)((b[6] & 0x0f) | (version << 4));
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
  snprintf(out, 37,
           "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
           "%02x%02x%02x%02x%02x%02x",
           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
           b[11], b[12], b[13], b[14], b[15]);
}

int zkl_uuid(char *out) {
  unsigned char b[16];
  if (!util_draw(b, sizeof b)) return 0;
  zkl_uuid_format(b, 4, out);
  return 1;
}

char *zkl_join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s%s%s", strcmp(dir, "/") == 0 ? "" : dir, "/", name);
  return s;
}

/* A handle the client still sends on: not expired, not refused.  (A
 * multi-op on a dead handle makes the client free request paths it never
 * set: check before zoo_amulti.) */
int zkl_zh_usable(zhandle_t *zh) {
  int st;
  if (!zh) return 0;
  st = zoo_state(zh);
  return st != ZOO_EXPIRED_SESSION_STATE && st != ZOO_AUTH_FAILED_STATE;
}

int zkl_is_cut(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT;
}

int zkl_is_gone(int rc) {
  return rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZINVALIDSTATE ||
         rc == ZMARSHALLINGERROR;
}

/* ---- set-or-create (docs/design.md, section 4.9) ------------------------ */

int zkl_write_next(int rc, int creating) {
  if (rc == ZNONODE) return creating ? ZKL_WRITE_PARENTS : ZKL_WRITE_CREATE;
  if (rc == ZNODEEXISTS && creating) return ZKL_WRITE_SET; /* was quicker */
  return ZKL_WRITE_FAIL;
}

void zkl_write_op_init(zoo_op_t *op, zkl_client *c, const char *path,
                       const char *data, int len, int creating,
                       struct Stat *st, char *name, int namelen) {
  if (creating)
    zoo_create_op_init(op, path, data, len, &c->acl, 0, name, namelen);
  else
    zoo_set_op_init(op, path, data, len, -1, st);
}
