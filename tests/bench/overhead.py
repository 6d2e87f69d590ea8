#!/usr/bin/env python3
"""Tracing-overhead benchmark (issue 6): utap against strace and an untraced run.

Runs every case in one invocation, alternating between cases round by round
so that machine noise hits all of them alike, and prints medians and ratios.
Workload: the `loop` fixture (N getppid calls with a write every 64th call).
Also: the tracer co-location modes (UTAP_COLOCATE=off|pin|idle), a workload
making no probed syscall, a 2-thread CPU-bound tracee (`spin`), compile +
start-up time of typical scripts, and peak RSS tracing 100 threads.

Usage: tests/bench/overhead.py [--rounds R] [--calls N] [--startup]
(--startup: only the compile + start-up times and the peak RSS.)
Needs: a release build (cargo build --release), strace. Say the load
(printed) with the figures: other engineers' builds make stops cheap.
"""
import argparse
import os
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


END_TOP3 = "probe end { foreach (s in n- limit 3) printf(\"%s %d\\n\", s, n[s]) }\n"
COUNT_ALL = script("global n\nprobe syscall.* { n[name]++ }\n" + END_TOP3)
COUNT_RET = script("global n\nprobe syscall.*.return { n[name]++ }\n" + END_TOP3)
WRITE_ONLY = script("global n\nprobe syscall.write { n++ }\nprobe end { printf(\"%d\\n\", n) }\n")
# Probes a syscall the workloads never make.
UNUSED = script("global n\nprobe syscall.kill { n++ }\nprobe end { printf(\"%d\\n\", n) }\n")
GETPPID = script("global n\nprobe syscall.getppid { n++ }\nprobe end { printf(\"%d\\n\", n) }\n")
SYSCALLTOP = os.path.join(ROOT, "examples", "syscalltop.stp")


def env(colocate=None):
    e = dict(os.environ)
    if colocate:
        e["UTAP_COLOCATE"] = colocate
    return e


def overhead_cases(loop, calls):
    n = str(calls)
    cmd = f"{loop} {calls}"
    strace = ["strace", "-f", "-c", "-o", "/dev/null"]
    return [
        ("untraced", [loop, n], None),
        ("strace -f -c", strace + [loop, n], None),
        ("strace -f -c --seccomp-bpf write", strace + ["--seccomp-bpf", "-e", "trace=write", loop, n], None),
        ("utap syscall.* (entry)", [UTAP, COUNT_ALL, "-c", cmd], None),
        ("  colocate=off", [UTAP, COUNT_ALL, "-c", cmd], "off"),
        ("  colocate=pin", [UTAP, COUNT_ALL, "-c", cmd], "pin"),
        ("  colocate=idle", [UTAP, COUNT_ALL, "-c", cmd], "idle"),
        ("utap syscall.*.return", [UTAP, COUNT_RET, "-c", cmd], None),
        ("utap syscall.write", [UTAP, WRITE_ONLY, "-c", cmd], None),
    ]


def run(argv, colocate=None):
    t = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env(colocate))
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(argv)}")
    return dt


def alternate(cases, rounds):
    """Medians of each case, run round by round in turn."""
    times = {name: [] for name, _, _ in cases}
    for _ in range(rounds):
        for name, argv, colocate in cases:
            times[name].append(run(argv, colocate))
    return {n: statistics.median(t) for n, t in times.items()}


def peak_rss_kib(argv):
    """Peak RSS of the largest of utap's processes (the tracing process:
    the traced command is small), in KiB. utap's foreground does not wait
    for its tracing process, so the measuring process becomes the
    subreaper of the orphaned tracing process and reaps it too."""
    code = ("import ctypes,os,resource,subprocess,sys;"
            "ctypes.CDLL(None).prctl(36,1,0,0,0);"  # PR_SET_CHILD_SUBREAPER
            "subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL)\n"
            "while True:\n"
            "  try: os.wait()\n"
            "  except ChildProcessError: break\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code] + argv, capture_output=True, text=True)
    return int(out.stdout.strip())


def load():
    return os.getloadavg()[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--spin", type=int, default=600_000_000, help="iterations per spin thread")
    ap.add_argument("--startup", action="store_true", help="only compile + start-up and peak RSS")
    a = ap.parse_args()
    loop, spin, threads = fixture("loop"), fixture("spin"), fixture("threads")
    if not a.startup:
        tracing_overhead(a, loop, spin)
    startup_and_memory(a, loop, threads)


def tracing_overhead(a, loop, spin):
    """Sections 1-3: the loop workload, no probed syscall, parallelism."""
    load_before = load()

    # 1. Overhead on the loop workload.
    cases = overhead_cases(loop, a.calls)
    med = alternate(cases, a.rounds)
    print(f"workload: loop {a.calls} (getppid, write every 64th), {a.rounds} rounds alternating, "
          f"{os.cpu_count()} CPUs, load {load_before:.2f} before / {load():.2f} after")
    print(f"{'case':34} {'median s':>9} {'/untraced':>10} {'/strace -c':>11} {'/strace seccomp':>16}")
    for n, _, _ in cases:
        print(f"{n:34} {med[n]:9.3f} {med[n] / med['untraced']:10.1f} "
              f"{med[n] / med['strace -f -c']:11.3f} {med[n] / med['strace -f -c --seccomp-bpf write']:16.2f}")

    # 2. A workload making no probed syscall (10x longer, so start-up weighs less).
    big = str(a.calls * 10)
    idle = alternate([
        ("untraced", [loop, big], None),
        ("utap syscall.kill", [UTAP, UNUSED, "-c", f"{loop} {big}"], None),
        ("utap start-up (loop 0)", [UTAP, UNUSED, "-c", f"{loop} 0"], None),
        ("strace seccomp kill", ["strace", "-f", "-c", "-o", "/dev/null", "--seccomp-bpf", "-e", "trace=kill",
                                 loop, big], None),
        ("allow-all filter", [fixture("seccomp_allow"), loop, big], None),
    ], a.rounds)
    net = idle["utap syscall.kill"] - idle["utap start-up (loop 0)"]
    print(f"\nno probed syscall (loop {big}): untraced {idle['untraced']:.3f} s, "
          f"utap syscall.kill {idle['utap syscall.kill']:.3f} s = {idle['utap syscall.kill'] / idle['untraced']:.2f}x "
          f"({net / idle['untraced']:.2f}x without utap's {idle['utap start-up (loop 0)'] * 1000:.0f} ms start-up); "
          f"strace --seccomp-bpf -e trace=kill {idle['strace seccomp kill']:.3f} s = "
          f"{idle['strace seccomp kill'] / idle['untraced']:.2f}x; any seccomp filter (allow-all, no tracer) "
          f"{idle['allow-all filter']:.3f} s = {idle['allow-all filter'] / idle['untraced']:.2f}x")

    # 3. Parallelism: 2 CPU-bound threads (getppid every 1M iterations, probed).
    it = str(a.spin)
    par = alternate([
        ("1 thread untraced", [spin, "1", it], None),
        ("2 threads untraced", [spin, "2", it], None),
        ("2 threads utap syscall.getppid", [UTAP, GETPPID, "-c", f"{spin} 2 {it}"], None),
        ("2 threads utap colocate=off", [UTAP, GETPPID, "-c", f"{spin} 2 {it}"], "off"),
    ], max(3, a.rounds // 2))
    one = par["1 thread untraced"]
    print(f"\nspin 2 x {it} iterations (1 thread alone: {one:.2f} s); CPUs of throughput = 2 x 1-thread time / time:")
    for n in ["2 threads untraced", "2 threads utap syscall.getppid", "2 threads utap colocate=off"]:
        print(f"  {n:32} {par[n]:6.2f} s  {2 * one / par[n]:.2f} CPUs")



def startup_and_memory(a, loop, threads):
    """Sections 4-5: compile + start-up of typical scripts, peak RSS."""
    print(f"load before compile + start-up: {load():.2f}")
    # 4. Compile + start-up of typical scripts (the command does nothing).
    st = alternate([
        ("untraced loop 0", [loop, "0"], None),
        ("utap syscall.write", [UTAP, WRITE_ONLY, "-c", f"{loop} 0"], None),
        ("utap syscall.* count", [UTAP, COUNT_ALL, "-c", f"{loop} 0"], None),
        ("utap examples/syscalltop.stp", [UTAP, SYSCALLTOP, "-c", f"{loop} 0"], None),
    ], max(5, a.rounds))
    print("\ncompile + start-up (-c 'loop 0'):")
    for n, t in st.items():
        print(f"  {n:32} {t * 1000:6.1f} ms")

    # 5. Memory.
    rss = peak_rss_kib([UTAP, COUNT_ALL, "-c", f"{threads} 100"])
    print(f"\npeak RSS of utap tracing 100 threads with syscall.*: {rss / 1024:.1f} MiB")
    print(f"load at the end: {load():.2f}")


if __name__ == "__main__":
    main()
