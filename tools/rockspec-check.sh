#!/bin/sh
# make rockspec-check: `luarocks lint` on every rockspec, then
# spec/rockspec_spec.lua (the versioned rockspec and scm-1 agree, list the
# tree's modules and C sources, and the version is zklock._VERSION) under
# Lua 5.4 and LuaJIT.  Needs the build (make all).
cd "$(dirname "$0")/.." || exit 1
rc=0
for r in zklock-*.rockspec; do
  if luarocks lint "$r"; then echo "luarocks lint $r: clean"
  else echo "luarocks lint $r: FAILED"; rc=1; fi
done
sh spec/run.sh spec/rockspec_spec.lua || rc=1
exit $rc
