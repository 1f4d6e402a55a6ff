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
and zklock.testing to run real ZooKeeper servers from specs.
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
    ["zklock.testing"] = "lua/zklock/testing.lua",
    ["zklock.ngx"] = "lua/zklock/ngx.lua",
    ["zklock.core"] = {
      sources = {
        "src/core.c", "src/lclient.c", "src/llock.c", "src/client.c",
        "src/lock.c", "src/op.c", "src/names.c", "src/netutil.c",
        "src/proxy.c",
      },
      defines = { "THREADED", "_GNU_SOURCE" },
      incdirs = { "$(ZOOKEEPER_INCDIR)" },
      libdirs = { "$(ZOOKEEPER_LIBDIR)" },
      libraries = { "zookeeper_mt", "pthread" },
    },
  },
}
test = {
  type = "command",
  command = "make test",
}
