// Apache Curator peer for spec/interop_spec.lua: each subcommand runs one
// Curator recipe against a real server so the specs can check that zklock
// and Curator honour each other's locks.  Build with spec/peers/build.sh.
//
//   counter HOSTS PATH COUNTERFILE LOGFILE CYCLES GATEFILE [mutex|semmutex]
//   sem HOSTS PATH MAXLEASES LOGFILE CYCLES HOLDMS GATEFILE
//   sembench HOSTS PATH MAXLEASES CYCLES [GATEFILE OUTFILE]
//   latch HOSTS PATH ID LOGFILE CYCLES HOLDMS GATEFILE
//   selector HOSTS PATH ID LOGFILE CYCLES HOLDMS GATEFILE
//   latchbench HOSTS PATH OUTFILE RELEASEFILE (bench/failover.lua)
// The session timeout is 10 s, or the property peer.session.ms.
//   rw HOSTS PATH read|write LOGFILE CYCLES HOLDMS GATEFILE
//   hold HOSTS PATH READYFILE [RELEASEFILE]
//   hold-revocable HOSTS PATH READYFILE DONEFILE
//   revoke HOSTS NODEPATH
//
// Times in the logs are System.nanoTime() in seconds: on Linux that is
// clock_gettime(CLOCK_MONOTONIC), the clock of zklock.core.now().
// Exit status: 0 done, 2 a lock was not acquired in time, 3 a wait for a
// file or a revocation ran out, 1 anything else (stack trace on stderr).

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorPeer {
  static final long ACQUIRE_S = 60;

  /** InterProcessMutex with its own node path made visible. */
  static final class Mutex extends InterProcessMutex {
    Mutex(CuratorFramework c, String path) { super(c, path); }
    String node() { return getLockPath(); }
  }

  static double now() { return System.nanoTime() / 1e9; }

  static void fail(int status, String msg) {
    System.err.println("CuratorPeer: " + msg);
    System.exit(status);
  }

  static CuratorFramework connect(String hosts) throws Exception {
    CuratorFramework c = CuratorFrameworkFactory.builder()
        .connectString(hosts)
        .sessionTimeoutMs(Integer.getInteger("peer.session.ms", 10000))
        .connectionTimeoutMs(10000)
        .retryPolicy(new ExponentialBackoffRetry(100, 5, 2000))
        .build();
    c.start();
    if (!c.blockUntilConnected(30, TimeUnit.SECONDS)) {
      fail(1, "no connection to " + hosts);
    }
    return c;
  }

  static void waitForFile(String file, double seconds) throws Exception {
    double deadline = now() + seconds;
    Path p = Paths.get(file);
    while (!Files.exists(p)) {
      if (now() > deadline) fail(3, "file never appeared: " + file);
      Thread.sleep(10);
    }
  }

  /** Write whole, then rename: a poller never sees a half-written file. */
  static void writeAtomically(String file, String text) throws Exception {
    Path p = Paths.get(file);
    Path tmp = Paths.get(file + ".tmp");
    Files.write(tmp, text.getBytes(StandardCharsets.UTF_8));
    Files.move(tmp, p, StandardCopyOption.ATOMIC_MOVE);
  }

  static void spin(double seconds) {
    double until = now() + seconds;
    while (now() < until) { /* widen the read-modify-write window */ }
  }

  static void acquireOrDie(InterProcessLock m, String what) throws Exception {
    if (!m.acquire(ACQUIRE_S, TimeUnit.SECONDS)) {
      fail(2, what + " not acquired within " + ACQUIRE_S + " s");
    }
  }

  // counter HOSTS PATH COUNTERFILE LOGFILE CYCLES GATEFILE [mutex|semmutex]
  static void counter(String[] a) throws Exception {
    String counterFile = a[3], logFile = a[4], gate = a[6];
    int cycles = Integer.parseInt(a[5]);
    boolean sem = a.length > 7 && a[7].equals("semmutex");
    try (CuratorFramework c = connect(a[1])) {
      InterProcessLock m = sem ? new InterProcessSemaphoreMutex(c, a[2])
                               : new InterProcessMutex(c, a[2]);
      Path cf = Paths.get(counterFile);
      StringBuilder log = new StringBuilder();
      waitForFile(gate, 150);
      for (int i = 0; i < cycles; i++) {
        acquireOrDie(m, "mutex " + a[2]);
        double t0 = now();
        String s = new String(Files.readAllBytes(cf), StandardCharsets.UTF_8).trim();
        long n = s.isEmpty() ? 0 : Long.parseLong(s);
        spin(0.001);
        Files.write(cf, Long.toString(n + 1).getBytes(StandardCharsets.UTF_8));
        double t1 = now();
        m.release();
        log.append(String.format(Locale.ROOT, "%.6f %.6f\n", t0, t1));
      }
      Files.write(Paths.get(logFile), log.toString().getBytes(StandardCharsets.UTF_8));
    }
  }

  // The CPU time of the whole process (every thread: ours, Curator's and
  // the ZooKeeper client's, the JIT compiler's and the collector's), in ns
  static long processCpuNs() {
    return ((com.sun.management.OperatingSystemMXBean)
        java.lang.management.ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime();
  }

  // bench HOSTS PATH CYCLES [GATEFILE OUTFILE]: acquire+release in a loop
  // after a warm-up; alone, prints one bench line (docs/performance.md)
  // with cpu_us_per_cycle, the process's CPU time over the loop; with a
  // gate, waits for it and writes "start end" then one acquire latency
  // per line (W2)
  static void bench(String[] a) throws Exception {
    int cycles = Integer.parseInt(a[3]);
    try (CuratorFramework c = connect(a[1])) {
      InterProcessMutex m = new InterProcessMutex(c, a[2]);
      for (int i = 0; i < 50; i++) { acquireOrDie(m, a[2]); m.release(); }
      if (a.length > 5) waitForFile(a[4], 150);
      double[] lat = new double[cycles];
      long cpu0 = processCpuNs();
      double t0 = now();
      for (int i = 0; i < cycles; i++) {
        double s = now();
        acquireOrDie(m, a[2]);
        lat[i] = now() - s;
        m.release();
        if (a.length <= 5) lat[i] = now() - s; // W1: the whole cycle
      }
      double t1 = now();
      long cpu = processCpuNs() - cpu0;
      if (a.length > 5) {
        StringBuilder out = new StringBuilder();
        out.append(String.format(Locale.ROOT, "%.6f %.6f\n", t0, t1));
        for (double v : lat) out.append(String.format(Locale.ROOT, "%.6f\n", v));
        Files.write(Paths.get(a[5]), out.toString().getBytes(StandardCharsets.UTF_8));
        return;
      }
      java.util.Arrays.sort(lat);
      System.out.println(String.format(Locale.ROOT,
          "curator.mutex.uncontended ops=%d ops_per_s=%.1f p50_us=%.0f p99_us=%.0f"
          + " cpu_us_per_cycle=%.1f",
          cycles, cycles / (t1 - t0), lat[cycles / 2] * 1e6,
          lat[(int) Math.min(cycles - 1, Math.ceil(cycles * 0.99) - 1)] * 1e6,
          cpu / 1e3 / cycles));
    }
  }

  // guarded HOSTS PATH NODE CYCLES GATEFILE OUTFILE: each cycle adds one to
  // the counter in NODE under InterProcessMutex PATH (acquire, getData,
  // setData, release); writes "start end" and one cycle latency per line
  static void guarded(String[] a) throws Exception {
    int cycles = Integer.parseInt(a[4]);
    try (CuratorFramework c = connect(a[1])) {
      InterProcessMutex m = new InterProcessMutex(c, a[2]);
      String node = a[3];
      acquireOrDie(m, a[2]);
      if (c.checkExists().forPath(node) == null) {
        try {
          c.create().creatingParentContainersIfNeeded().forPath(node,
              "0".getBytes(StandardCharsets.UTF_8));
        } catch (org.apache.zookeeper.KeeperException.NodeExistsException e) {
          // another peer made it first
        }
      }
      m.release();
      waitForFile(a[5], 150);
      double[] lat = new double[cycles];
      double t0 = now();
      for (int i = 0; i < cycles; i++) {
        double s = now();
        acquireOrDie(m, a[2]);
        byte[] d = c.getData().forPath(node);
        long n = Long.parseLong(new String(d, StandardCharsets.UTF_8).trim());
        c.setData().forPath(node,
            Long.toString(n + 1).getBytes(StandardCharsets.UTF_8));
        m.release();
        lat[i] = now() - s;
      }
      double t1 = now();
      StringBuilder out = new StringBuilder();
      out.append(String.format(Locale.ROOT, "%.6f %.6f\n", t0, t1));
      for (double v : lat) out.append(String.format(Locale.ROOT, "%.6f\n", v));
      Files.write(Paths.get(a[6]), out.toString().getBytes(StandardCharsets.UTF_8));
    }
  }

  static Lease leaseOrDie(InterProcessSemaphoreV2 s, String what)
      throws Exception {
    Lease l = s.acquire(ACQUIRE_S, TimeUnit.SECONDS);
    if (l == null) fail(2, what + " not acquired within " + ACQUIRE_S + " s");
    return l;
  }

  // sem HOSTS PATH MAXLEASES LOGFILE CYCLES HOLDMS GATEFILE: a lease per
  // cycle, held HOLDMS, logged as "start end"
  static void sem(String[] a) throws Exception {
    int max = Integer.parseInt(a[3]), cycles = Integer.parseInt(a[5]);
    long holdMs = Long.parseLong(a[6]);
    String logFile = a[4], gate = a[7];
    try (CuratorFramework c = connect(a[1])) {
      InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(c, a[2], max);
      StringBuilder log = new StringBuilder();
      waitForFile(gate, 150);
      for (int i = 0; i < cycles; i++) {
        Lease l = leaseOrDie(s, "lease of " + a[2]);
        double t0 = now();
        Thread.sleep(holdMs);
        double t1 = now();
        s.returnLease(l);
        log.append(String.format(Locale.ROOT, "%.6f %.6f\n", t0, t1));
      }
      Files.write(Paths.get(logFile), log.toString().getBytes(StandardCharsets.UTF_8));
    }
  }

  // sembench HOSTS PATH MAXLEASES CYCLES [GATEFILE OUTFILE]: as bench, with
  // a lease of InterProcessSemaphoreV2 per cycle
  static void sembench(String[] a) throws Exception {
    int max = Integer.parseInt(a[3]), cycles = Integer.parseInt(a[4]);
    try (CuratorFramework c = connect(a[1])) {
      InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(c, a[2], max);
      for (int i = 0; i < 50; i++) s.returnLease(leaseOrDie(s, a[2]));
      if (a.length > 6) waitForFile(a[5], 150);
      double[] lat = new double[cycles];
      double t0 = now();
      for (int i = 0; i < cycles; i++) {
        double st = now();
        Lease l = leaseOrDie(s, a[2]);
        lat[i] = now() - st;
        s.returnLease(l);
        if (a.length <= 6) lat[i] = now() - st; // uncontended: the cycle
      }
      double t1 = now();
      if (a.length > 6) {
        StringBuilder out = new StringBuilder();
        out.append(String.format(Locale.ROOT, "%.6f %.6f\n", t0, t1));
        for (double v : lat) out.append(String.format(Locale.ROOT, "%.6f\n", v));
        Files.write(Paths.get(a[6]), out.toString().getBytes(StandardCharsets.UTF_8));
        return;
      }
      java.util.Arrays.sort(lat);
      System.out.println(String.format(Locale.ROOT,
          "curator.semaphore.uncontended ops=%d ops_per_s=%.1f p50_us=%.0f p99_us=%.0f",
          cycles, cycles / (t1 - t0), lat[cycles / 2] * 1e6,
          lat[(int) Math.min(cycles - 1, Math.ceil(cycles * 0.99) - 1)] * 1e6));
    }
  }

  // latch HOSTS PATH ID LOGFILE CYCLES HOLDMS GATEFILE: per cycle, a
  // LeaderLatch that waits to lead, leads HOLDMS (checking hasLeadership)
  // and closes; logs "start end"
  static void latch(String[] a) throws Exception {
    int cycles = Integer.parseInt(a[5]);
    long holdMs = Long.parseLong(a[6]);
    String logFile = a[4], gate = a[7];
    try (CuratorFramework c = connect(a[1])) {
      StringBuilder log = new StringBuilder();
      waitForFile(gate, 150);
      for (int i = 0; i < cycles; i++) {
        LeaderLatch l = new LeaderLatch(c, a[2], a[3]);
        l.start();
        if (!l.await(ACQUIRE_S, TimeUnit.SECONDS)) {
          fail(2, "leadership of " + a[2] + " not had within " + ACQUIRE_S + " s");
        }
        double t0 = now(), until = t0 + holdMs / 1000.0;
        while (now() < until) {
          if (!l.hasLeadership()) fail(1, "leadership lost while leading");
          Thread.sleep(1);
        }
        double t1 = now();
        l.close();
        log.append(String.format(Locale.ROOT, "%.6f %.6f\n", t0, t1));
      }
      Files.write(Paths.get(logFile), log.toString().getBytes(StandardCharsets.UTF_8));
    }
  }

  // selector HOSTS PATH ID LOGFILE CYCLES HOLDMS GATEFILE: a requeued
  // LeaderSelector whose turns last HOLDMS; logs "start end" per turn
  static void selector(String[] a) throws Exception {
    final int cycles = Integer.parseInt(a[5]);
    final long holdMs = Long.parseLong(a[6]);
    String logFile = a[4], gate = a[7];
    final StringBuilder log = new StringBuilder();
    final CountDownLatch done = new CountDownLatch(cycles);
    try (CuratorFramework c = connect(a[1])) {
      waitForFile(gate, 150);
      LeaderSelector s = new LeaderSelector(c, a[2],
          new LeaderSelectorListenerAdapter() {
            @Override
            public void takeLeadership(CuratorFramework cf) throws Exception {
              double t0 = now();
              Thread.sleep(holdMs);
              double t1 = now();
              synchronized (log) {
                log.append(String.format(Locale.ROOT, "%.6f %.6f\n", t0, t1));
              }
              done.countDown();
            }
          });
      s.setId(a[3]);
      s.autoRequeue();
      s.start();
      if (!done.await(ACQUIRE_S * 2, TimeUnit.SECONDS)) {
        fail(2, "turns of " + a[2] + " not all had in time");
      }
      s.close();
      synchronized (log) {
        Files.write(Paths.get(logFile), log.toString().getBytes(StandardCharsets.UTF_8));
      }
    }
  }

  static void append(String file, String line) throws Exception {
    Files.write(Paths.get(file), (line + "\n").getBytes(StandardCharsets.UTF_8),
        java.nio.file.StandardOpenOption.CREATE,
        java.nio.file.StandardOpenOption.APPEND);
  }

  // latchbench HOSTS PATH OUTFILE RELEASEFILE: the protocol of
  // bench/latch_worker.lua (joined, leading <t>, closed <t>)
  static void latchbench(String[] a) throws Exception {
    try (CuratorFramework c = connect(a[1])) {
      LeaderLatch l = new LeaderLatch(c, a[2]);
      l.start();
      append(a[3], "joined");
      if (!l.await(300, TimeUnit.SECONDS)) fail(2, "never led");
      append(a[3], String.format(Locale.ROOT, "leading %.6f", now()));
      waitForFile(a[4], 300);
      append(a[3], String.format(Locale.ROOT, "closed %.6f", now()));
      l.close();
    }
  }

  // rw HOSTS PATH read|write LOGFILE CYCLES HOLDMS GATEFILE
  static void rw(String[] a) throws Exception {
    boolean write;
    if (a[3].equals("write")) write = true;
    else if (a[3].equals("read")) write = false;
    else { fail(1, "rw: read or write expected, got " + a[3]); return; }
    String logFile = a[4], gate = a[7];
    int cycles = Integer.parseInt(a[5]);
    long holdMs = Long.parseLong(a[6]);
    try (CuratorFramework c = connect(a[1])) {
      InterProcessReadWriteLock rwl = new InterProcessReadWriteLock(c, a[2]);
      InterProcessMutex m = write ? rwl.writeLock() : rwl.readLock();
      String tag = write ? "W" : "R";
      StringBuilder log = new StringBuilder();
      waitForFile(gate, 150);
      for (int i = 0; i < cycles; i++) {
        acquireOrDie(m, a[3] + " lock " + a[2]);
        double t0 = now();
        Thread.sleep(holdMs);
        double t1 = now();
        m.release();
        log.append(String.format(Locale.ROOT, "%s %.6f %.6f\n", tag, t0, t1));
      }
      Files.write(Paths.get(logFile), log.toString().getBytes(StandardCharsets.UTF_8));
    }
  }

  // hold HOSTS PATH READYFILE [RELEASEFILE]: hold until RELEASEFILE exists,
  // SIGTERM (the session is closed, so the node goes at once) or 120 s.
  static void hold(String[] a) throws Exception {
    final CuratorFramework c = connect(a[1]);
    Runtime.getRuntime().addShutdownHook(new Thread(c::close));
    Mutex m = new Mutex(c, a[2]);
    acquireOrDie(m, "mutex " + a[2]);
    writeAtomically(a[3], m.node());
    Path release = a.length > 4 ? Paths.get(a[4]) : null;
    double deadline = now() + 120;
    while (now() < deadline && (release == null || !Files.exists(release))) {
      Thread.sleep(10);
    }
    m.release();
  }

  // hold-revocable HOSTS PATH READYFILE DONEFILE
  static void holdRevocable(String[] a) throws Exception {
    try (CuratorFramework c = connect(a[1])) {
      Mutex m = new Mutex(c, a[2]);
      final CountDownLatch asked = new CountDownLatch(1);
      // Curator calls the listener on its own thread, while the lock is
      // owned by this one: only signal here, release below.
      m.makeRevocable(lock -> asked.countDown());
      acquireOrDie(m, "mutex " + a[2]);
      writeAtomically(a[3], m.node());
      boolean revoked = asked.await(60, TimeUnit.SECONDS);
      m.release();
      if (!revoked) fail(3, "no revocation request within 60 s");
      writeAtomically(a[4], "revoked");
    }
  }

  // revoke HOSTS NODEPATH
  static void revoke(String[] a) throws Exception {
    try (CuratorFramework c = connect(a[1])) {
      Revoker.attemptRevoke(c, a[2]);
    }
  }

  static void need(String[] a, int n, String usage) {
    if (a.length < n) fail(1, "usage: " + usage);
  }

  static void quiet(String property, String level) {
    if (System.getProperty(property) == null) System.setProperty(property, level);
  }

  public static void main(String[] a) {
    // before any Curator class makes its logger: warnings and errors only
    quiet("org.slf4j.simpleLogger.defaultLogLevel", "warn");
    // ZooKeeper 3.8 warns about an EndOfStreamException on every close
    quiet("org.slf4j.simpleLogger.log.org.apache.zookeeper.ClientCnxn", "error");
    try {
      run(a);
    } catch (Throwable e) {
      // exit even though Curator's threads may still be running
      e.printStackTrace();
      System.exit(1);
    }
    System.exit(0);
  }

  static void run(String[] a) throws Exception {
    String cmd = a.length > 0 ? a[0] : "";
    switch (cmd) {
      case "counter":
        need(a, 7, "counter HOSTS PATH COUNTERFILE LOGFILE CYCLES GATEFILE "
            + "[mutex|semmutex]");
        counter(a);
        break;
      case "sem":
        need(a, 8, "sem HOSTS PATH MAXLEASES LOGFILE CYCLES HOLDMS GATEFILE");
        sem(a);
        break;
      case "guarded":
        need(a, 7, "guarded HOSTS PATH NODE CYCLES GATEFILE OUTFILE");
        guarded(a);
        break;
      case "sembench":
        need(a, 5, "sembench HOSTS PATH MAXLEASES CYCLES [GATEFILE OUTFILE]");
        sembench(a);
        break;
      case "latchbench":
        need(a, 5, "latchbench HOSTS PATH OUTFILE RELEASEFILE");
        latchbench(a);
        break;
      case "selector":
        need(a, 8, "selector HOSTS PATH ID LOGFILE CYCLES HOLDMS GATEFILE");
        selector(a);
        break;
      case "latch":
        need(a, 8, "latch HOSTS PATH ID LOGFILE CYCLES HOLDMS GATEFILE");
        latch(a);
        break;
      case "rw":
        need(a, 8, "rw HOSTS PATH read|write LOGFILE CYCLES HOLDMS GATEFILE");
        rw(a);
        break;
      case "hold":
        need(a, 4, "hold HOSTS PATH READYFILE [RELEASEFILE]");
        hold(a);
        break;
      case "hold-revocable":
        need(a, 5, "hold-revocable HOSTS PATH READYFILE DONEFILE");
        holdRevocable(a);
        break;
      case "revoke":
        need(a, 3, "revoke HOSTS NODEPATH");
        revoke(a);
        break;
      case "bench":
        need(a, 4, "bench HOSTS PATH CYCLES [GATEFILE OUTFILE]");
        bench(a);
        break;
      case "now": // the clock the logs use, for comparing with core.now()
        System.out.println(String.format(Locale.ROOT, "%.6f", now()));
        break;
      default:
        fail(1, "unknown subcommand '" + cmd + "': counter, sem, sembench, "
            + "latch, selector, rw, hold, hold-revocable, revoke, bench, now");
    }
  }
}
