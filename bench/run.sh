#!/bin/sh
# make bench: figures per ../shared/BENCH.md, one fresh server, one run.
set -e
cd "$(dirname "$0")/.."
make -s build/floor
run=$(mktemp -d /tmp/zklock-bench.XXXXXX)
trap 'pkill -f "$run" 2>/dev/null || true; rm -rf "$run"' EXIT INT TERM
export ZKLOCK_TEST_TMP="$run"
export LUA_PATH="./lua/?.lua;./lua/?/init.lua;;"
export LUA_CPATH="./build/lua5.4/?.so;;"
ZKLOCK_LUA=lua5.4 lua5.4 bench/run.lua
