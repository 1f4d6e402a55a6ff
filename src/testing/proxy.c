/* Test equipment (zklock.testing.proxy): a loopback TCP proxy in front of
 * a ZooKeeper server, run by a thread of the calling process, that cuts or
 * stalls its connections on command.  Stalling one direction while the
 * other flows is how a test makes the server apply a request whose reply
 * never arrives: stall replies, send, cut.
 *
 * One thread polls the listening socket, a wake-up pipe and every pair of
 * sockets; commands set flags under a mutex and write to the pipe.  Only
 * that thread touches the sockets, and never with the mutex held; a peer
 * that takes nothing for a second loses its connection. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testing.h"

#define PROXY_MT "zklock.proxy"
#define PROXY_MAX 256 /* connection pairs */

typedef struct {
  pthread_t thread;
  pthread_mutex_t mu;
  int listen_fd, wake[2], port, target_port;
  int stall_up, stall_down; /* don't forward client->server / back */
  int cut, stop, refuse;    /* commands; refuse: close new connections */
  int n;
  int client[PROXY_MAX], server[PROXY_MAX];
  unsigned long cuts, accepted;
  pid_t pid;
} proxy;

static void proxy_close_pair(proxy *p, int i) {
  close(p->client[i]);
  close(p->server[i]);
  p->n--;
  p->client[i] = p->client[p->n];
  p->server[i] = p->server[p->n];
}

/* Wait (at most a second) until fd can take more; 0 if it cannot. */
static int proxy_room(int fd) {
  struct pollfd pf;
  pf.fd = fd;
  pf.events = POLLOUT;
  pf.revents = 0;
  return poll(&pf, 1, 1000) == 1 && !(pf.revents & (POLLERR | POLLHUP));
}

static int proxy_connect(int port) {
  struct sockaddr_in sa;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1, err = 0;
  socklen_t len = sizeof err;
  if (fd < 0) return -1;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((unsigned short)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 &&
      !(errno == EINPROGRESS && proxy_room(fd) &&
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)) {
    close(fd);
    return -1;
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

/* Copy what is readable on `from` to `to`; 0 when the pair must close. */
static int proxy_pump(int from, int to) {
  char buf[65536];
  ssize_t n = recv(from, buf, sizeof buf, MSG_DONTWAIT), off = 0;
  if (n == 0) return 0;
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  while (off < n) {
    ssize_t w = send(to, buf + off, (size_t)(n - off),
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) { off += w; continue; }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN && proxy_room(to)) continue;
    return 0;
  }
  return 1;
}

static void *proxy_main(void *arg) {
  proxy *p = arg;
  struct pollfd fds[2 + 2 * PROXY_MAX];
  for (;;) {
    int i, nf = 0, up, down, n, refuse;
    char drain[64];
    pthread_mutex_lock(&p->mu);
    if (p->stop) { pthread_mutex_unlock(&p->mu); break; }
    if (p->cut) {
      while (p->n > 0) proxy_close_pair(p, 0);
      p->cut = 0;
    }
    up = !p->stall_up;
    down = !p->stall_down;
    refuse = p->refuse;
    n = p->n;
    fds[nf].fd = p->listen_fd; fds[nf++].events = POLLIN;
    fds[nf].fd = p->wake[0]; fds[nf++].events = POLLIN;
    for (i = 0; i < n; i++) {
      fds[nf].fd = p->client[i]; fds[nf++].events = up ? POLLIN : 0;
      fds[nf].fd = p->server[i]; fds[nf++].events = down ? POLLIN : 0;
    }
    pthread_mutex_unlock(&p->mu);
    if (poll(fds, (nfds_t)nf, 1000) < 0 && errno != EINTR) break;
    if (fds[1].revents) while (read(p->wake[0], drain, sizeof drain) > 0) {}
    /* the pairs polled: the arrays change only on this thread (cut too is
     * carried out here), under the mutex for stats() */
    for (i = n - 1; i >= 0; i--) {
      short cr = fds[2 + 2 * i].revents, sr = fds[3 + 2 * i].revents;
      int ok = 1;
      /* (a side not polled for input still reports a hang-up: the pair
       * is dead, and would otherwise wake us at once, over and over) */
      if (cr & (POLLERR | POLLNVAL)) ok = 0;
      if (ok && !up && (cr & POLLHUP)) ok = 0;
      if (ok && up && (cr & (POLLIN | POLLHUP)))
        ok = proxy_pump(p->client[i], p->server[i]);
      if (ok && (sr & (POLLERR | POLLNVAL))) ok = 0;
      if (ok && !down && (sr & POLLHUP)) ok = 0;
      if (ok && down && (sr & (POLLIN | POLLHUP)))
        ok = proxy_pump(p->server[i], p->client[i]);
      if (!ok) {
        pthread_mutex_lock(&p->mu);
        proxy_close_pair(p, i);
        pthread_mutex_unlock(&p->mu);
      }
    }
    if (fds[0].revents & POLLIN) {
      int c = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      int s = -1;
      if (c >= 0) {
        if (!refuse && p->n < PROXY_MAX) s = proxy_connect(p->target_port);
        if (s < 0) {
          close(c);
        } else {
          int one = 1;
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          pthread_mutex_lock(&p->mu);
          p->client[p->n] = c;
          p->server[p->n] = s;
          p->n++;
          p->accepted++;
          pthread_mutex_unlock(&p->mu);
        }
      }
    }
  }
  return NULL;
}

static proxy *proxy_check(lua_State *L) {
  proxy **b = (proxy **)luaL_checkudata(L, 1, PROXY_MT);
  luaL_argcheck(L, *b != NULL, 1, "proxy is closed");
  return *b;
}

static void proxy_poke(proxy *p) {
  char one = 1;
  ssize_t n = write(p->wake[1], &one, 1);
  (void)n; /* full: a wake-up is pending anyway */
}

/* core.proxy(target_port) -> proxy listening on a free loopback port */
static int proxy_new(lua_State *L) {
  int target = (int)luaL_checkinteger(L, 1);
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  int one = 1;
  proxy **b = (proxy **)lua_newuserdata(L, sizeof *b);
  proxy *p = calloc(1, sizeof *p);
  *b = NULL;
  luaL_setmetatable(L, PROXY_MT);
  if (!p) return luaL_error(L, "out of memory");
  p->target_port = target;
  p->wake[0] = p->wake[1] = -1;
  p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (p->listen_fd < 0 ||
      setsockopt(p->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
      bind(p->listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      listen(p->listen_fd, 64) != 0 ||
      getsockname(p->listen_fd, (struct sockaddr *)&sa, &len) != 0 ||
      pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    int e = errno;
    if (p->listen_fd >= 0) close(p->listen_fd);
    if (p->wake[0] >= 0) { close(p->wake[0]); close(p->wake[1]); }
    free(p);
    return luaL_error(L, "proxy: %s", strerror(e));
  }
  p->port = ntohs(sa.sin_port);
  p->pid = getpid();
  pthread_mutex_init(&p->mu, NULL);
  if (pthread_create(&p->thread, NULL, proxy_main, p) != 0) {
    close(p->listen_fd); close(p->wake[0]); close(p->wake[1]);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return luaL_error(L, "proxy: cannot start its thread");
  }
  *b = p;
  return 1;
}

static int proxy_port(lua_State *L) {
  lua_pushinteger(L, proxy_check(L)->port);
  return 1;
}

/* proxy:stall(up, down): stop (true) or resume (false) forwarding
 * client->server (up) and server->client (down) */
static int proxy_stall(lua_State *L) {
  proxy *p = proxy_check(L);
  pthread_mutex_lock(&p->mu);
  p->stall_up = lua_toboolean(L, 2);
  p->stall_down = lua_toboolean(L, 3);
  pthread_mutex_unlock(&p->mu);
  proxy_poke(p);
  return 0;
}

/* proxy:cut(): close every connection now (new ones are accepted) */
static int proxy_cut(lua_State *L) {
  proxy *p = proxy_check(L);
  pthread_mutex_lock(&p->mu);
  p->cut = 1;
  p->cuts++;
  pthread_mutex_unlock(&p->mu);
  proxy_poke(p);
  return 0;
}

/* proxy:refuse(on): close new connections at once while on */
static int proxy_refuse(lua_State *L) {
  proxy *p = proxy_check(L);
  pthread_mutex_lock(&p->mu);
  p->refuse = lua_toboolean(L, 2);
  pthread_mutex_unlock(&p->mu);
  return 0;
}

/* proxy:stats() -> { connections =, accepted =, cuts = } */
static int proxy_stats(lua_State *L) {
  proxy *p = proxy_check(L);
  int n;
  unsigned long acc, cuts;
  pthread_mutex_lock(&p->mu);
  n = p->n;
  acc = p->accepted;
  cuts = p->cuts;
  pthread_mutex_unlock(&p->mu);
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, n);
  lua_setfield(L, -2, "connections");
  lua_pushinteger(L, (lua_Integer)acc);
  lua_setfield(L, -2, "accepted");
  lua_pushinteger(L, (lua_Integer)cuts);
  lua_setfield(L, -2, "cuts");
  return 1;
}

static int proxy_close(lua_State *L) {
  proxy **b = (proxy **)luaL_checkudata(L, 1, PROXY_MT);
  proxy *p = *b;
  if (!p) return 0;
  *b = NULL;
  if (p->pid != getpid()) return 0; /* a forked child: not its thread */
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_mutex_unlock(&p->mu);
  proxy_poke(p);
  pthread_join(p->thread, NULL);
  while (p->n > 0) proxy_close_pair(p, 0);
  close(p->listen_fd);
  close(p->wake[0]);
  close(p->wake[1]);
  pthread_mutex_destroy(&p->mu);
  free(p);
  return 0;
}

void zkl_open_proxy(lua_State *L) {
  static const luaL_Reg methods[] = {
    { "port", proxy_port },
    { "stall", proxy_stall },
    { "cut", proxy_cut },
    { "refuse", proxy_refuse },
    { "stats", proxy_stats },
    { "close", proxy_close },
    { NULL, NULL }
  };
  static const luaL_Reg meta[] = {
    { "__gc", proxy_close },
    { NULL, NULL }
  };
  zkl_setmeta(L, PROXY_MT, methods, meta);
  lua_pushcfunction(L, proxy_new);
  lua_setfield(L, -2, "proxy");
}
