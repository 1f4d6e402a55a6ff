#!/bin/sh
# make torture: the long torture run, then the broken-lock proof, under
# Lua 5.4, inside one run directory (spec/in_rundir.sh).
cd "$(dirname "$0")/.." || exit 1
exec sh spec/in_rundir.sh torture sh -c '
  rc=0
  lua5.4 spec/torture.lua "$1" || rc=1
  lua5.4 spec/torture.lua broken || rc=1
  exit $rc' sh "${1:-full}"
