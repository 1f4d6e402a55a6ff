#!/bin/sh
# spec/in_rundir.sh TAG COMMAND [ARGS...]: runs COMMAND from the project
# root with the Lua 5.4 paths of the tree, every server and worker it
# starts living under one run directory (/tmp/zklock-TAG.XXXXXX, exported
# as ZKLOCK_TEST_TMP); on exit, even on Ctrl-C, whatever still runs with
# that directory on its command line is killed and the directory removed.
# make torture, make chaos and make soak run through it.
set -u
cd "$(dirname "$0")/.." || exit 1
tag=$1
shift
RUN=$(mktemp -d "/tmp/zklock-$tag.XXXXXX") || exit 1
export ZKLOCK_TEST_TMP="$RUN"
cleanup() {
  trap - EXIT INT TERM HUP
  # nginx masters first, politely: SIGKILL would orphan their workers (whose
  # command lines do not name $RUN: the chaos run's, spec/chaos/run_ngx.lua)
  n=0
  for pid in $(pgrep -f "nginx.*-p $RUN" 2>/dev/null); do kill -TERM "$pid"; done
  while pgrep -f "nginx.*-p $RUN" >/dev/null 2>&1 && [ $n -lt 50 ]; do
    n=$((n + 1))
    sleep 0.1
  done
  n=0
  while pkill -KILL -f "$RUN" 2>/dev/null && [ $n -lt 50 ]; do
    n=$((n + 1)); sleep 0.1
  done
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
export LUA_PATH='./lua/?.lua;./lua/?/init.lua;./?.lua;;'
export LUA_CPATH='./build/lua5.4/?.so'
"$@"
