/* Test equipment (zklock.testing.core.fd_churn): a thread of the calling
 * process that opens and closes a socket in a loop, without close-on-exec,
 * as libzookeeper's IO thread does at every reconnect, only far more often.
 * A spec spawns children meanwhile and checks that none of them inherited
 * the socket: that holds only when the descriptors are closed in the child
 * itself, not from a list the parent made beforehand (spec/proc_spec.lua).
 *
 *   tcore.fd_churn() -> churn      churn:stop() -> sockets opened
 *
 * The thread touches nothing but its own descriptor and two counters. */
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "testing.h"

#define CHURN_MT "zklock.fd_churn"

typedef struct {
  pthread_t thread;
  int running;           /* the thread was started and not joined */
  int stop;              /* (atomic) asks the thread to end */
  unsigned long opened;  /* (atomic) sockets opened so far */
} churn;

static double churn_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Each socket stays open for about as long as opening and closing the
 * last one took (a few microseconds), so that another thread, whatever
 * moment it picks, finds it open about half of the time. */
static void *churn_main(void *arg) {
  churn *c = (churn *)arg;
  double cycle = 2e-6;
  while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
    double t0 = churn_now(), t1, t2;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0); /* (no SOCK_CLOEXEC) */
    if (fd < 0) {
      sched_yield();
      continue;
    }
    __atomic_add_fetch(&c->opened, 1, __ATOMIC_RELAXED);
    t1 = churn_now();
    while ((t2 = churn_now()) - t1 < cycle) {}
    close(fd);
    cycle = (t1 - t0) + (churn_now() - t2);
    if (cycle > 1e-3) cycle = 1e-3;
  }
  return NULL;
}

/* stops and joins the thread (once); the sockets it opened */
static unsigned long churn_end(churn *c) {
  if (c->running) {
    __atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
    pthread_join(c->thread, NULL);
    c->running = 0;
  }
  return __atomic_load_n(&c->opened, __ATOMIC_RELAXED);
}

static int churn_new(lua_State *L) {
  churn *c = (churn *)lua_newuserdata(L, sizeof *c); /* c */
  int rc;
  c->running = 0;
  c->stop = 0;
  c->opened = 0;
  luaL_setmetatable(L, CHURN_MT);
  rc = pthread_create(&c->thread, NULL, churn_main, c);
  if (rc != 0) return luaL_error(L, "pthread_create failed (%d)", rc);
  c->running = 1;
  return 1;
}

static int churn_stop(lua_State *L) {
  churn *c = (churn *)luaL_checkudata(L, 1, CHURN_MT);
  lua_pushinteger(L, (lua_Integer)churn_end(c));
  return 1;
}

static int churn_gc(lua_State *L) {
  churn_end((churn *)luaL_checkudata(L, 1, CHURN_MT));
  return 0;
}

void zkl_open_churn(lua_State *L) {
  static const luaL_Reg methods[] = {
    { "stop", churn_stop },
    { NULL, NULL }
  };
  luaL_newmetatable(L, CHURN_MT);       /* t, mt */
  lua_newtable(L);                      /* t, mt, methods */
  luaL_setfuncs(L, methods, 0);
  lua_setfield(L, -2, "__index");       /* t, mt */
  lua_pushcfunction(L, churn_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);                        /* t */
  lua_pushcfunction(L, churn_new);
  lua_setfield(L, -2, "fd_churn");
}
