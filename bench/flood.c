/* flood: N HTTP requests held open at once against one server on
 * loopback, each read until the server closes it; prints how many got
 * each status code.  For make bench's 100,000 requests queued on one
 * lock behind nginx, which curl cannot hold (300 transfers a process, and
 * one source address has only ~28k ports to one destination).
 * usage: flood PORT PATH N MAX_SECONDS [SOURCES]
 * Connections bind round-robin to 127.0.0.1 .. 127.0.0.SOURCES (default
 * 8).  FLOOD_PROGRESS=FILE: every 0.5 s the line
 * "sent=<requests written> answered=<responses ended by the server>" is
 * written to FILE (tmp + rename), so a driver can tell what is in flight.
 * stdout: "CODE COUNT" per status code, by code; 0 is no response (no
 * connection after 4 tries, an error before the status line, the
 * deadline).  Exit 0; 2 on bad arguments or too low a file limit. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNECTING 1000 /* connects in progress: the listen backlog */
#define TRIES 4             /* one connect and 3 retries */
#define RETRY_DELAY 0.05
#define PROGRESS_EVERY 0.5
#define MAX_N 10000000L
#define NEVENTS 1024
#define HEAD 12 /* "HTTP/1.1 200": all of the status line we need */

enum { IDLE, RETRY, CONNECTING, SENDING, READING, DONE };

struct conn {
  int fd;
  unsigned char state, tries, headlen;
  unsigned short status;
  size_t off; /* bytes of the request written */
  double due; /* RETRY: when to connect again */
  char head[HEAD];
};

static struct conn *conns;
static long n;
static int epfd = -1, port, sources;
static char *req;
static size_t reqlen;
/* retries, in due order (all wait the same delay): a ring of indices,
 * each connection in it at most once */
static long *rq, rq_head, rq_len;
static long next_new, connecting, sent, answered, done;
/* why connects and transfers failed, by errno, for stderr at the end */
static long connect_err[256], io_err[256], deadline_closed;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void count_err(long *table, int err) {
  table[err > 0 && err < 256 ? err : 0]++;
}

static void close_fd(int fd) {
  if (close(fd) < 0) perror("flood: close");
}

/* the connection is over; its status stays what was parsed (0 if none) */
static void finish(struct conn *c) {
  if (c->fd >= 0) close_fd(c->fd);
  c->fd = -1;
  c->state = DONE;
  done++;
}

static void parse_status(struct conn *c) {
  const char *h = c->head;
  if (c->headlen == HEAD && memcmp(h, "HTTP/", 5) == 0 && h[8] == ' ' &&
      h[9] >= '0' && h[9] <= '9' && h[10] >= '0' && h[10] <= '9' &&
      h[11] >= '0' && h[11] <= '9')
    c->status = (unsigned short)((h[9] - '0') * 100 + (h[10] - '0') * 10 +
                                 (h[11] - '0'));
}

/* a connect that did not get through: again after RETRY_DELAY, or give up */
static void connect_failed(struct conn *c, int err, double t) {
  count_err(connect_err, err);
  if (c->fd >= 0) {
    if (c->state == CONNECTING) connecting--;
    close_fd(c->fd);
    c->fd = -1;
  }
  if (c->tries >= TRIES) {
    finish(c);
    return;
  }
  c->state = RETRY;
  c->due = t + RETRY_DELAY;
  rq[(rq_head + rq_len) % n] = c - conns;
  rq_len++;
}

static void start(long i, double t) {
  struct conn *c = &conns[i];
  struct sockaddr_in src, dst;
  struct epoll_event ev;
  int fd;
  c->tries++;
  fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    connect_failed(c, errno, t);
    return;
  }
  c->fd = fd;
  memset(&src, 0, sizeof src);
  src.sin_family = AF_INET;
  src.sin_addr.s_addr = htonl(0x7f000001u + (uint32_t)(i % sources));
  dst = src;
  dst.sin_addr.s_addr = htonl(0x7f000001u);
  dst.sin_port = htons((uint16_t)port);
#ifdef IP_BIND_ADDRESS_NO_PORT
  {
    /* the port is picked at connect, per destination, not reserved at
     * bind for every destination: more ports per source address */
    static int warned;
    int one = 1;
    if (setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one,
                   sizeof one) < 0 && !warned) {
      warned = 1;
      perror("flood: IP_BIND_ADDRESS_NO_PORT (going on without)");
    }
  }
#endif
  if (bind(fd, (struct sockaddr *)&src, sizeof src) < 0) {
    connect_failed(c, errno, t);
    return;
  }
  /* in progress until epoll says writable, even if connect() returns 0 */
  if (connect(fd, (struct sockaddr *)&dst, sizeof dst) < 0 &&
      errno != EINPROGRESS) {
    connect_failed(c, errno, t);
    return;
  }
  ev.events = EPOLLOUT;
  ev.data.u64 = (uint64_t)i;
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
    connect_failed(c, errno, t);
    return;
  }
  c->state = CONNECTING;
  connecting++;
}

/* fill the free connect slots: retries that are due first, then new ones */
static void start_more(double t) {
  while (connecting < MAX_CONNECTING) {
    if (rq_len > 0 && conns[rq[rq_head]].due <= t) {
      long i = rq[rq_head];
      rq_head = (rq_head + 1) % n;
      rq_len--;
      start(i, t);
    } else if (next_new < n) {
      start(next_new++, t);
    } else {
      break;
    }
  }
}

static void send_more(struct conn *c, long i) {
  struct epoll_event ev;
  while (c->off < reqlen) {
    /* MSG_NOSIGNAL: a server that closed early is a status 0, not SIGPIPE */
    ssize_t w = send(c->fd, req + c->off, reqlen - c->off, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      count_err(io_err, errno);
      finish(c);
      return;
    }
    c->off += (size_t)w;
  }
  sent++;
  c->state = READING;
  ev.events = EPOLLIN;
  ev.data.u64 = (uint64_t)i;
  if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0) {
    count_err(io_err, errno);
    answered++; /* out of flight all the same */
    finish(c);
  }
}

/* read to EOF, keeping the first HEAD bytes; the body is dropped */
static void read_more(struct conn *c) {
  static char buf[65536];
  for (;;) {
    ssize_t r = read(c->fd, buf, sizeof buf);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      /* e.g. a reset after the response: its status stands */
      count_err(io_err, errno);
    } else if (r > 0) {
      if (c->headlen < HEAD) {
        size_t k = HEAD - c->headlen;
        if ((size_t)r < k) k = (size_t)r;
        memcpy(c->head + c->headlen, buf, k);
        c->headlen = (unsigned char)(c->headlen + k);
      }
      if ((size_t)r == sizeof buf) continue;
      return; /* short read: drained for now, level-triggered */
    }
    parse_status(c);
    answered++;
    finish(c);
    return;
  }
}

static void on_event(long i, uint32_t events, double t) {
  struct conn *c = &conns[i];
  if (c->state == CONNECTING) {
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
    if (err == 0 && (events & (EPOLLERR | EPOLLHUP)) && !(events & EPOLLOUT))
      err = ECONNABORTED;
    if (err != 0) {
      connect_failed(c, err, t);
      return;
    }
    connecting--;
    c->state = SENDING;
    send_more(c, i);
  } else if (c->state == SENDING) {
    send_more(c, i);
  } else if (c->state == READING) {
    read_more(c);
  }
}

static char *progress_path, *progress_tmp;

/* tmp + rename: a reader never sees half a line */
static void write_progress(void) {
  static int warned;
  char line[96];
  int fd, len, ok;
  if (!progress_path) return;
  len = snprintf(line, sizeof line, "sent=%ld answered=%ld\n", sent, answered);
  fd = open(progress_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ok = fd >= 0;
  if (ok) ok = write(fd, line, (size_t)len) == (ssize_t)len;
  if (fd >= 0 && close(fd) < 0) ok = 0;
  if (ok) ok = rename(progress_tmp, progress_path) == 0;
  if (!ok && !warned) {
    warned = 1;
    fprintf(stderr, "flood: progress file %s: %s\n", progress_path,
            strerror(errno));
  }
}

/* enough descriptors for every connection, or a clear no */
static int raise_nofile(void) {
  struct rlimit rl;
  rlim_t need = (rlim_t)n + 1000;
  if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
    perror("flood: getrlimit(RLIMIT_NOFILE)");
    return -1;
  }
  /* already enough: leave it (valgrind refuses a changed hard limit);
   * else soft and hard to need, or the hard limit kept where it is higher */
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) return 0;
  rl.rlim_cur = need;
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) rl.rlim_max = need;
  if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
    fprintf(stderr,
            "flood: cannot raise the open file limit to %lu for %ld "
            "connections: %s (the hard limit, ulimit -Hn, is raised only "
            "with CAP_SYS_RESOURCE, and never past fs.nr_open)\n",
            (unsigned long)need, n, strerror(errno));
    return -1;
  }
  return 0;
}

static void report_errors(const char *what, const long *table) {
  int e;
  for (e = 0; e < 256; e++)
    if (table[e])
      fprintf(stderr, "flood: %s %ld times: %s\n", what, table[e],
              e ? strerror(e) : "unknown error");
}

static int usage(const char *argv0) {
  fprintf(stderr, "usage: %s PORT PATH N MAX_SECONDS [SOURCES]\n", argv0);
  return 2;
}

int main(int argc, char **argv) {
  struct epoll_event *evs = NULL;
  long i, *counts = NULL;
  double t, deadline, next_progress, max_secs;
  const char *p;
  char *end;
  int rc = 1;
  if (argc < 5 || argc > 6) return usage(argv[0]);
  port = (int)strtol(argv[1], &end, 10);
  if (*end || port < 1 || port > 65535) return usage(argv[0]);
  /* the path goes into the request line as it is: no spaces, no controls */
  for (p = argv[2]; *p; p++)
    if ((unsigned char)*p <= ' ' || *p == 0x7f) break;
  if (*p || argv[2][0] != '/') {
    fprintf(stderr, "flood: PATH must start with / and hold no spaces\n");
    return 2;
  }
  n = strtol(argv[3], &end, 10);
  if (*end || n < 1 || n > MAX_N) return usage(argv[0]);
  max_secs = strtod(argv[4], &end);
  if (*end || !(max_secs > 0)) return usage(argv[0]);
  sources = 8;
  if (argc == 6) {
    sources = (int)strtol(argv[5], &end, 10);
    if (*end || sources < 1 || sources > 254) return usage(argv[0]);
  }
  if (raise_nofile() < 0) return 2;

  reqlen = strlen(argv[2]) +
           sizeof "GET  HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  req = malloc(reqlen);
  conns = calloc((size_t)n, sizeof *conns);
  rq = malloc((size_t)n * sizeof *rq);
  evs = malloc(NEVENTS * sizeof *evs);
  counts = calloc(1000, sizeof *counts);
  if (getenv("FLOOD_PROGRESS") && *getenv("FLOOD_PROGRESS")) {
    progress_path = strdup(getenv("FLOOD_PROGRESS"));
    progress_tmp = malloc(strlen(getenv("FLOOD_PROGRESS")) + 5);
    if (progress_tmp)
      snprintf(progress_tmp, strlen(getenv("FLOOD_PROGRESS")) + 5, "%s.tmp",
               getenv("FLOOD_PROGRESS"));
  }
  if (!req || !conns || !rq || !evs || !counts ||
      (getenv("FLOOD_PROGRESS") && *getenv("FLOOD_PROGRESS") &&
       (!progress_path || !progress_tmp))) {
    fprintf(stderr, "flood: out of memory\n");
    goto out;
  }
  reqlen = (size_t)snprintf(req, reqlen,
                            "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            "Connection: close\r\n\r\n", argv[2]);
  for (i = 0; i < n; i++) conns[i].fd = -1;
  epfd = epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0) {
    perror("flood: epoll_create1");
    goto out;
  }

  t = now();
  deadline = t + max_secs;
  next_progress = t; /* a first line straight away: the run has begun */
  while (done < n) {
    int k, timeout;
    double wake;
    t = now();
    if (t >= deadline) break;
    if (t >= next_progress) {
      write_progress();
      next_progress = t + PROGRESS_EVERY;
    }
    start_more(t);
    if (done >= n) break; /* the last ones may have given up just now */
    /* sleep until an event, the next progress line, a due retry that has
     * a free slot, or the deadline */
    wake = next_progress < deadline ? next_progress : deadline;
    if (rq_len > 0 && connecting < MAX_CONNECTING &&
        conns[rq[rq_head]].due < wake)
      wake = conns[rq[rq_head]].due;
    timeout = wake > t ? (int)((wake - t) * 1000) + 1 : 0;
    k = epoll_wait(epfd, evs, NEVENTS, timeout);
    if (k < 0) {
      if (errno == EINTR) continue;
      perror("flood: epoll_wait");
      goto out;
    }
    t = now();
    for (i = 0; i < k; i++) on_event((long)evs[i].data.u64, evs[i].events, t);
  }

  /* the deadline: whatever is still open or waiting is a 0 */
  for (i = 0; i < n; i++)
    if (conns[i].state != DONE) {
      if (conns[i].state == SENDING || conns[i].state == READING)
        deadline_closed++;
      conns[i].status = 0;
      finish(&conns[i]);
    }
  write_progress();

  for (i = 0; i < n; i++) counts[conns[i].status]++;
  for (i = 0; i < 1000; i++)
    if (counts[i]) printf("%ld %ld\n", i, counts[i]);
  report_errors("connect failed", connect_err);
  report_errors("transfer failed", io_err);
  if (deadline_closed)
    fprintf(stderr, "flood: %ld connected but unanswered at the deadline\n",
            deadline_closed);
  rc = fflush(stdout) == 0 ? 0 : 1;

out:
  if (conns)
    for (i = 0; i < n; i++)
      if (conns[i].fd >= 0) close_fd(conns[i].fd);
  if (epfd >= 0) close_fd(epfd);
  free(conns);
  free(rq);
  free(req);
  free(evs);
  free(counts);
  free(progress_path);
  free(progress_tmp);
  return rc;
}
