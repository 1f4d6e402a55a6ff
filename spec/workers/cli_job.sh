#!/bin/sh
# A command for `zklock run` (spec/cli_spec.lua):
#   cli_job.sh LOG NAME RELEASE STATUS [MODE]
# Appends "NAME start" to LOG, waits (bounded: 1200 naps of 50 ms) for the
# file RELEASE to exist, appends "NAME end" and exits with STATUS; "NAME
# gave-up" and 99 when RELEASE never came.  On SIGTERM, SIGINT or SIGHUP it
# appends "NAME TERM" (INT, HUP) and exits 128+N; MODE "stubborn" logs
# them and goes on; MODE "selfkill" ends itself with SIGKILL at once.
# Two modes leave the job to a child in the shell's process group: MODE
# "group" runs it "stubborn" in the background while this shell (the
# group's leader) waits and dies of the first TERM, INT or HUP (no trap);
# MODE "leave" runs it in the background and exits with STATUS at once.
log=$1 name=$2 release=$3 status=$4 mode=${5:-}
case $mode in
  group) sh "$0" "$log" "$name" "$release" "$status" stubborn & wait; exit $? ;;
  leave) sh "$0" "$log" "$name" "$release" "$status" & exit "$status" ;;
esac
on() { # on SIGNAME STATUS
  echo "$name $1" >>"$log"
  [ "$mode" = stubborn ] || exit "$2"
}
trap 'on TERM 143' TERM
trap 'on INT 130' INT
trap 'on HUP 129' HUP
echo "$name start" >>"$log"
[ "$mode" = selfkill ] && kill -KILL $$
n=0
while [ ! -e "$release" ]; do
  n=$((n + 1))
  if [ $n -gt 1200 ]; then
    echo "$name gave-up" >>"$log"
    exit 99
  fi
  sleep 0.05
done
echo "$name end" >>"$log"
exit "$status"
