#!/bin/sh
# make asan: the Lua 5.4 specs with the module built under AddressSanitizer
# (build/asan), the interpreter preloading libasan.  Leaks are make
# memcheck's job: LeakSanitizer hangs the specs' pkill children here.
set -u
cd "$(dirname "$0")/.." || exit 1
RUN=$(mktemp -d /tmp/zklock-asan.XXXXXX) || exit 1
trap 'pkill -KILL -f "$RUN" 2>/dev/null; rm -rf "$RUN"' EXIT INT TERM
export ZKLOCK_TEST_TMP="$RUN" ZKLOCK_LUA=lua5.4
export ZKLOCK_CPATH="./build/asan/?.so"
SPECS=${*:-spec/names_spec.lua spec/client_spec.lua spec/mutex_spec.lua spec/badinput_spec.lua spec/faults_spec.lua spec/herd_spec.lua spec/lost_spec.lua spec/proxy_spec.lua}
# shellcheck disable=SC2086
LD_PRELOAD=$(cc -print-file-name=libasan.so) \
ASAN_OPTIONS=exitcode=43:detect_leaks=0 \
  lua5.4 "$(command -v busted)" --ignore-lua --exclude-tags=fork $SPECS
rc=$?
[ $rc -eq 0 ] && echo "asan: clean" || echo "asan: FAILED (status $rc)"
exit $rc
