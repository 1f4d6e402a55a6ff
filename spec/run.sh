#!/bin/sh
# Runs the busted specs under Lua 5.4 and LuaJIT, side by side (or the interpreters
# named in ZKLOCK_RUNTIMES, e.g. "lua5.3 lua5.1": make test-compat; each
# needs its build/<interpreter> module), against real ZooKeeper
# servers started by zklock.testing, and ends with exactly one line
# "N passed, N failed, N pending" (failed = failures + errors over both
# runtimes; pending: known bugs still open, counted so they show).
# Extra arguments go to busted:
#   sh spec/run.sh spec/testing_spec.lua --filter=pause
# Every server lives in one run directory; on exit (even Ctrl-C) whatever
# still runs with that directory on its command line is killed and the
# directory removed.
set -u
cd "$(dirname "$0")/.." || exit 1

BUSTED=$(command -v busted) || { echo "run.sh: busted not found" >&2; exit 1; }
tag=run
. spec/rundir.sh

ESC=$(printf '\033')
PASSED=0
FAILED=0
PENDING=0
LINES=""

# run_one INTERPRETER [busted args...]
# This is `busted --lua=INTERPRETER`, done directly: busted's own switch
# re-runs it through a shell without quoting the arguments. .busted picks
# the build/<interpreter> cpath.
busted_one() { # busted_one INTERPRETER [busted args...]: output to its file
  lua=$1
  shift
  { ZKLOCK_LUA=$lua "$lua" "$BUSTED" --ignore-lua "$@"
    echo $? >"$RUN/busted-$lua.rc"; } >"$RUN/busted-$lua.out" 2>&1
}
run_one() {
  lua=$1 label=$1
  shift
  out="$RUN/busted-$label.out"
  echo "== busted under $label"
  if [ -n "${PARALLEL_DONE:-}" ]; then
    cat "$out" # (run already, beside the other runtimes)
  else
    { ZKLOCK_LUA=$lua "$lua" "$BUSTED" --ignore-lua "$@"
      echo $? >"$RUN/busted-$label.rc"; } 2>&1 | tee "$out"
  fi
  rc=$(cat "$RUN/busted-$label.rc" 2>/dev/null || echo 1)
  # "N successes / N failures / N errors / N pending : T seconds"
  counts=$(sed "s/$ESC\[[0-9;]*m//g" "$out" | awk '
    $2 ~ /^succ/ && $5 ~ /^fail/ && $8 ~ /^err/ && $11 == "pending" &&
    $1 $4 $7 $10 ~ /^[0-9]+$/ { line = $1 " " $4 " " $7 " " $10 }
    END { print line }')
  if [ -n "$counts" ]; then
    set -- $counts
    ok=$1 bad=$(($2 + $3)) pend=$4
    line="$label: $1 successes / $2 failures / $3 errors / $4 pending"
    if [ "$bad" -eq 0 ] && [ "$rc" -ne 0 ]; then
      bad=1
      line="$line (busted exited with status $rc)"
    fi
  else
    ok=0 bad=1 pend=0
    line="$label: no busted summary (status $rc): counted as 1 failed"
  fi
  if [ "$bad" -gt 0 ]; then
    # (the failures' headings again, beside the summary: CI keeps only the
    # end of the output, where the other runtime's report would hide them)
    line="$line
$(sed "s/$ESC\[[0-9;]*m//g" "$out" | awk '
      /^(Failure|Error) / { n++; if (n <= 4) { left = 3 } }
      left > 0 { print "    " substr($0, 1, 240); left-- }')"
  fi
  PASSED=$((PASSED + ok))
  FAILED=$((FAILED + bad))
  PENDING=$((PENDING + pend))
  LINES="$LINES$line
"
}

# The runtimes run side by side (their servers and run files are apart:
# each spec names its own), their outputs shown after: most of a spec's
# time is waiting on servers, so two runs take little more than one
# (issue 33: make test went past 10 minutes one after the other).
# ZKLOCK_PARALLEL=0: one after the other, output as it comes.
if [ "${ZKLOCK_PARALLEL:-1}" = 1 ]; then
  for lua in ${ZKLOCK_RUNTIMES:-lua5.4 luajit}; do
    busted_one "$lua" "$@" &
  done
  wait
  PARALLEL_DONE=1
fi
for lua in ${ZKLOCK_RUNTIMES:-lua5.4 luajit}; do
  run_one "$lua" "$@"
done

echo
printf '%s' "$LINES"
echo "$PASSED passed, $FAILED failed, $PENDING pending"
[ "$FAILED" -eq 0 ]
