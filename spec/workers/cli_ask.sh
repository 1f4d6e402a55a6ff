#!/bin/sh
# A command for `zklock run --max-hold` that asks for more time
# (spec/cli_spec.lua, docs/cli.md "More time"):
#   cli_ask.sh LOG NAME HOW COUNT RELEASE [MODE]
# Appends "NAME start T" to LOG (T: the time, seconds since the epoch),
# then COUNT times: naps 0.5 s, asks, appends "NAME ask I T" (T: taken
# before the ask).  HOW "usr1" asks with SIGUSR1 to $ZKLOCK_PID; any other
# HOW is the heartbeat file it touches.  Then it waits (bounded: 1200 naps
# of 50 ms) for the file RELEASE to exist, appends "NAME end T" and exits
# 0; "NAME gave-up T" and 99 when RELEASE never came.  MODE "until": it
# stops asking once RELEASE exists (COUNT is then a bound).  On SIGTERM it
# appends "NAME TERM T" and exits 143; MODE "late" then asks once more,
# appends "NAME late-ask T" and goes on waiting for RELEASE.
log=$1 name=$2 how=$3 count=$4 release=$5 mode=${6:-}
say() { echo "$name $* $(date +%s.%N)" >>"$log"; }
ask() {
  if [ "$how" = usr1 ]; then kill -USR1 "$ZKLOCK_PID"; else touch "$how"; fi
}
on_term() {
  say TERM
  [ "$mode" = late ] || exit 143
  ask
  say late-ask
}
trap on_term TERM
[ -n "$ZKLOCK_PID" ] || { say no-ZKLOCK_PID; exit 98; }
say start
i=0
while [ $i -lt "$count" ]; do
  [ "$mode" = until ] && [ -e "$release" ] && break
  sleep 0.5
  i=$((i + 1))
  t=$(date +%s.%N)
  ask
  echo "$name ask $i $t" >>"$log"
done
n=0
while [ ! -e "$release" ]; do
  n=$((n + 1))
  if [ $n -gt 1200 ]; then
    say gave-up
    exit 99
  fi
  sleep 0.05
done
say end
exit 0
