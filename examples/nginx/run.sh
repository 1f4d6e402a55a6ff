#!/bin/sh
# The stock counter as a web service (docs/openresty.md, "The example
# service"): nginx.conf beside this script filled in and served by nginx
# in the foreground, until Ctrl-C (or SIGTERM, SIGQUIT).
#
#   examples/nginx/run.sh [HOSTS [PORT]]
#
# HOSTS: the ZooKeeper connect string (default $ZK_HOSTS, else
# 127.0.0.1:2181, the server of `make zk`); PORT: where nginx listens on
# 127.0.0.1 (default $PORT, else 8080).  WORKERS (2): worker processes;
# NGINX_PREFIX: nginx's directory (default build/nginx; conf/nginx.conf
# and logs/ go there).  ZK_TLS_CA, ZK_TLS_CERT and ZK_TLS_KEY pass through
# to the workers for a TLS ZooKeeper (docs/security.md).  Needs `make`
# (build/luajit) and nginx-light with libnginx-mod-http-lua (make deps).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
hosts=${1:-${ZK_HOSTS:-127.0.0.1:2181}}
port=${2:-${PORT:-8080}}
prefix=${NGINX_PREFIX:-$root/build/nginx}
nginx=${ZKLOCK_NGINX:-/usr/sbin/nginx}

[ -f "$root/build/luajit/zklock/core.so" ] ||
  { echo "run.sh: no build/luajit/zklock/core.so: run make first" >&2; exit 1; }
[ -x "$nginx" ] || { echo "run.sh: no $nginx: run make deps" >&2; exit 1; }

# as root, the workers run as root too: nginx would make them nobody, who
# may not read the tree
user=""
[ "$(id -u)" = 0 ] && user="user root root;"
sedq() { printf '%s' "$1" | sed 's/[\\&|]/\\&/g'; }
mkdir -p "$prefix/conf/extra" "$prefix/logs"
sed -e "s|__ROOT__|$(sedq "$root")|g" -e "s|__PORT__|$port|g" \
    -e "s|__WORKERS__|${WORKERS:-2}|g" -e "s|__USER__|$user|g" \
    "$here/nginx.conf" >"$prefix/conf/nginx.conf"

echo "stock service on http://127.0.0.1:$port/ (try /reset?n=30, /buy, /stock),"
echo "ZooKeeper $hosts; nginx in $prefix (logs/error.log). Ctrl-C stops it."
ZK_HOSTS=$hosts
export ZK_HOSTS
exec "$nginx" -p "$prefix" -c conf/nginx.conf -g 'daemon off;'
