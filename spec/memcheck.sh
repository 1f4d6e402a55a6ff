#!/bin/sh
# make memcheck: the Lua 5.4 suite under valgrind (the Makefile names the
# spec files, and why any is left out).  Passes with zero errors
# and no definite leaks.  The fork spec is left out (valgrind hangs in a
# forked child of a threaded process), and the busythread one (valgrind
# runs one thread at a time: a thread that never blocks stalls each spawn
# for seconds, past the spec's bounds).  Specs that spawn workers still run;
# the workers themselves are not under valgrind.
set -u
cd "$(dirname "$0")/.." || exit 1
RUN=$(mktemp -d /tmp/zklock-vg.XXXXXX) || exit 1
trap 'pkill -KILL -f "$RUN" 2>/dev/null; rm -rf "$RUN"' EXIT INT TERM
export ZKLOCK_TEST_TMP="$RUN" ZKLOCK_LUA=lua5.4
SPECS=${*:-spec}
# shellcheck disable=SC2086
valgrind -q --error-exitcode=42 --leak-check=full --keep-debuginfo=yes \
  --errors-for-leak-kinds=definite --show-leak-kinds=definite \
  --child-silent-after-fork=yes --suppressions=spec/valgrind.supp --log-file="$RUN/vg.log" \
  lua5.4 "$(command -v busted)" --ignore-lua --exclude-tags=fork,busythread $SPECS
rc=$?
cat "$RUN/vg.log"
if [ $rc -eq 42 ] || [ -s "$RUN/vg.log" ]; then
  echo "memcheck: valgrind found errors (above)"
  exit 1
fi
[ $rc -eq 0 ] || { echo "memcheck: specs failed under valgrind"; exit 1; }
echo "memcheck: 0 errors, no definite leaks"
