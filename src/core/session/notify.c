/* How ZooKeeper's threads wake the Lua thread without calling Lua.
 *
 * Every change bumps the client's counter `gen` and broadcasts its
 * condition variable: a plain Lua wait sleeps on it (zkl_client_wait).
 * Under OpenResty nothing may block the worker: the event loop reads a
 * unix socket instead, to which one byte is written per batch of changes
 * (wake_pending), and a task with a waiter's wake id queues that id on
 * the ready list so that only its own waiters look again.  Callbacks Lua
 * owes the user (revocation, lock lost) wait on the event queue.
 * Functions marked "Lua thread" take the mutex; the rest run with it. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../internal.h"

#define NOTIFY_READY_MAX 65536

void zkl_client_changed(zkl_client *c) {
  zkl_client_bump(c);
  pthread_cond_broadcast(&c->cv);
}

void zkl_client_bump(zkl_client *c) {
  c->gen++;
  if (c->wake_fd >= 0 && !c->wake_pending) {
    char one = 1;
    ssize_t n;
    c->wake_since = zkl_now();
    n = send(c->wake_fd, &one, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n; /* EAGAIN: unread bytes wake the reader anyway */
    c->wake_pending = 1;
  }
}

void zkl_client_touch(zkl_client *c, unsigned wake_id) {
  if (!wake_id || c->wake_fd < 0 || c->ready_all) return;
  if (c->n_ready == c->cap_ready) {
    int cap = c->cap_ready ? 2 * c->cap_ready : 64;
    unsigned *p = cap <= NOTIFY_READY_MAX
                    ? realloc(c->ready, (size_t)cap * sizeof *p) : NULL;
    if (!p) { c->ready_all = 1; return; }
    c->ready = p;
    c->cap_ready = cap;
  }
  c->ready[c->n_ready++] = wake_id;
}

/* Lua thread */
unsigned long zkl_client_wait(zkl_client *c, unsigned long gen,
                              double timeout) {
  unsigned long now_gen;
  struct timespec ts;
  pthread_mutex_lock(&c->mu);
  if (timeout < 1e9) { /* longer: as good as for ever */
    /* (a deadline already past, in a caller's reckoning, is no wait: a
     * negative timeout must not read as "for ever") */
    if (timeout > 0) {
      ts = zkl_abstime(zkl_now() + timeout);
      while (c->gen == gen)
        if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) != 0) break;
    }
  } else {
    while (c->gen == gen) pthread_cond_wait(&c->cv, &c->mu);
  }
  now_gen = c->gen;
  pthread_mutex_unlock(&c->mu);
  return now_gen;
}

/* Lua thread */
int zkl_client_take_ready(zkl_client *c, unsigned **ids, int *n, int *all,
                          double *since) {
  int pending;
  pthread_mutex_lock(&c->mu);
  pending = c->wake_pending;
  *since = c->wake_since;
  *ids = c->ready;
  *n = c->n_ready;
  *all = c->ready_all;
  c->ready = NULL;
  c->n_ready = c->cap_ready = 0;
  c->ready_all = 0;
  c->wake_pending = 0;
  pthread_mutex_unlock(&c->mu);
  return pending;
}

/* ---- the wake-up socket (Lua thread) ------------------------------------ */

const char *zkl_client_wake_listen(zkl_client *c, zkl_error *err) {
  char dir[] = "/tmp/zklock-wake.XXXXXX";
  struct sockaddr_un sa;
  int fd;
  if (c->wake_fd >= 0 || c->wake_listen >= 0) {
    zkl_seterr(err, ZKL_EZK_ERROR, "the wake-up socket is already set up");
    return NULL;
  }
  if (!mkdtemp(dir)) {
    zkl_seterr(err, ZKL_EZK_ERROR, "mkdtemp: %s", strerror(errno));
    return NULL;
  }
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/s", dir);
  /* non-blocking: an accept with no connection pending fails at once
   * instead of blocking the nginx worker for ever */
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      listen(fd, 1) != 0 || !(c->wake_path = strdup(sa.sun_path))) {
    zkl_seterr(err, ZKL_EZK_ERROR, "wake-up socket %s: %s", sa.sun_path,
               strerror(errno));
    if (fd >= 0) close(fd);
    unlink(sa.sun_path);
    rmdir(dir);
    return NULL;
  }
  c->wake_listen = fd;
  return c->wake_path;
}

static void notify_unlisten(zkl_client *c) {
  if (c->wake_listen >= 0) close(c->wake_listen);
  c->wake_listen = -1;
  if (c->wake_path) {
    char *slash = strrchr(c->wake_path, '/');
    unlink(c->wake_path);
    if (slash) { *slash = 0; rmdir(c->wake_path); }
    free(c->wake_path);
    c->wake_path = NULL;
  }
}

int zkl_client_wake_accept(zkl_client *c, zkl_error *err) {
  int fd;
  if (c->wake_listen < 0) {
    zkl_seterr(err, ZKL_EZK_ERROR, "no wake-up socket is listening");
    return 0;
  }
  fd = accept4(c->wake_listen, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    zkl_seterr(err, ZKL_EZK_ERROR, "accept on the wake-up socket: %s",
               strerror(errno));
    notify_unlisten(c);
    return 0;
  }
  notify_unlisten(c);
  pthread_mutex_lock(&c->mu);
  c->wake_fd = fd;
  c->wake_pending = 0;
  c->ready_all = 1; /* whatever happened before: everyone looks again */
  zkl_client_changed(c);
  pthread_mutex_unlock(&c->mu);
  return 1;
}

/* Lua thread: the caller owns the returned end (it must outlive any
 * event loop's watch on it: a descriptor closed while polled may be
 * reused under the poller) */
int zkl_client_wake_pair(zkl_client *c, zkl_error *err) {
  int sv[2];
  pthread_mutex_lock(&c->mu);
  if (c->wake_fd >= 0 || c->wake_listen >= 0) {
    pthread_mutex_unlock(&c->mu);
    zkl_seterr(err, ZKL_EZK_ERROR, "this client's wake-up socket is "
               "already read (by zklock.ngx, or another zk:fd())");
    return -1;
  }
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                 sv) != 0) {
    pthread_mutex_unlock(&c->mu);
    zkl_seterr(err, ZKL_EZK_ERROR, "socketpair: %s", strerror(errno));
    return -1;
  }
  c->wake_fd = sv[1];
  c->wake_pending = 0;
  c->ready_all = 1; /* whatever happened before: everyone looks again */
  zkl_client_changed(c);
  pthread_mutex_unlock(&c->mu);
  return sv[0];
}

/* Lua thread: the caller knows its earliest deadline; it replaces any */
void zkl_client_wake_by(zkl_client *c, double at) {
  pthread_mutex_lock(&c->mu);
  c->wake_by = at > 0 ? at : 0;
  if (at > 0) zkl_client_rearm(c);
  pthread_mutex_unlock(&c->mu);
}

/* ---- callbacks Lua owes the user ---------------------------------------- */

void zkl_event_push(zkl_client *c, int type, const char *path,
                    unsigned long attempt) {
  zkl_event *e = calloc(1, sizeof *e);
  if (!e) return;
  e->type = type;
  e->attempt = attempt;
  e->path = strdup(path);
  if (!e->path) { free(e); return; }
  if (c->ev_tail) c->ev_tail->next = e; else c->ev_head = e;
  c->ev_tail = e;
}

/* Lua thread */
zkl_event *zkl_client_take_events(zkl_client *c) {
  zkl_event *e;
  pthread_mutex_lock(&c->mu);
  e = c->ev_head;
  c->ev_head = c->ev_tail = NULL;
  pthread_mutex_unlock(&c->mu);
  return e;
}

const zkl_event *zkl_event_read(const zkl_event *e, int *type,
                                const char **path, unsigned long *attempt) {
  *type = e->type;
  *path = e->path;
  *attempt = e->attempt;
  return e->next;
}

void zkl_events_free(zkl_event *e) {
  while (e) {
    zkl_event *next = e->next;
    free(e->path);
    free(e);
    e = next;
  }
}

/* the client's last reference went: nobody else can be here */
void zkl_notify_free(zkl_client *c) {
  zkl_events_free(c->ev_head);
  c->ev_head = c->ev_tail = NULL;
  if (c->wake_fd >= 0) close(c->wake_fd);
  c->wake_fd = -1;
  notify_unlisten(c);
  free(c->ready);
  c->ready = NULL;
}
