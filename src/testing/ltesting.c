/* luaopen_zklock_testing_core: test equipment for zklock.testing and the
 * specs, kept out of zklock.core: a free loopback port, ZooKeeper's
 * four-letter words, the fault-injecting proxy (proxy.c), a thread that
 * opens and closes descriptors (churn.c), a plain sleep, and
 * fork/_exit/waitpid to show what a forked child meets. */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testing.h"

__attribute__((visibility("default")))
int luaopen_zklock_testing_core(lua_State *L);

static int ltesting_free_port(lua_State *L) {
  int p = zkl_free_port();
  if (p < 0) return luaL_error(L, "no free loopback port");
  lua_pushinteger(L, p);
  return 1;
}

/* four_letter(host, port, cmd [, timeout]) -> text | nil, msg, code */
static int ltesting_four_letter(lua_State *L) {
  const char *host = luaL_checkstring(L, 1);
  int port = zkl_checkrange(L, 2, 1, 65535, "port");
  const char *cmd = luaL_checkstring(L, 3);
  double timeout = luaL_optnumber(L, 4, 2.0);
  zkl_error err;
  char *out;
  luaL_argcheck(L, timeout >= 0 && timeout <= 3600, 4, "timeout out of range");
  out = zkl_four_letter(host, port, cmd, timeout, &err);
  if (!out) return zkl_pusherr(L, &err);
  lua_pushstring(L, out);
  free(out);
  return 1;
}

/* sleep(seconds): a blocking sleep without a child process (specs,
 * workers, zklock.testing; never used by the recipes themselves). */
static int ltesting_sleep(lua_State *L) {
  double s = luaL_checknumber(L, 1);
  struct timespec ts;
  if (!(s > 0)) return 0;
  if (s > 86400) s = 86400;
  ts.tv_sec = (time_t)s;
  ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
  return 0;
}

static int ltesting_fork(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)fork());
  return 1;
}

static int ltesting_exit(lua_State *L) {
  _exit((int)luaL_optinteger(L, 1, 0));
  return 0;
}

static int ltesting_waitpid(lua_State *L) {
  int status = 0;
  pid_t p = waitpid((pid_t)luaL_checkinteger(L, 1), &status, 0);
  if (p < 0) { lua_pushnil(L); return 1; }
  lua_pushinteger(L, WIFEXITED(status) ? WEXITSTATUS(status)
                                       : 128 + WTERMSIG(status));
  return 1;
}

/* tcore.malloc_bytes() -> bytes the C heap has handed out and not taken
 * back (glibc's mallinfo2: the bench's per-waiter figures) */
static int ltesting_malloc_bytes(lua_State *L) {
  struct mallinfo2 mi = mallinfo2();
  lua_pushnumber(L, (lua_Number)mi.uordblks + (lua_Number)mi.hblkhd);
  return 1;
}

int luaopen_zklock_testing_core(lua_State *L) {
  static const luaL_Reg funcs[] = {
    { "free_port", ltesting_free_port },
    { "four_letter", ltesting_four_letter },
    { "sleep", ltesting_sleep },
    { "fork", ltesting_fork },
    { "exit", ltesting_exit },
    { "waitpid", ltesting_waitpid },
    { "malloc_bytes", ltesting_malloc_bytes },
    { NULL, NULL }
  };
  lua_newtable(L);
  luaL_setfuncs(L, funcs, 0);
  zkl_open_proxy(L);
  zkl_open_churn(L);
  zkl_open_reconfig(L);
  return 1;
}
