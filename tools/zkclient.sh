#!/bin/sh
# Build a TLS- and SASL-capable ZooKeeper C client from Debian's own source
# package into DEST (default build/zkc): DEST/lib/libzookeeper.a and
# libhashtable.a (static, position-independent), DEST/include/zookeeper
# (the source's headers and the generated jute header).  docs/security.md, "The TLS build".
#
# The source comes from a private apt configuration (one deb-src stanza,
# lists and cache under DEST/apt): the system's apt set-up is not touched.
# It is the version of the installed `zookeeper` package, so that the C
# client and the server beside it are one release.  Four patches of
# ours are applied: tools/zkclient-tls-handshake.patch (the TLS handshake
# bounded by the session timeout, and ended by zookeeper_close),
# tools/zkclient-io-completions.patch (a zookeeper_init flag that runs
# completions on the IO thread, and zoo_zklock_batch, requests that wake
# it once: docs/design.md, section 2.1) and tools/zkclient-follow.patch
# (zoo_zklock_set_servers: a new server list applied on the IO thread,
# a move ending the connection as a lost one: section 18) and
# tools/zkclient-tls-peer.patch (the server's certificate checked against
# the host dialled, and TLS without a client certificate: docs/
# security.md, "TLS").  Nothing is done
# when DEST/stamp names that version and patch level already.
#
# Needs (make deps installs them): dpkg-dev, cmake, libssl-dev,
# libsasl2-dev, the JDK and libzookeeper-java (its jar has the jute
# compiler that writes the client's generated sources).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PATCHES="zkclient-tls-handshake.patch zkclient-io-completions.patch
  zkclient-follow.patch zkclient-tls-peer.patch"
DEST=${1:-build/zkc}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
ver=$(dpkg-query -W -f='${Version}' zookeeper 2>/dev/null || true)
if [ -z "$ver" ]; then
  echo "zkclient.sh: the zookeeper package is not installed (make deps)" >&2
  exit 1
fi
# (the patches' checksum too: a patch changed is a client to build again)
sum=$(for p in $PATCHES; do cat "$HERE/$p"; done | cksum | cut -d' ' -f1)
stamp="$ver zklock-patches:$PATCHES $sum"
if [ -f "$DEST/stamp" ] && [ "$(cat "$DEST/stamp")" = "$stamp" ] &&
   [ -f "$DEST/lib/libzookeeper.a" ]; then
  exit 0
fi
echo "building the TLS/SASL ZooKeeper C client $ver into $DEST"

apt="$DEST/apt"
rm -rf "$apt" "$DEST/src" "$DEST/cmake" "$DEST/lib" "$DEST/include"
mkdir -p "$apt/parts" "$apt/lists/partial" "$apt/cache/archives/partial"
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
cat >"$apt/parts/zklock-src.sources" <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename $codename-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: $codename-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
set -- -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt/parts" \
       -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" \
       -o APT::Sandbox::User=root
apt-get "$@" -qq update
(cd "$apt" && apt-get "$@" -qq source --download-only "zookeeper=$ver" >/dev/null)
dsc=$(ls "$apt"/zookeeper_*.dsc)
# (the .dsc's signature is checked by apt against the signed Sources list
# that named its checksums; dpkg-source has no keyring for it)
dpkg-source -q --no-check -x "$dsc" "$DEST/src" >"$DEST/unpack.log" 2>&1 || {
  tail -20 "$DEST/unpack.log" >&2; exit 1; }
for p in $PATCHES; do
  patch -s -d "$DEST/src" -p1 <"$HERE/$p" >>"$DEST/unpack.log" 2>&1 || {
    echo "zkclient.sh: $p does not apply to $ver" >&2
    tail -20 "$DEST/unpack.log" >&2; exit 1; }
done

c="$DEST/src/zookeeper-client/zookeeper-client-c"
# the generated jute sources are not in the tree: the jar's compiler
mkdir -p "$c/generated"
(cd "$c/generated" &&
 java -cp /usr/share/java/zookeeper-jute.jar \
   org.apache.jute.compiler.generated.Rcc -l c \
   "$DEST/src/zookeeper-jute/src/main/resources/zookeeper.jute" >/dev/null)

cmake -S "$c" -B "$DEST/cmake" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DWITH_OPENSSL=ON \
  -DWITH_CYRUS_SASL=ON -DWANT_CPPUNIT=OFF >"$DEST/cmake.log" 2>&1 || {
  tail -30 "$DEST/cmake.log" >&2; exit 1; }
grep -q 'OpenSSL libraries found' "$DEST/cmake.log" &&
  grep -q 'Cyrus SASL 2.x found' "$DEST/cmake.log" || {
  echo "zkclient.sh: cmake found no OpenSSL or no Cyrus SASL" \
       "(libssl-dev, libsasl2-dev)" >&2; exit 1; }
cmake --build "$DEST/cmake" --target zookeeper -j 2 >"$DEST/build.log" 2>&1 || {
  tail -30 "$DEST/build.log" >&2; exit 1; }

mkdir -p "$DEST/lib" "$DEST/include/zookeeper"
cp "$DEST/cmake/libzookeeper.a" "$DEST/cmake/libhashtable.a" "$DEST/lib/"
cp "$c"/include/*.h "$c"/generated/*.h "$DEST/include/zookeeper/"
rm -rf "$DEST/cmake" "$DEST/src" "$apt"
echo "$stamp" >"$DEST/stamp"
