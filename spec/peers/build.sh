#!/bin/sh
# Compile the Curator peer (CuratorPeer.java) into directory $1 and write
# the classpath to run it with to $1/classpath (also printed on stdout):
#   sh spec/peers/build.sh /tmp/peer && java -cp "$(cat /tmp/peer/classpath)" CuratorPeer ...
# Needs javac (default-jdk-headless) and the Curator 5 jars of
# libcurator-recipes-java under /usr/share/java (JARDIR overrides).
set -eu
out=${1:?usage: build.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
JARDIR=${JARDIR:-/usr/share/java}

command -v javac >/dev/null 2>&1 || {
  echo "build.sh: javac not found (apt-get install default-jdk-headless)" >&2
  exit 1
}
cp=""
# slf4j-simple routes Curator's and ZooKeeper's logs to stderr, at warn
for jar in curator-recipes curator-framework curator-client zookeeper \
           zookeeper-jute guava slf4j-api slf4j-simple; do
  f="$JARDIR/$jar.jar"
  [ -f "$f" ] || {
    echo "build.sh: missing $f (apt-get install libcurator-recipes-java)" >&2
    exit 1
  }
  cp="$cp${cp:+:}$f"
done
mkdir -p "$out"
javac -nowarn -d "$out" -cp "$cp" "$here/CuratorPeer.java"
printf '%s\n' "$out:$cp" >"$out/classpath"
cat "$out/classpath"
