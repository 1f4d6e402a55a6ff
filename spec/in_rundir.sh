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
. spec/rundir.sh
export LUA_PATH='./lua/?.lua;./lua/?/init.lua;./?.lua;;'
export LUA_CPATH='./build/lua5.4/?.so'
"$@"
