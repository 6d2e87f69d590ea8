#!/usr/bin/env python3
"""Scaling and floor benchmark (issue 16), one alternating run.

Prints, with the machine's load:
 1. utap / floor: entry-only counting of every syscall by name on `loop N`,
    against the project's floor tracer (tests/fixtures/floor.c: seccomp
    RET_TRACE on every syscall, a bare PTRACE_CONT at each stop, `-p` pins
    tracer and tracee to CPU 0). Goal <= 1.1. Also against `floor -n`, which
    fetches each stop's syscall (PTRACE_GET_SYSCALL_INFO) as any ptrace
    tracer counting by name must, and against the floor of a supervisor
    that needs no ptrace stop (tests/fixtures/notifyfloor.c: seccomp user
    notification, whose event carries the number).
 2. T(k threads x N) / T(1 thread x N) for k = 2 and 4 with a
    `syscall.getppid` probe on `mtsys k N` (each thread makes N getppid).
    Goal <= 1.2 for k = 2 on 2 CPUs. Also with the command's one listener
    (`UTAP_THREAD_LISTENERS=0`) instead of a listener per busy thread. The floor tracer (one tracer thread)
    on `mtsys 1` and `mtsys 2` shows what one tracer thread can do at best;
    `floor -p -j k` (k copies of `loop`, each traced by its own tracer
    thread pinned with its tracee to CPU i mod CPUs) what a tracer thread
    per CPU can do.
 3. utap / `strace -f -c` on the same workloads (skipped with --no-strace).
With --stats-against BIN, only: T(2)/T(1) of a `<<<` script (a statistic and
a statistics array by thread) on `mtsys k`, for this build and for BIN (say
main's binary copied to /tmp), alternating: what per-tracer-thread copies of
statistics change.
With --locks-against BIN, only: the same for a handler that is not trivial
(a few array updates on globals of its own in the entry and the return probe
of getppid): what per-global locks change (handlers of different tracer
threads on disjoint globals run at once).

Every case runs once per round, cases in turn, so machine noise hits all
alike; the medians are printed.
Usage: tests/bench/scale.py [--rounds R] [--calls N] [--mt-calls N] [--no-strace]
                            [--floor-only] [--stats-against BIN]
                            [--locks-against BIN]
Needs: cargo build --release (the fixtures come from its build script).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UTAP = os.path.join(ROOT, "target", "release", "utap")


def fixtures_dir():
    """The newest fixture directory of the release build."""
    build = os.path.join(ROOT, "target", "release", "build")
    dirs = [os.path.join(build, d, "out", "fixtures") for d in os.listdir(build)]
    dirs = [d for d in dirs if os.path.exists(os.path.join(d, "floor"))]
    if not dirs:
        sys.exit("fixtures not found: run cargo build --release first")
    return max(dirs, key=os.path.getmtime)


def script(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".stp", delete=False)
    f.write(text)
    f.close()
    return f.name


COUNT_ALL = script("global n\nprobe syscall.* { n[name]++ }\n"
                   "probe end { foreach (s in n- limit 3) printf(\"%s %d\\n\", s, n[s]) }\n")
GETPPID = script("global n\nprobe syscall.getppid { n++ }\nprobe end { printf(\"%d\\n\", n) }\n")
CHURN = script("global n\nprobe syscall.getppid { n++ }\nprobe end { printf(\"%d\\n\", n) }\n")
STATS = script("global s, by\nprobe syscall.getppid { s <<< tid(); by[tid()] <<< 1 }\n"
               "probe end { printf(\"%d %d\\n\", @count(s), @max(s)) }\n")
ARRAYS = script("global a, sa, ca, b, sb, cb\n"
                "probe syscall.getppid { t = tid(); a[t]++; sa[t % 7] += a[t]; ca++ }\n"
                "probe syscall.getppid.return { t = tid(); b[t]++; sb[t % 5] += b[t] + $return; cb++ }\n"
                "probe end { printf(\"%d %d\\n\", ca, cb) }\n")
STRACE = ["strace", "-f", "-c", "-o", "/dev/null"]


def run(argv):
    env = None
    while argv and argv[0].startswith("UTAP_") and "=" in argv[0]:
        var, value = argv[0].split("=", 1)
        env = dict(env or os.environ, **{var: value})
        argv = argv[1:]
    t = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(argv)}")
    return dt


def alternate(cases, rounds):
    times = {name: [] for name, _ in cases}
    for _ in range(rounds):
        for name, argv in cases:
            times[name].append(run(argv))
    return {n: (statistics.median(t), min(t), max(t)) for n, t in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=200000, help="getppid calls of loop")
    ap.add_argument("--mt-calls", type=int, default=100000, help="getppid calls per mtsys thread")
    ap.add_argument("--no-strace", action="store_true")
    ap.add_argument("--floor-only", action="store_true",
                    help="only part 1 (utap against the floors), no mtsys or strace")
    ap.add_argument("--before", metavar="UTAP",
                    help="another utap binary (e.g. main's, copied to /tmp/utap-main) "
                         "timed on the same count in the same rounds")
    ap.add_argument("--stats-against", metavar="BIN",
                    help="only T(2)/T(1) of a <<< script, this build against BIN")
    ap.add_argument("--locks-against", metavar="BIN",
                    help="only T(2)/T(1) of an array-updating entry+return script, this build "
                         "against BIN")
    a = ap.parse_args()
    fx = fixtures_dir()
    if a.stats_against:
        return against(a, os.path.join(fx, "mtsys"), STATS, "<<<", a.stats_against)
    if a.locks_against:
        return against(a, os.path.join(fx, "mtsys"), ARRAYS, "arrays", a.locks_against)
    floor, loop, mtsys, notify = (os.path.join(fx, n)
                                  for n in ("floor", "loop", "mtsys", "notifyfloor"))
    strace = not a.no_strace and not a.floor_only and shutil.which("strace") is not None
    n, m = str(a.calls), str(a.mt_calls)
    cases = [
        ("floor -p loop", [floor, "-p", loop, n]),
        ("floor -p -n loop", [floor, "-p", "-n", loop, n]),
        ("utap syscall.* loop", [UTAP, COUNT_ALL, "-c", f"{loop} {n}"]),
        # The same count through ptrace stops (no seccomp notification).
        ("utap NOTIFY=0 loop", ["UTAP_NOTIFY=0", UTAP, COUNT_ALL, "-c", f"{loop} {n}"]),
        ("notifyfloor -p loop", [notify, "-p", loop, n]),
        ("notifyfloor -s loop", [notify, "-s", loop, n]),
    ]
    if a.before:
        cases.append(("before syscall.* loop", [a.before, COUNT_ALL, "-c", f"{loop} {n}"]))
    for k in () if a.floor_only else (1, 2, 4):
        cases.append((f"utap getppid mtsys {k}", [UTAP, GETPPID, "-c", f"{mtsys} {k} {m}"]))
    # The command's one listener, served by one thread, as before the
    # per-thread listeners.
    for k in () if a.floor_only else (1, 2):
        cases.append((f"utap 1 listener mtsys {k}",
                      ["UTAP_THREAD_LISTENERS=0", UTAP, GETPPID, "-c", f"{mtsys} {k} {m}"]))
    threads = os.path.join(fx, "threads")
    for shards in () if a.floor_only else (1, 2):
        cases.append((f"utap churn 1000 shards={shards}",
                      [f"UTAP_SHARDS={shards}", UTAP, CHURN, "-c", f"{threads} 1000 100"]))
    for k in () if a.floor_only else (1, 2):
        cases.append((f"floor mtsys {k}", [floor, mtsys, str(k), m]))
    for k in () if a.floor_only else (1, 2, 4):
        cases.append((f"floor -p -j {k} loop", [floor, "-p", "-j", str(k), loop, m]))
    if strace:
        cases.append(("strace -f -c loop", STRACE + [loop, n]))
        for k in (1, 2, 4):
            cases.append((f"strace -f -c mtsys {k}", STRACE + [mtsys, str(k), m]))
    load_before = os.getloadavg()[0]
    med = alternate(cases, a.rounds)
    print(f"{a.rounds} rounds alternating, {os.cpu_count()} CPUs, "
          f"load {load_before:.2f} before / {os.getloadavg()[0]:.2f} after")
    print(f"{'case':26} {'median s':>9} {'min':>7} {'max':>7}")
    for name, _ in cases:
        md, lo, hi = med[name]
        print(f"{name:26} {md:9.3f} {lo:7.3f} {hi:7.3f}")
    t = {k: v[0] for k, v in med.items()}
    print(f"\nutap/floor (loop {n}, entry-only count by name): "
          f"{t['utap syscall.* loop'] / t['floor -p loop']:.2f} (goal <= 1.1); against the floor that also "
          f"fetches the syscall (floor -n): {t['utap syscall.* loop'] / t['floor -p -n loop']:.2f}")
    print(f"the same count through ptrace stops (UTAP_NOTIFY=0): utap/floor "
          f"{t['utap NOTIFY=0 loop'] / t['floor -p loop']:.2f}")
    if a.before:
        print(f"--before ({a.before}): before/floor {t['before syscall.* loop'] / t['floor -p loop']:.2f}")
    best_notify = min(t["notifyfloor -p loop"], t["notifyfloor -s loop"])
    print(f"the floor without a ptrace stop (notifyfloor: seccomp user notification, which "
          f"carries the syscall number): floor/notifyfloor {t['floor -p loop'] / best_notify:.2f}, "
          f"utap/notifyfloor {t['utap syscall.* loop'] / best_notify:.2f}")
    if a.floor_only:
        return
    one = t["utap getppid mtsys 1"]
    for k in (2, 4):
        print(f"T({k} threads x {m})/T(1 thread x {m}), syscall.getppid: "
              f"{t[f'utap getppid mtsys {k}'] / one:.2f}" + (" (goal <= 1.2 on 2 CPUs)" if k == 2 else ""))
    print(f"the same with the command's one listener (UTAP_THREAD_LISTENERS=0): T(2)/T(1) "
          f"{t['utap 1 listener mtsys 2'] / t['utap 1 listener mtsys 1']:.2f}")
    print(f"1,000 threads created and joined (threads 1000 100), tracer threads per CPU / one: "
          f"{t['utap churn 1000 shards=2'] / t['utap churn 1000 shards=1']:.2f} (the handover at each "
          f"thread's birth)")
    print(f"the one-thread floor tracer itself: T(2 threads)/T(1 thread) "
          f"{t['floor mtsys 2'] / t['floor mtsys 1']:.2f}")
    print(f"a tracer thread per CPU (floor -p -j k: k copies of loop {m}, each traced by its own "
          f"thread on CPU k mod CPUs): T(2)/T(1) {t['floor -p -j 2 loop'] / t['floor -p -j 1 loop']:.2f}, "
          f"T(4)/T(1) {t['floor -p -j 4 loop'] / t['floor -p -j 1 loop']:.2f}")
    if strace:
        print(f"utap/strace -f -c: loop {t['utap syscall.* loop'] / t['strace -f -c loop']:.3f}, " +
              ", ".join(f"mtsys {k} {t[f'utap getppid mtsys {k}'] / t[f'strace -f -c mtsys {k}']:.3f}"
                        for k in (1, 2, 4)))


def against(a, mtsys, stp, label, other):
    """T(2)/T(1) of script `stp`, this build and `other`."""
    m = str(a.mt_calls)
    builds = [("this", UTAP), ("other", other)]
    cases = [(f"{b} {label} mtsys {k}", [path, stp, "-c", f"{mtsys} {k} {m}"])
             for k in (1, 2) for b, path in builds]
    load_before = os.getloadavg()[0]
    med = alternate(cases, a.rounds)
    print(f"{a.rounds} rounds alternating, {os.cpu_count()} CPUs, "
          f"load {load_before:.2f} before / {os.getloadavg()[0]:.2f} after")
    for name, _ in cases:
        md, lo, hi = med[name]
        print(f"{name:26} {md:9.3f} {lo:7.3f} {hi:7.3f}")
    for b, path in builds:
        t1, t2 = med[f"{b} {label} mtsys 1"][0], med[f"{b} {label} mtsys 2"][0]
        print(f"{b} ({path}): T(2 threads x {m})/T(1 thread x {m}) with {label}: {t2 / t1:.2f}")


if __name__ == "__main__":
    main()
