#!/usr/bin/env python3
"""Tracing-overhead benchmark (issue 6): utap against strace and an untraced run.

Runs every case in one invocation, alternating between cases round by round
so that machine noise hits all of them alike, and prints medians and ratios.
Workload: the `loop` fixture (N getppid calls with a write every 64th call).

Usage: tests/bench/overhead.py [--rounds R] [--calls N]
Needs: a release build (cargo build --release), strace.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UTAP = os.path.join(ROOT, "target", "release", "utap")


def fixture(name):
    """Path of a compiled fixture from the release build's build-script output."""
    build = os.path.join(ROOT, "target", "release", "build")
    for d in sorted(os.listdir(build)):
        p = os.path.join(build, d, "out", "fixtures", name)
        if os.path.exists(p):
            return p
    sys.exit(f"fixture {name} not found: run cargo build --release first")


def script(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".stp", delete=False)
    f.write(text)
    f.close()
    return f.name


COUNT_ALL = script("global n\nprobe syscall.* { n[name]++ }\n"
                   "probe end { foreach (s in n- limit 3) printf(\"%s %d\\n\", s, n[s]) }\n")
COUNT_RET = script("global n\nprobe syscall.*.return { n[name]++ }\n"
                   "probe end { foreach (s in n- limit 3) printf(\"%s %d\\n\", s, n[s]) }\n")
WRITE_ONLY = script("global n\nprobe syscall.write { n++ }\nprobe end { printf(\"%d\\n\", n) }\n")


def cases(loop, calls):
    cmd = f"{loop} {calls}"
    strace = ["strace", "-f", "-c", "-o", "/dev/null"]
    return [
        ("untraced", [loop, str(calls)]),
        ("strace -f -c", strace + [loop, str(calls)]),
        ("strace --seccomp-bpf write", strace + ["--seccomp-bpf", "-e", "trace=write", loop, str(calls)]),
        ("utap syscall.* (entry)", [UTAP, COUNT_ALL, "-c", cmd]),
        ("utap syscall.*.return", [UTAP, COUNT_RET, "-c", cmd]),
        ("utap syscall.write", [UTAP, WRITE_ONLY, "-c", cmd]),
    ]


def run(argv):
    t = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(argv)}")
    return dt


def peak_rss_kib(argv):
    """Peak RSS of the largest process among the children waited for (utap
    here: its tracee is small), in KiB."""
    code = "import resource,subprocess,sys;subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL);" \
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    out = subprocess.run([sys.executable, "-c", code] + argv, capture_output=True, text=True)
    return int(out.stdout.strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200000)
    a = ap.parse_args()
    loop = fixture("loop")
    all_cases = cases(loop, a.calls)
    times = {n: [] for n, _ in all_cases}
    for _ in range(a.rounds):
        for name, argv in all_cases:
            times[name].append(run(argv))
    med = {n: statistics.median(t) for n, t in times.items()}
    base_strace = med["strace -f -c"]
    base_seccomp = med["strace --seccomp-bpf write"]
    print(f"workload: loop {a.calls} (getppid, write every 64th), {a.rounds} rounds, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print(f"{'case':32} {'median s':>10} {'/untraced':>10} {'/strace -c':>11} {'/strace seccomp':>16}")
    for n, _ in all_cases:
        print(f"{n:32} {med[n]:10.3f} {med[n] / med['untraced']:10.1f} {med[n] / base_strace:11.3f} "
              f"{med[n] / base_seccomp:16.2f}")
    # A workload making no probed syscall: syscall.write probe on a loop without writes.
    nowrite = [loop, "0"]
    idle = [statistics.median([run(nowrite) for _ in range(a.rounds)]),
            statistics.median([run([UTAP, WRITE_ONLY, "-c", f"{loop} 0"]) for _ in range(a.rounds)])]
    print(f"startup: untraced loop 0 {idle[0]*1000:.1f} ms, utap syscall.write -c 'loop 0' {idle[1]*1000:.1f} ms")
    threads = fixture("threads")
    rss = peak_rss_kib([UTAP, COUNT_ALL, "-c", f"{threads} 100"])
    print(f"peak RSS tracing 100 threads with syscall.*: {rss / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
