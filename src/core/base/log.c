/* The ZooKeeper C client's log (docs/design.md section 13.1).  Every
 * session passes zkl_log_line as its log callback.  By default a line goes
 * to stderr at once, as the client itself would write it.  Once Lua
 * captures the log (zklock.set_logger, and zklock.ngx inside nginx), lines
 * are queued here instead, on whichever thread logs (a ZooKeeper thread,
 * mostly: no Lua there), and the Lua thread takes them out with
 * zkl_log_pop when it next dispatches.  The queue is bounded: when full,
 * the oldest line goes and is counted as dropped. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../zkl.h"

#define LOG_CAP 512 /* lines kept for Lua */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int log_capture;
static char *log_ring[LOG_CAP];
static unsigned log_head, log_count;
static unsigned long log_dropped;

/* The level of a line formatted by the client ("...:ZOO_WARN@func@line:
 * text"), as ZKL_LOG_*; error when it names none. */
static int log_level_of(const char *msg) {
  static const struct { const char *tag; int level; } tags[] = {
    { "ZOO_ERROR@", ZKL_LOG_ERROR }, { "ZOO_WARN@", ZKL_LOG_WARN },
    { "ZOO_INFO@", ZKL_LOG_INFO },   { "ZOO_DEBUG@", ZKL_LOG_DEBUG },
  };
  size_t i;
  for (i = 0; i < sizeof tags / sizeof tags[0]; i++)
    if (strstr(msg, tags[i].tag)) return tags[i].level;
  return ZKL_LOG_ERROR;
}

/* fork: the child gets the queue's mutex free (a ZooKeeper thread of the
 * parent may hold it at the fork; the child has no such thread) */
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static void log_prefork(void) { pthread_mutex_lock(&log_mu); }
static void log_postfork(void) { pthread_mutex_unlock(&log_mu); }
static void log_atfork(void) {
  pthread_atfork(log_prefork, log_postfork, log_postfork);
}

void zkl_log_line(const char *msg) {
  char *copy;
  if (!msg) return;
  pthread_once(&log_once, log_atfork);
  pthread_mutex_lock(&log_mu);
  if (!log_capture) {
    pthread_mutex_unlock(&log_mu);
    fprintf(stderr, "%s\n", msg);
    return;
  }
  copy = strdup(msg);
  if (!copy) {
    log_dropped++;
  } else {
    if (log_count == LOG_CAP) { /* full: the oldest goes */
      free(log_ring[log_head]);
      log_head = (log_head + 1) % LOG_CAP;
      log_count--;
      log_dropped++;
    }
    log_ring[(log_head + log_count) % LOG_CAP] = copy;
    log_count++;
  }
  pthread_mutex_unlock(&log_mu);
}

/* zklock's own lines (ZKL_LOG_*): at the level the C client logs at */
static int note_level;

void zkl_log_set_level(int level) {
  pthread_once(&log_once, log_atfork);
  pthread_mutex_lock(&log_mu);
  note_level = level;
  pthread_mutex_unlock(&log_mu);
}

void zkl_log_note(int level, const char *msg) {
  int on;
  pthread_once(&log_once, log_atfork);
  pthread_mutex_lock(&log_mu);
  on = level <= note_level;
  pthread_mutex_unlock(&log_mu);
  if (on) zkl_log_line(msg);
}

void zkl_log_capture(int on) {
  pthread_once(&log_once, log_atfork);
  pthread_mutex_lock(&log_mu);
  log_capture = on != 0;
  pthread_mutex_unlock(&log_mu);
}

int zkl_log_pop(char *buf, size_t size, int *level, unsigned long *dropped) {
  char *line = NULL;
  pthread_mutex_lock(&log_mu);
  if (dropped) {
    *dropped = log_dropped;
    log_dropped = 0;
  }
  if (log_count > 0) {
    line = log_ring[log_head];
    log_ring[log_head] = NULL;
    log_head = (log_head + 1) % LOG_CAP;
    log_count--;
  }
  pthread_mutex_unlock(&log_mu);
  if (!line) return 0;
  if (level) *level = log_level_of(line);
  if (buf && size > 0) {
    size_t n = strlen(line);
    if (n >= size) n = size - 1;
    memcpy(buf, line, n);
    buf[n] = '\0';
  }
  free(line);
  return 1;
}
