rockspec_format = "3.0"
package = "zklock"
version = "scm-1"
-- The project's public repository (docs/compatibility.md, "LuaRocks"); a
-- build from a checkout (`luarocks make`) does not fetch it.
source = {
  url = "git+https://github.com/zklock/zklock.git",
}
description = {
  summary = "ZooKeeper locks, semaphores, barriers and leader election, " ..
    "carried out in C",
  detailed = [[
Curator-compatible ZooKeeper recipes for Lua 5.1-5.4 and LuaJIT, over the
ZooKeeper C client (libzookeeper_mt): reentrant mutex, read/write lock,
semaphores on Curator's InterProcessSemaphoreV2 nodes, multi-lock, barrier,
double barrier, leader latch and leader selector; herd-free waiting,
fencing tokens, garbage-collected release, waits that yield under
OpenResty, zklock.testing to run real ZooKeeper servers from specs, and
the zklock command (a distributed flock for cron jobs).
]],
  homepage = "https://github.com/zklock/zklock",
  issues_url = "https://github.com/zklock/zklock/issues",
  maintainer = "the zklock maintainers",
  license = "MIT",
  labels = {
    "zookeeper", "lock", "mutex", "semaphore", "barrier",
    "leader-election", "distributed", "curator", "openresty",
  },
}
-- Tested: Lua 5.4 and LuaJIT 2.1 (make test), Lua 5.3, 5.2 and PUC Lua 5.1
-- (make test-compat): docs/compatibility.md, "Lua versions".
dependencies = {
  "lua >= 5.1, < 5.5",
}
-- CLOCK_BOOTTIME, accept4: Linux only
supported_platforms = { "linux" }
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
    ["zklock.client"] = "lua/zklock/client.lua",
    ["zklock.rt.check"] = "lua/zklock/rt/check.lua",
    ["zklock.rt.plug"] = "lua/zklock/rt/plug.lua",
    ["zklock.rt.log"] = "lua/zklock/rt/log.lua",
    ["zklock.rt.guard"] = "lua/zklock/rt/guard.lua",
    ["zklock.rt.events"] = "lua/zklock/rt/events.lua",
    ["zklock.rt.wait"] = "lua/zklock/rt/wait.lua",
    ["zklock.rt.op"] = "lua/zklock/rt/op.lua",
    ["zklock.rt.session"] = "lua/zklock/rt/session.lua",
    ["zklock.lock"] = "lua/zklock/lock/init.lua",
    ["zklock.lock.hold"] = "lua/zklock/lock/hold.lua",
    ["zklock.lock.node"] = "lua/zklock/lock/node.lua",
    ["zklock.lock.cohort"] = "lua/zklock/lock/cohort.lua",
    ["zklock.lock.linger"] = "lua/zklock/lock/linger.lua",
    ["zklock.lock.guarded"] = "lua/zklock/lock/guarded.lua",
    ["zklock.lock.extend"] = "lua/zklock/lock/extend.lua",
    ["zklock.lock.downgrade"] = "lua/zklock/lock/downgrade.lua",
    ["zklock.lock.holders"] = "lua/zklock/lock/holders.lua",
    ["zklock.token"] = "lua/zklock/token.lua",
    ["zklock.rwlock"] = "lua/zklock/rwlock.lua",
    ["zklock.semaphore"] = "lua/zklock/semaphore.lua",
    ["zklock.multilock"] = "lua/zklock/multilock.lua",
    ["zklock.barrier"] = "lua/zklock/barrier.lua",
    ["zklock.copas"] = "lua/zklock/copas.lua",
    ["zklock.cqueues"] = "lua/zklock/cqueues.lua",
    ["zklock.election"] = "lua/zklock/election.lua",
    ["zklock.metrics"] = "lua/zklock/metrics.lua",
    ["zklock.testing"] = "lua/zklock/testing.lua",
    ["zklock.testing.process"] = "lua/zklock/testing/process.lua",
    ["zklock.testing.secure"] = "lua/zklock/testing/secure.lua",
    ["zklock.testing.server"] = "lua/zklock/testing/server.lua",
    ["zklock.testing.cluster"] = "lua/zklock/testing/cluster.lua",
    ["zklock.testing.partition"] = "lua/zklock/testing/partition.lua",
    ["zklock.loop"] = "lua/zklock/loop.lua",
    ["zklock.luv"] = "lua/zklock/luv.lua",
    ["zklock.ngx"] = "lua/zklock/ngx.lua",
    ["zklock.ngxmetrics"] = "lua/zklock/ngxmetrics.lua",
    -- the command-line tool's parts (bin/zklock requires them)
    ["zklock.cli.options"] = "lua/zklock/cli/options.lua",
    ["zklock.cli.session"] = "lua/zklock/cli/session.lua",
    ["zklock.cli.run"] = "lua/zklock/cli/run.lua",
    ["zklock.core"] = {
      sources = {
        "src/core/base/acl.c", "src/core/base/ensemble.c",
        "src/core/base/errors.c",
        "src/core/base/log.c", "src/core/base/names.c",
        "src/core/base/paths.c", "src/core/base/util.c",
        "src/core/base/zkcshim.c",
        "src/core/session/client.c", "src/core/session/follow.c",
        "src/core/session/liveness.c",
        "src/core/session/notify.c", "src/core/session/probe.c",
        "src/core/session/secure.c", "src/core/session/session.c",
        "src/core/session/task.c",
        "src/core/lock/api.c", "src/core/lock/class.c",
        "src/core/lock/guard.c", "src/core/lock/machine.c",
        "src/core/lock/node.c", "src/core/lock/rehold.c",
        "src/core/ops/barrier.c", "src/core/ops/dbarrier.c",
        "src/core/ops/holders.c", "src/core/ops/oneshot.c",
        "src/core/ops/op.c", "src/core/ops/signal.c",
        "src/core/ops/write.c",
        "src/lua/lattempt.c", "src/lua/lcheck.c", "src/lua/lclient.c",
        "src/lua/lcore.c", "src/lua/lnames.c", "src/lua/lop.c",
        "src/lua/lproc.c", "src/lua/lutil.c",
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
        "src/testing/proxy.c", "src/testing/churn.c",
        "src/testing/reconfig.c",
        "src/core/base/util.c", "src/core/base/errors.c",
        "src/core/base/zkcshim.c", "src/lua/lutil.c",
      },
      defines = { "THREADED", "_GNU_SOURCE" },
      incdirs = { "$(ZOOKEEPER_INCDIR)" },
      libdirs = { "$(ZOOKEEPER_LIBDIR)" },
      libraries = { "zookeeper_mt", "pthread" },
    },
  },
  -- the command-line tool (docs/cli.md), over the modules zklock.cli.*;
  -- LuaRocks wraps it so that it runs with the interpreter and paths of
  -- the tree it is installed in
  install = {
    bin = { zklock = "bin/zklock" },
  },
}
-- busted comes from Debian (lua-busted, which `make test` installs with the
-- other packages it needs), not from a rocks server: no test_dependencies,
-- so `luarocks test` runs offline.  `make test` builds the module for Lua
-- 5.4 and LuaJIT and runs every spec on both (docs/testing.md).
test = {
  type = "command",
  command = "make test",
}
