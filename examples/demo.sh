#!/bin/sh
# make demo: the stock counter both ways against a ZooKeeper started here.
set -e
cd "$(dirname "$0")/.."
export LUA_PATH="./lua/?.lua;./lua/?/init.lua;;"
export LUA_CPATH="./build/lua5.4/?.so;;"
export ZKLOCK_LUA=lua5.4
run=$(mktemp -d /tmp/zklock-demo.XXXXXX)
trap 'pkill -f "$run" 2>/dev/null || true; rm -rf "$run"' EXIT INT TERM
export ZKLOCK_TEST_TMP="$run" TMPDIR="$run"
echo "Starting a throwaway ZooKeeper on 127.0.0.1 ..."
lua5.4 examples/with_server.lua '
  echo "10 processes race to buy from a stock of 30 (100 attempts):"
  lua5.4 examples/stock.lua $ZK_HOSTS nolock 10 100 &&
  lua5.4 examples/stock.lua $ZK_HOSTS lock 10 100 &&
  echo &&
  echo "30 processes take order numbers under one mutex:" &&
  lua5.4 examples/order_numbers.lua $ZK_HOSTS 30 5'
echo "ZooKeeper stopped and removed."
echo
echo "The stock counter as a web service: two nginx instances x 2 workers"
echo "(examples/nginx), each request its own lock owner:"
lua5.4 examples/nginx/demo.lua
