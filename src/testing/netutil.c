/* Loopback helpers for zklock.testing: a free TCP port, and ZooKeeper's
 * four-letter words ("ruok", "wchc", "srvr"...) without a shell. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testing.h"

int zkl_free_port(void) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  int port = -1, fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

static int net_wait(int fd, short ev, double deadline) {
  struct pollfd p;
  int ms = (int)((deadline - zkl_now()) * 1000);
  if (ms < 0) ms = 0;
  p.fd = fd; p.events = ev; p.revents = 0;
  return poll(&p, 1, ms) > 0;
}

char *zkl_four_letter(const char *host, int port, const char *cmd,
                      double timeout, zkl_error *err) {
  struct sockaddr_in a;
  double deadline = zkl_now() + timeout;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  int fd;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)port);
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
    zkl_seterr(err, ZKL_EZK_ERROR, "not an IPv4 address: %s", host);
    return NULL;
  }
  fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) goto fail;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    int e = 0;
    socklen_t el = sizeof e;
    if (errno != EINPROGRESS) goto fail;
    if (!net_wait(fd, POLLOUT, deadline)) { errno = ETIMEDOUT; goto fail; }
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
    if (e) { errno = e; goto fail; }
  }
  if (send(fd, cmd, strlen(cmd), MSG_NOSIGNAL) != (ssize_t)strlen(cmd))
    goto fail;
  for (;;) {
    ssize_t n;
    if (len + 4096 + 1 > cap) {
      char *nb = realloc(buf, cap = cap * 2 + 8192);
      if (!nb) goto fail;
      buf = nb;
    }
    if (!net_wait(fd, POLLIN, deadline)) { errno = ETIMEDOUT; goto fail; }
    n = recv(fd, buf + len, 4096, 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      if (errno == ECONNRESET && len > 0) break;
      goto fail;
    }
    len += (size_t)n;
  }
  close(fd);
  if (!buf) buf = malloc(1);
  if (buf) buf[len] = '\0';
  return buf;
fail:
  zkl_seterr(err, ZKL_ECONNECTION_LOSS, "%s:%d: %s", host, port,
             strerror(errno));
  if (fd >= 0) close(fd);
  free(buf);
  return NULL;
}
