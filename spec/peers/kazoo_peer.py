#!/usr/bin/python3
"""kazoo peer for spec/interop_spec.lua (run with /usr/bin/python3).

  counter HOSTS PATH COUNTERFILE LOGFILE CYCLES GATEFILE
  hold HOSTS PATH READYFILE [RELEASEFILE]
  bench HOSTS PATH CYCLES [GATEFILE OUTFILE]     (make bench: kazoo's own Lock)
  guarded HOSTS PATH NODE CYCLES GATEFILE OUTFILE (make bench)

The lock is kazoo.recipe.lock.Lock with extra_lock_patterns=["-lock-"], so
it orders zklock's (Curator-named) nodes along with its own "__lock__"
ones.  Times are time.monotonic(), CLOCK_MONOTONIC on Linux, the clock of
zklock.core.now().  Exit status: 0 done, 2 a lock was not acquired in
time, 3 a wait for a file ran out, 1 anything else.
"""
import logging
import os
import signal
import sys
import time

from kazoo.client import KazooClient
from kazoo.recipe.lock import Lock

ACQUIRE_S = 60


def fail(status, msg):
    sys.stderr.write("kazoo_peer: %s\n" % msg)
    sys.exit(status)


def connect(hosts):
    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=30)
    return client


def make_lock(client, path):
    return Lock(client, path, extra_lock_patterns=["-lock-"])


def wait_for_file(name, seconds):
    deadline = time.monotonic() + seconds
    while not os.path.exists(name):
        if time.monotonic() > deadline:
            fail(3, "file never appeared: " + name)
        time.sleep(0.01)


def write_atomically(name, text):
    with open(name + ".tmp", "w") as fh:
        fh.write(text)
    os.rename(name + ".tmp", name)


def acquire_or_die(lock, what):
    if not lock.acquire(timeout=ACQUIRE_S):
        fail(2, "%s not acquired within %d s" % (what, ACQUIRE_S))


def spin(seconds):
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        pass


def counter(hosts, path, counter_file, log_file, cycles, gate):
    client = connect(hosts)
    try:
        lock = make_lock(client, path)
        lines = []
        wait_for_file(gate, 150)
        for _ in range(int(cycles)):
            acquire_or_die(lock, "lock " + path)
            t0 = time.monotonic()
            with open(counter_file) as fh:
                text = fh.read().strip()
            n = int(text) if text else 0
            spin(0.001)
            with open(counter_file, "w") as fh:
                fh.write(str(n + 1))
            t1 = time.monotonic()
            lock.release()
            lines.append("%.6f %.6f\n" % (t0, t1))
        with open(log_file, "w") as fh:
            fh.writelines(lines)
    finally:
        client.stop()
        client.close()


def hold(hosts, path, ready, release=None):
    client = connect(hosts)

    def on_term(signum, frame):
        raise SystemExit(143)

    # SIGTERM ends the session at once (finally below), freeing the node
    signal.signal(signal.SIGTERM, on_term)
    try:
        lock = make_lock(client, path)
        acquire_or_die(lock, "lock " + path)
        write_atomically(ready, lock.node and (path + "/" + lock.node) or "")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (
                release and os.path.exists(release)):
            time.sleep(0.01)
        lock.release()
    finally:
        client.stop()
        client.close()


def write_bench(out, t0, t1, lat):
    with open(out, "w") as fh:
        fh.write("%.6f %.6f\n" % (t0, t1))
        for v in lat:
            fh.write("%.6f\n" % v)


def bench(hosts, path, cycles, gate=None, out=None):
    """kazoo's own Lock (plain kazoo nodes): acquire+release cycles.  Alone:
    one line like bench/run.lua's; with GATE and OUT: c8's worker file."""
    cycles = int(cycles)
    client = connect(hosts)
    lock = Lock(client, path)
    for _ in range(50):
        acquire_or_die(lock, path)
        lock.release()
    if gate:
        wait_for_file(gate, 150)
    lat = []
    c0 = time.process_time()  # the whole process's CPU, every thread
    t0 = time.monotonic()
    for _ in range(cycles):
        s = time.monotonic()
        acquire_or_die(lock, path)
        if gate:
            lat.append(time.monotonic() - s)
        lock.release()
        if not gate:
            lat.append(time.monotonic() - s)
    t1 = time.monotonic()
    cpu = time.process_time() - c0
    client.stop()
    client.close()
    if gate:
        write_bench(out, t0, t1, lat)
        return
    lat.sort()
    print("kazoo.mutex.uncontended ops=%d ops_per_s=%.1f p50_us=%.0f "
          "p99_us=%.0f cpu_us_per_cycle=%.1f"
          % (cycles, cycles / (t1 - t0), lat[cycles // 2] * 1e6,
             lat[min(cycles - 1, int(cycles * 0.99))] * 1e6,
             cpu / cycles * 1e6))


def guarded(hosts, path, node, cycles, gate, out):
    """Add one to the counter in NODE per cycle under kazoo's Lock:
    acquire, get, set, release."""
    cycles = int(cycles)
    client = connect(hosts)
    lock = Lock(client, path)
    acquire_or_die(lock, path)
    client.ensure_path(node)
    if not client.get(node)[0]:
        client.set(node, b"0")
    lock.release()
    wait_for_file(gate, 150)
    lat = []
    t0 = time.monotonic()
    for _ in range(cycles):
        s = time.monotonic()
        acquire_or_die(lock, path)
        n = int(client.get(node)[0] or b"0")
        client.set(node, str(n + 1).encode())
        lock.release()
        lat.append(time.monotonic() - s)
    t1 = time.monotonic()
    client.stop()
    client.close()
    write_bench(out, t0, t1, lat)


def main(argv):
    logging.basicConfig(level=logging.WARNING)
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "counter" and len(argv) == 8:
        counter(*argv[2:])
    elif cmd == "hold" and len(argv) in (5, 6):
        hold(*argv[2:])
    elif cmd == "bench" and len(argv) in (5, 7):
        bench(*argv[2:])
    elif cmd == "guarded" and len(argv) == 8:
        guarded(*argv[2:])
    elif cmd == "now":
        print("%.6f" % time.monotonic())
    else:
        fail(1, "usage: counter HOSTS PATH COUNTERFILE LOGFILE CYCLES GATEFILE"
             " | hold HOSTS PATH READYFILE [RELEASEFILE]"
             " | bench HOSTS PATH CYCLES [GATEFILE OUTFILE]"
             " | guarded HOSTS PATH NODE CYCLES GATEFILE OUTFILE")


if __name__ == "__main__":
    main(sys.argv)
