#!/bin/sh
# Install the Debian packages given as arguments that are missing, and only
# those.  Not root: print the exact apt-get line and fail.
missing=""
for p in "$@"; do
  s=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
  case "$s" in *"install ok installed"*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ] && exit 0
line="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y$missing"
if [ "$(id -u)" != 0 ]; then
  echo "zklock needs Debian packages that are missing. As root, run:" >&2
  echo "  $line" >&2
  exit 1
fi
echo "installing:$missing"
apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq$missing >/dev/null
