#!/bin/sh
# make asan: every spec file with the module built under AddressSanitizer,
# libasan preloaded into the spec process, the workers it starts, and
# nginx and its workers.  A Lua 5.4 pass over every spec file with
# build/asan, then a LuaJIT pass with build/asan-luajit for the specs that
# only LuaJIT runs (nginx).  Reports go to files under the run directory
# (a report inside an nginx worker would otherwise go unseen); any report
# fails the run.  Leaks are make memcheck's job: LeakSanitizer hangs the
# specs' pkill children here.  Extra arguments: spec files (Lua 5.4 pass).
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
RUN=$(mktemp -d /tmp/zklock-asan.XXXXXX) || exit 1
cleanup() {
  for pid in $(pgrep -f "nginx.*-p $RUN" 2>/dev/null); do kill -TERM "$pid"; done
  sleep 1
  pkill -KILL -f "$RUN" 2>/dev/null
  rm -rf "$RUN"
}
trap cleanup EXIT INT TERM
export ZKLOCK_TEST_TMP="$RUN"
LIBASAN=$(cc -print-file-name=libasan.so)
export ASAN_OPTIONS="exitcode=43:detect_leaks=0:log_path=$RUN/asan-report"
BUSTED=$(command -v busted)
rc=0

echo "== asan: Lua 5.4, ${*:-every spec file}"
# shellcheck disable=SC2086
ZKLOCK_LUA=lua5.4 ZKLOCK_CPATH="./build/asan/?.so" LD_PRELOAD=$LIBASAN \
  lua5.4 "$BUSTED" --ignore-lua "$@" || rc=1

if [ $# -eq 0 ]; then
  # nginx and its workers load build/asan-luajit with libasan preloaded;
  # the spec process itself drives them over HTTP (curl, ps and procps
  # hang under a preloaded libasan, so it stays plain)
  echo "== asan: LuaJIT, spec/nginx_spec.lua (nginx runs LuaJIT)"
  ZKLOCK_LUA=luajit ZKLOCK_NGX_PRELOAD=$LIBASAN \
  ZKLOCK_NGX_CPATH="$ROOT/build/asan-luajit/?.so" \
    luajit "$BUSTED" --ignore-lua spec/nginx_spec.lua || rc=1
fi

if ls "$RUN"/asan-report* >/dev/null 2>&1; then
  cat "$RUN"/asan-report*
  echo "asan: AddressSanitizer reports (above)"
  exit 1
fi
[ $rc -eq 0 ] && echo "asan: clean" || echo "asan: FAILED (specs failed)"
exit $rc
