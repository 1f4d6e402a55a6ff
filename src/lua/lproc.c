/* Child processes and signals, for the command-line tool (bin/zklock,
 * docs/cli.md): start a command, reap it, signal it (or its process
 * group), and note the signals the tool itself receives.  Part of
 * zklock.core so that the installed tool needs nothing of the test
 * equipment.
 *
 *   core.open_fds()             -> { fd, ... } open now, ascending
 *   core.spawn(argv [, keep [, own_group [, env]]])
 *                               -> pid | nil, msg, "not_found" |
 *                                  "not_executable" | "spawn_failed"
 *   core.wait(pid [, nohang])   -> "running" | "exited", status |
 *                                  "signaled", signo, name | nil, msg
 *   core.kill(pid, name)        -> true | nil, msg
 *   core.killpg(pgid, name)     -> true | nil, msg
 *   core.group_alive(pgid)      -> boolean
 *   core.signum(name)           -> signal number, or nil (unknown name)
 *   core.catch_signals({ name, ... })   handlers that only count
 *   core.caught()               -> { name, ... } received since last asked
 *   core.mtime(path)            -> sec, nsec (the file's modification
 *                                  time) | nil, msg, "not_found" | "failed"
 *
 * The process has ZooKeeper threads, so the child is started with
 * posix_spawn: glibc's runs only async-signal-safe code between the clone
 * and the exec, resets the handlers the parent installed, and reports a
 * failed exec as its result.  The command is looked up in $PATH first, in
 * the parent (find_command).
 *
 * Descriptors: the child keeps 0, 1, 2 and those listed in `keep`; every
 * other one is closed in the child, between the clone and the exec (a
 * close action for each number below the highest kept one, then
 * posix_spawn_file_actions_addclosefrom_np: close_range, or a walk of
 * /proc/self/fd).  Not from a list made in the parent: libzookeeper's
 * descriptors have no close-on-exec, and its IO thread opens a socket at
 * any moment (a reconnect), also between such a listing and the clone.
 *
 * `own_group`: the child leads a new process group (its pgid is its pid),
 * so that the tool can signal the command with everything it started, and
 * see when all of it is gone (killpg, group_alive).  `env`: variables set
 * (a string) or removed (false) in the child's copy of the environment,
 * { NAME = value }; the tool's own environment is not changed (setenv is
 * not safe beside the ZooKeeper threads).  Signal names are
 * "TERM", "KILL", ... (a "SIG" prefix is allowed); only those of the table
 * below. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lbind.h"

extern char **environ;

#define ZKL_MAX_ARGS 65536
#define ZKL_MAX_FDS 65536

static const struct { const char *name; int num; int catchable; } signals[] = {
  { "HUP", SIGHUP, 1 },   { "INT", SIGINT, 1 },   { "QUIT", SIGQUIT, 1 },
  { "KILL", SIGKILL, 0 }, { "USR1", SIGUSR1, 1 }, { "USR2", SIGUSR2, 1 },
  { "ALRM", SIGALRM, 1 }, { "TERM", SIGTERM, 1 }, { "CONT", SIGCONT, 0 },
  { "STOP", SIGSTOP, 0 }, { "TSTP", SIGTSTP, 0 }, { "PIPE", SIGPIPE, 0 },
  { NULL, 0, 0 }
};

/* index into signals[] of a name ("TERM" or "SIGTERM"), or -1 */
static int signal_index(const char *name) {
  int i;
  if (strncmp(name, "SIG", 3) == 0) name += 3;
  for (i = 0; signals[i].name; i++)
    if (strcmp(signals[i].name, name) == 0) return i;
  return -1;
}

static const char *signal_name(int num) {
  int i;
  for (i = 0; signals[i].name; i++)
    if (signals[i].num == num) return signals[i].name;
  return NULL;
}

static int check_signal(lua_State *L, int idx) {
  const char *name = luaL_checkstring(L, idx);
  int i = signal_index(name);
  if (i < 0)
    luaL_argerror(L, idx, lua_pushfstring(L, "unknown signal name '%s'",
                  name));
  return i;
}

/* A pid of one process we may signal or reap: 2 .. INT_MAX (0 and
 * negative ones name process groups, 1 is init). */
static pid_t check_pid(lua_State *L, int idx) {
  lua_Number n = luaL_checknumber(L, idx);
  if (!(n >= 2 && n <= 0x7fffffff) || n != (lua_Number)(pid_t)n)
    luaL_argerror(L, idx, "pid must be an integer from 2 to 2147483647");
  return (pid_t)n;
}

/* The descriptors open now, ascending, into fds (at most max); returns how
 * many, or -1 when /proc/self/fd cannot be read. */
static int list_fds(int *fds, int max) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  int n = 0, i, j, self;
  if (!d) return -1;
  self = dirfd(d);
  while ((e = readdir(d)) != NULL && n < max) {
    char *end;
    long v;
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    v = strtol(e->d_name, &end, 10);
    if (*end || v < 0 || v > 0x7fffffff || (int)v == self) continue;
    fds[n++] = (int)v;
  }
  closedir(d);
  for (i = 1; i < n; i++) { /* insertion sort: short lists */
    int v = fds[i];
    for (j = i; j > 0 && fds[j - 1] > v; j--) fds[j] = fds[j - 1];
    fds[j] = v;
  }
  return n;
}

static int lproc_open_fds(lua_State *L) {
  int *fds = (int *)lua_newuserdata(L, sizeof(int) * ZKL_MAX_FDS);
  int n = list_fds(fds, ZKL_MAX_FDS), i;
  if (n < 0) return luaL_error(L, "cannot list /proc/self/fd: %s",
                               strerror(errno));
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    lua_pushinteger(L, fds[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* The file to execute for command `cmd`, looked up in $PATH as execvp
 * does (a name with a '/' as it is; $PATH unset: /bin:/usr/bin; an empty
 * entry: the current directory): 0 and a malloc'ed *file, or an errno:
 * ENOENT when nothing is found, EACCES when only files that may not be
 * executed were.  Done here, in the parent, rather than by posix_spawnp
 * in the child: the answer does not depend on how the child is made (under
 * valgrind the exec's failure never comes back to posix_spawnp). */
static int find_command(const char *cmd, char **file) {
  const char *path = getenv("PATH"), *p, *end;
  size_t clen = strlen(cmd);
  int seen = ENOENT;
  if (strchr(cmd, '/')) {
    *file = strdup(cmd);
    return *file ? 0 : ENOMEM;
  }
  if (!path) path = "/bin:/usr/bin";
  for (p = path;; p = end + 1) {
    size_t dlen;
    char *cand;
    struct stat st;
    end = strchr(p, ':');
    if (!end) end = p + strlen(p);
    dlen = (size_t)(end - p);
    cand = (char *)malloc(dlen + clen + 3);
    if (!cand) return ENOMEM;
    if (dlen == 0) memcpy(cand, ".", 1), dlen = 1;
    else memcpy(cand, p, dlen);
    cand[dlen] = '/';
    memcpy(cand + dlen + 1, cmd, clen + 1);
    if (stat(cand, &st) == 0 && !S_ISDIR(st.st_mode)) {
      if (access(cand, X_OK) == 0) {
        *file = cand;
        return 0;
      }
      seen = EACCES;
    }
    free(cand);
    if (!*end) return seen;
  }
}

typedef struct {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  int fa_ready, attr_ready;
} spawn_box;

static void spawn_box_free(spawn_box *b) {
  if (b->fa_ready) posix_spawn_file_actions_destroy(&b->fa);
  if (b->attr_ready) posix_spawnattr_destroy(&b->attr);
  b->fa_ready = b->attr_ready = 0;
}

static int spawn_box_gc(lua_State *L) {
  spawn_box *b = (spawn_box *)lua_touserdata(L, 1);
  if (b) spawn_box_free(b);
  return 0;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return x < y ? -1 : x > y;
}

/* The close actions that leave the child 0, 1, 2 and the descriptors
 * listed in the table at idx (nil: none), whatever else is open when the
 * child is made.  Raises on a bad entry. */
static void close_all_but(lua_State *L, int idx,
                          posix_spawn_file_actions_t *fa) {
  int n = lua_isnil(L, idx) ? 0 : (int)zkl_rawlen(L, idx), i, k, fd, hi = 2,
      rc;
  int *keep;
  luaL_argcheck(L, n <= ZKL_MAX_FDS, idx, "keep holds too many descriptors");
  keep = (int *)lua_newuserdata(L, sizeof(int) * ((size_t)n + 1));
  for (i = 0; i < n; i++) {
    lua_Number v;
    lua_rawgeti(L, idx, i + 1);
    v = lua_tonumber(L, -1);
    if (lua_type(L, -1) != LUA_TNUMBER || !(v >= 0 && v <= 0x7fffffff) ||
        v != (lua_Number)(int)v)
      luaL_argerror(L, idx, lua_pushfstring(L, "keep[%d] is not a "
                    "descriptor (an integer from 0)", i + 1));
    keep[i] = (int)v;
    lua_pop(L, 1);
  }
  qsort(keep, (size_t)n, sizeof(int), cmp_int);
  if (n > 0 && keep[n - 1] > hi) hi = keep[n - 1];
  /* below the highest kept one: each number not kept (a close action on a
   * descriptor that is not open does nothing; EBADF: the number is past
   * the process's limit, as valgrind's own descriptors are, and so is
   * every one above it) */
  for (fd = 3, k = 0; fd < hi; fd++) {
    while (k < n && keep[k] < fd) k++;
    if (k < n && keep[k] == fd) continue;
    rc = posix_spawn_file_actions_addclose(fa, fd);
    if (rc == EBADF) break;
    if (rc != 0)
      luaL_error(L, "posix_spawn_file_actions_addclose: %s", strerror(rc));
  }
  /* above it: every one, in the child, by close_range (or /proc/self/fd) */
  rc = posix_spawn_file_actions_addclosefrom_np(fa, hi + 1);
  if (rc != 0 && rc != EBADF)
    luaL_error(L, "posix_spawn_file_actions_addclosefrom_np: %s",
               strerror(rc));
  lua_pop(L, 1); /* keep */
}

/* The environment for the child: environ's entries whose names are not
 * keys of the table at idx (nil: none), then "NAME=value" for each string
 * value of it (false: removed).  The array is a userdata and its new
 * strings are in a table, both left on the stack (anchored: nothing after
 * this call uses relative indices below them).  Raises on a bad name or
 * value. */
static char **child_env(lua_State *L, int idx) {
  size_t n = 0, k = 0, i;
  char **envp;
  int strs;
  if (lua_isnil(L, idx)) return environ;
  lua_pushnil(L);
  while (lua_next(L, idx)) { /* check them, and count */
    size_t len;
    const char *name;
    if (lua_type(L, -2) != LUA_TSTRING) /* (before a tolstring: lua_next) */
      luaL_argerror(L, 4, "env: a name is not a string");
    name = lua_tolstring(L, -2, &len);
    if (len == 0 || strlen(name) != len || strchr(name, '='))
      luaL_argerror(L, 4, "env: a name is empty, or holds '=' or NUL");
    if (!(lua_type(L, -1) == LUA_TSTRING && strlen(lua_tostring(L, -1)) ==
          zkl_rawlen(L, -1)) &&
        !(lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1)))
      luaL_argerror(L, 4, lua_pushfstring(L, "env.%s: a string without NUL "
                    "or false expected", name));
    n++;
    lua_pop(L, 1);
  }
  for (i = 0; environ[i]; i++) n++;
  envp = (char **)lua_newuserdata(L, sizeof(char *) * (n + 1));
  lua_newtable(L);
  strs = lua_gettop(L);
  for (i = 0; environ[i]; i++) {
    const char *eq = strchr(environ[i], '=');
    if (eq) { /* (an entry without '=': kept as it is) */
      lua_pushlstring(L, environ[i], (size_t)(eq - environ[i]));
      lua_rawget(L, idx);
      if (!lua_isnil(L, -1)) { lua_pop(L, 1); continue; }
      lua_pop(L, 1);
    }
    envp[k++] = environ[i];
  }
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -1) == LUA_TSTRING) {
      const char *s = lua_pushfstring(L, "%s=%s", lua_tostring(L, -2),
                                      lua_tostring(L, -1));
      envp[k++] = (char *)s;
      lua_rawseti(L, strs, (int)k);
    }
    lua_pop(L, 1);
  }
  envp[k] = NULL;
  return envp;
}

static int lproc_spawn(lua_State *L) {
  int n, i, rc, own_group;
  const char **argv;
  char **envp;
  spawn_box *box;
  pid_t pid;
  char *file = NULL;
  luaL_checktype(L, 1, LUA_TTABLE);
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  own_group = lua_toboolean(L, 3);
  if (!lua_isnoneornil(L, 4)) luaL_checktype(L, 4, LUA_TTABLE);
  lua_settop(L, 4); /* (2: `keep` or nil, 4: `env` or nil, from here on) */
  envp = child_env(L, 4);
  n = (int)zkl_rawlen(L, 1);
  luaL_argcheck(L, n >= 1 && n <= ZKL_MAX_ARGS, 1,
                "argv must hold 1 to 65536 strings");
  argv = (const char **)lua_newuserdata(L, sizeof(char *) * ((size_t)n + 1));
  for (i = 1; i <= n; i++) { /* the strings stay in the table: anchored */
    size_t len;
    lua_rawgeti(L, 1, i);
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_argerror(L, 1, lua_pushfstring(L, "argv[%d] is not a string", i));
    argv[i - 1] = lua_tolstring(L, -1, &len);
    if (strlen(argv[i - 1]) != len)
      luaL_argerror(L, 1, lua_pushfstring(L, "argv[%d] contains a NUL "
                    "byte", i));
    lua_pop(L, 1);
  }
  argv[n] = NULL;
  luaL_argcheck(L, argv[0][0] != '\0', 1, "argv[1] (the command) is empty");
  box = (spawn_box *)lua_newuserdata(L, sizeof *box);
  box->fa_ready = box->attr_ready = 0;
  lua_newtable(L);
  lua_pushcfunction(L, spawn_box_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  if (posix_spawn_file_actions_init(&box->fa) != 0)
    return luaL_error(L, "out of memory");
  box->fa_ready = 1;
  if (posix_spawnattr_init(&box->attr) != 0)
    return luaL_error(L, "out of memory");
  box->attr_ready = 1;
  if (own_group &&
      ((rc = posix_spawnattr_setflags(&box->attr, POSIX_SPAWN_SETPGROUP)) != 0
       || (rc = posix_spawnattr_setpgroup(&box->attr, 0)) != 0))
    return luaL_error(L, "posix_spawnattr: %s", strerror(rc));
  close_all_but(L, 2, &box->fa);
  rc = find_command(argv[0], &file);
  if (rc == 0) {
    rc = posix_spawn(&pid, file, &box->fa, &box->attr, (char *const *)argv,
                     envp);
    free(file);
  }
  spawn_box_free(box);
  if (rc == 0) {
    /* (as shells do: the group exists when we return, even where the
     * child runs on before it made it (valgrind's clone); EACCES: the
     * child has exec'd, so it made it) */
    if (own_group) setpgid(pid, pid);
    lua_pushinteger(L, (lua_Integer)pid);
    return 1;
  }
  lua_pushnil(L);
  lua_pushfstring(L, "%s: %s", argv[0], strerror(rc));
  lua_pushstring(L, rc == ENOENT || rc == ENOTDIR ? "not_found"
                 : rc == EACCES || rc == ENOEXEC || rc == EPERM ||
                   rc == EISDIR ? "not_executable" : "spawn_failed");
  return 3;
}

static int lproc_wait(lua_State *L) {
  pid_t pid = check_pid(L, 1), r;
  int nohang = lua_toboolean(L, 2), status = 0;
  do {
    r = waitpid(pid, &status, nohang ? WNOHANG : 0);
  } while (r < 0 && errno == EINTR);
  if (r < 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "waitpid %d: %s", (int)pid, strerror(errno));
    return 2;
  }
  if (r == 0) {
    lua_pushliteral(L, "running");
    return 1;
  }
  if (WIFEXITED(status)) {
    lua_pushliteral(L, "exited");
    lua_pushinteger(L, WEXITSTATUS(status));
    return 2;
  }
  if (WIFSIGNALED(status)) {
    const char *name = signal_name(WTERMSIG(status));
    lua_pushliteral(L, "signaled");
    lua_pushinteger(L, WTERMSIG(status));
    if (name) lua_pushstring(L, name);
    else lua_pushfstring(L, "%d", WTERMSIG(status));
    return 3;
  }
  lua_pushliteral(L, "running"); /* (stopped or continued: not asked for) */
  return 1;
}

static int lproc_kill(lua_State *L) {
  pid_t pid = check_pid(L, 1);
  int i = check_signal(L, 2);
  if (kill(pid, signals[i].num) != 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "kill %d: %s", (int)pid, strerror(errno));
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* core.killpg(pgid, name): the signal to every process of group pgid */
static int lproc_killpg(lua_State *L) {
  pid_t pgid = check_pid(L, 1);
  int i = check_signal(L, 2);
  if (killpg(pgid, signals[i].num) != 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "kill process group %d: %s", (int)pgid,
                    strerror(errno));
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* core.group_alive(pgid): whether a process of group pgid still runs (one
 * we may not signal counts).  It first reaps the group's processes that
 * are our children and have ended: orphans of the group become ours when
 * we are a subreaper or init (a container's pid 1), and a zombie would
 * keep the group alive for ever.  So reap the group's leader (core.wait)
 * before asking, or its status is lost here.  (Once the leader is reaped,
 * its pid still names only its group: Linux hands out no pid that is in
 * use as a process group's id.) */
static int lproc_group_alive(lua_State *L) {
  pid_t pgid = check_pid(L, 1), r;
  int status;
  do {
    r = waitpid(-pgid, &status, WNOHANG);
  } while (r > 0 || (r < 0 && errno == EINTR));
  lua_pushboolean(L, killpg(pgid, 0) == 0 || errno == EPERM);
  return 1;
}

static int lproc_signum(lua_State *L) {
  int i = signal_index(luaL_checkstring(L, 1));
  if (i < 0) lua_pushnil(L);
  else lua_pushinteger(L, signals[i].num);
  return 1;
}

/* Signals the tool itself received: the handler only counts (a counter per
 * signal, read by the Lua thread, never reset by the handler), so a signal
 * arriving while core.caught() reads is told next time, not lost. */
static volatile sig_atomic_t received[NSIG];
static sig_atomic_t told[NSIG];

static void on_signal(int signo) {
  if (signo > 0 && signo < NSIG) received[signo]++;
}

static int lproc_catch_signals(lua_State *L) {
  int n, i;
  luaL_checktype(L, 1, LUA_TTABLE);
  n = (int)zkl_rawlen(L, 1);
  for (i = 1; i <= n; i++) { /* check them all before installing any */
    const char *name;
    int k;
    lua_rawgeti(L, 1, i);
    name = lua_tostring(L, -1);
    if (lua_type(L, -1) != LUA_TSTRING || (k = signal_index(name)) < 0 ||
        !signals[k].catchable)
      luaL_argerror(L, 1, lua_pushfstring(L, "element %d is not a signal "
                    "name that can be caught (HUP, INT, QUIT, USR1, USR2, "
                    "ALRM, TERM)", i));
    lua_pop(L, 1);
  }
  for (i = 1; i <= n; i++) {
    struct sigaction sa;
    int k;
    lua_rawgeti(L, 1, i);
    k = signal_index(lua_tostring(L, -1));
    lua_pop(L, 1);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(signals[k].num, &sa, NULL) != 0)
      return luaL_error(L, "sigaction %s: %s", signals[k].name,
                        strerror(errno));
  }
  return 0;
}

static int lproc_caught(lua_State *L) {
  int i, n = 0;
  lua_newtable(L);
  for (i = 0; signals[i].name; i++) {
    int s = signals[i].num;
    sig_atomic_t now = received[s];
    if (now == told[s]) continue;
    told[s] = now;
    lua_pushstring(L, signals[i].name);
    lua_rawseti(L, -2, ++n);
  }
  return 1;
}

/* core.mtime(path): the modification time of the file at path (stat:
 * a symbolic link followed), as seconds and nanoseconds; for `zklock run
 * --heartbeat`, which compares the two with the last ones it saw. */
static int lproc_mtime(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  struct stat st;
  if (stat(path, &st) != 0) {
    int e = errno;
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", path, strerror(e));
    lua_pushstring(L, e == ENOENT || e == ENOTDIR ? "not_found" : "failed");
    return 3;
  }
  lua_pushinteger(L, (lua_Integer)st.st_mtim.tv_sec);
  lua_pushinteger(L, (lua_Integer)st.st_mtim.tv_nsec);
  return 2;
}

void zkl_open_proc(lua_State *L) {
  static const luaL_Reg funcs[] = {
    { "open_fds", lproc_open_fds },
    { "spawn", lproc_spawn },
    { "wait", lproc_wait },
    { "kill", lproc_kill },
    { "killpg", lproc_killpg },
    { "group_alive", lproc_group_alive },
    { "signum", lproc_signum },
    { "catch_signals", lproc_catch_signals },
    { "caught", lproc_caught },
    { "mtime", lproc_mtime },
    { NULL, NULL }
  };
  luaL_setfuncs(L, funcs, 0);
}
