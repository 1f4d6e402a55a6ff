#!/bin/sh
# make chaos / make soak: one chaos run (spec/chaos/run.lua PROFILE [SEED
# [only=COMPOSITION|none]]) under Lua 5.4 (its workers run both runtimes).
# Everything started lives under one run directory and is killed on exit.
set -u
cd "$(dirname "$0")/.." || exit 1
RUN=$(mktemp -d /tmp/zklock-chaos.XXXXXX) || exit 1
export ZKLOCK_TEST_TMP="$RUN"
cleanup() {
  trap - EXIT INT TERM HUP
  n=0
  while pkill -KILL -f "$RUN" 2>/dev/null && [ $n -lt 50 ]; do
    n=$((n + 1)); sleep 0.1
  done
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
export LUA_PATH='./lua/?.lua;./lua/?/init.lua;./?.lua;;'
export LUA_CPATH='./build/lua5.4/?.so'
lua5.4 spec/chaos/run.lua "$@"
