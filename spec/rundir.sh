# Sourced by spec/run.sh and spec/in_rundir.sh, from the project root, with
# the run's tag in $tag: a run directory /tmp/zklock-TAG.XXXXXX, exported as
# ZKLOCK_TEST_TMP, for every server, worker and nginx the run starts; on
# exit (even Ctrl-C) whatever still runs with that directory on its command
# line is killed and the directory removed.
RUN=$(mktemp -d "/tmp/zklock-$tag.XXXXXX") || exit 1
export ZKLOCK_TEST_TMP="$RUN"

cleanup() {
  trap - EXIT INT TERM HUP
  # nginx masters first, politely: SIGKILL would orphan their workers (whose
  # command lines do not name $RUN)
  n=0
  for pid in $(pgrep -f "nginx.*-p $RUN" 2>/dev/null); do kill -TERM "$pid"; done
  while pgrep -f "nginx.*-p $RUN" >/dev/null 2>&1 && [ $n -lt 50 ]; do
    n=$((n + 1))
    sleep 0.1
  done
  n=0
  while pkill -KILL -f "$RUN" 2>/dev/null && [ $n -lt 50 ]; do
    n=$((n + 1))
    sleep 0.1
  done
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
