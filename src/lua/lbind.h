/* Shared by the Lua binding files (src/lua/): userdata names, argument
 * checks, error pushing.  The binding holds userdata, checks arguments
 * and pushes results; it calls the core through core/zkl.h only, never
 * takes the client's mutex and never reads a core struct. */
#ifndef ZKLOCK_LBIND_H
#define ZKLOCK_LBIND_H

#include "compat.h"
#include "../core/zkl.h"

#pragma GCC visibility push(hidden)

#define ZKL_CLIENT_MT "zklock.client"
#define ZKL_ATTEMPT_MT "zklock.attempt"
#define ZKL_OP_MT "zklock.op"

/* rfd: the reading end of zk:fd()'s wake-up socket, or -1; it outlives
 * zk:close() (an event loop may still watch it) until the box is freed */
typedef struct { zkl_client *c; int rfd; } zkl_client_box;

zkl_client *zkl_checkclient(lua_State *L, int idx); /* open, same process */
/* A client's objects may not be used in a forked child: the error. */
void zkl_checkfork(lua_State *L, zkl_client *c, const char *what);
int zkl_pusherr(lua_State *L, const zkl_error *e); /* nil, msg, code */
/* A ZooKeeper path at idx (what zkl_path_problem accepts, at most
 * ZKL_PATH_MAX bytes), or the standard argument error. */
const char *zkl_checkpath(lua_State *L, int idx);
/* A connect string at idx (what zkl_hosts_problem accepts), or the
 * standard argument error. */
const char *zkl_checkhosts(lua_State *L, int idx);
/* Data at idx no longer than the client's max_data, or an argument error;
 * opt: nil/none gives def. */
const char *zkl_checkdata(lua_State *L, int idx, const zkl_client *c,
                          size_t *len, int opt, const char *def);
/* An integer at idx within [lo, hi], or an argument error. */
int zkl_checkrange(lua_State *L, int idx, lua_Integer lo, lua_Integer hi,
                   const char *what);
/* The marker family named at idx ("mutex", "lease", "rw", "read",
 * "write"; "all": NULL, every child). */
const char *const *zkl_checkmarkers(lua_State *L, int idx, int *family);
void zkl_setmeta(lua_State *L, const char *name, const luaL_Reg *methods,
                 const luaL_Reg *meta);

void zkl_open_client(lua_State *L); /* add to the module table on top */
void zkl_open_op(lua_State *L);
void zkl_open_attempt(lua_State *L);
void zkl_open_names(lua_State *L);
void zkl_open_check(lua_State *L); /* path_problem, hosts_problem */
void zkl_open_proc(lua_State *L); /* child processes, signals: bin/zklock */

#pragma GCC visibility pop

#endif
