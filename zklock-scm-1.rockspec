rockspec_format = "3.0"
package = "zklock"
version = "scm-1"
source = {
  url = "git+file:///work/main",
}
description = {
  summary = "ZooKeeper locks, barriers and double barriers, carried out in C",
  detailed = [[
Curator-compatible ZooKeeper recipes for Lua 5.4 and LuaJIT: reentrant
mutex, herd-free waiting, fencing tokens, garbage-collected release,
zklock.testing to run real ZooKeeper servers from specs, and the zklock
command (a distributed flock(1) for cron jobs and deploy scripts).
]],
  license = "MIT",
}
dependencies = {
  "lua >= 5.1",
}
external_dependencies = {
  ZOOKEEPER = {
    header = "zookeeper/zookeeper.h",
    library = "zookeeper_mt",
  },
}
build = {
  type = "builtin",
  modules = {
    ["zklock"] = "lua/zklock/init.lua",
    ["zklock.runtime"] = "lua/zklock/runtime.lua",
    ["zklock.lock"] = "lua/zklock/lock.lua",
    ["zklock.semaphore"] = "lua/zklock/semaphore.lua",
    ["zklock.multilock"] = "lua/zklock/multilock.lua",
    ["zklock.barrier"] = "lua/zklock/barrier.lua",
    ["zklock.election"] = "lua/zklock/election.lua",
    ["zklock.testing"] = "lua/zklock/testing.lua",
    ["zklock.ngx"] = "lua/zklock/ngx.lua",
    ["zklock.core"] = {
      sources = {
        "src/core/acl.c", "src/core/barrier.c", "src/core/dbarrier.c",
        "src/core/errors.c", "src/core/holders.c", "src/core/liveness.c",
        "src/core/lock.c", "src/core/lockapi.c", "src/core/locksession.c",
        "src/core/names.c", "src/core/notify.c", "src/core/oneshot.c",
        "src/core/op.c", "src/core/session.c", "src/core/task.c",
        "src/core/util.c", "src/core/write.c", "src/lua/lcheck.c",
        "src/lua/lclient.c", "src/lua/lcore.c", "src/lua/llock.c",
        "src/lua/lnames.c", "src/lua/lop.c", "src/lua/lproc.c",
        "src/lua/lutil.c",
      },
      defines = { "THREADED", "_GNU_SOURCE" },
      incdirs = { "$(ZOOKEEPER_INCDIR)" },
      libdirs = { "$(ZOOKEEPER_LIBDIR)" },
      libraries = { "zookeeper_mt", "pthread" },
    },
    -- test equipment for zklock.testing, apart from the product
    ["zklock.testing.core"] = {
      sources = {
        "src/testing/ltesting.c", "src/testing/netutil.c",
        "src/testing/proxy.c", "src/core/util.c", "src/core/errors.c",
        "src/lua/lutil.c",
      },
      defines = { "THREADED", "_GNU_SOURCE" },
      incdirs = { "$(ZOOKEEPER_INCDIR)" },
      libdirs = { "$(ZOOKEEPER_LIBDIR)" },
      libraries = { "zookeeper_mt", "pthread" },
    },
  },
  -- the command-line tool (docs/cli.md); LuaRocks wraps it so that it runs
  -- with the interpreter and paths of the tree it is installed in
  install = {
    bin = { zklock = "bin/zklock" },
  },
}
test = {
  type = "command",
  command = "make test",
}
