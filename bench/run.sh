#!/bin/sh
# make bench: figures per docs/performance.md, one fresh server, one run.
set -e
cd "$(dirname "$0")/.."
make -s build/floor build/floor_list
run=$(mktemp -d /tmp/zklock-bench.XXXXXX)
trap 'pkill -f "$run" 2>/dev/null || true; rm -rf "$run"' EXIT INT TERM
export ZKLOCK_TEST_TMP="$run"
export LUA_PATH="./lua/?.lua;./lua/?/init.lua;;"
export LUA_CPATH="./build/lua5.4/?.so;;"
# the peer: Curator's InterProcessMutex, same server, same run
if sh spec/peers/build.sh "$run/peer" >/dev/null; then
  export ZKLOCK_PEER_CP="$(cat "$run/peer/classpath")"
else
  echo "bench: Curator peer not built (make deps installs it); its lines are left out"
fi
ZKLOCK_LUA=lua5.4 lua5.4 bench/run.lua
# event loops: 1,000 coroutines queued on one lock in one process, through
# each adapter and (the peer) polling every 10 ms; copas under LuaJIT
# (Debian's copas is for Lua 5.1/5.2)
# (BENCH_ONLY=w5, make bench-memory: W5 alone; BENCH_ONLY=w1: W1 in
# whole processes and the whole-process check alone)
[ -n "${BENCH_ONLY:-}" ] || ZKLOCK_LUA=lua5.4 lua5.4 bench/loops_run.lua
# W4: nginx + wrk (examples/nginx)
[ -n "${BENCH_ONLY:-}" ] || ZKLOCK_LUA=lua5.4 lua5.4 bench/w4.lua
