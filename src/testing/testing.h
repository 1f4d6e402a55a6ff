/* Test equipment (zklock.testing.core): nothing of it is linked into
 * zklock.core.  Built from src/testing/ with the core's pure helpers
 * (core/base/util.c, core/base/errors.c) and the binding's (lua/lutil.c). */
#ifndef ZKLOCK_TESTING_H
#define ZKLOCK_TESTING_H

#include "../lua/lbind.h"

#pragma GCC visibility push(hidden)

/* netutil.c */
int zkl_free_port(void);
char *zkl_four_letter(const char *host, int port, const char *cmd,
                      double timeout, zkl_error *err);
/* proxy.c */
void zkl_open_proxy(lua_State *L);
/* churn.c */
void zkl_open_churn(lua_State *L);
/* reconfig.c */
void zkl_open_reconfig(lua_State *L);

#pragma GCC visibility pop

#endif
