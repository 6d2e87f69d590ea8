#!/usr/bin/env python3
"""Data-plane benchmark (issue 27): every syscall counted by name on a getppid
loop, with the handlers inside the program, against the same script on the
ptrace route (UTAP_INPROC=0), strace -f -c, bpftrace's raw_syscalls probe
(when it can run here) and the untraced loop, in one alternating run.

Two figures per case, medians over the rounds:
- wall time of `loop N` (start-up included), and its ratio to untraced;
- cost per hit, the slope between `loop N` and `loop N/10` (start-up and
  the fixed work drop out), over the untraced slope.

Also: a script probing only `syscall.getppid`, to show that the other
calls (the loop's writes) stay as cheap as under the filter alone.

Usage: tests/bench/dataplane.py [--rounds R] [--calls N] [--slow-calls M]
The ptrace route and strace take ~10 µs a call: they run on --slow-calls
(default N/10) and their slope is scaled. Say the load with the figures.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import UTAP, fixture, script  # noqa: E402

COUNT = script(
    "global c\nprobe syscall.* { c[name]++ }\n"
    "probe end { foreach (n in c- limit 2) printf(\"%s %d\\n\", n, c[n]) }\n"
)
ONE = script("global n\nprobe syscall.getppid { n++ }\nprobe end { println(n) }\n")
BPF = "tracepoint:raw_syscalls:sys_enter /comm == \"loop\"/ { @[args->id] = count(); }"


def timed(argv, env=None):
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env)
    return time.perf_counter() - t


def bpftrace_cmd(loop, n):
    if shutil.which("bpftrace") is None or os.geteuid() != 0:
        return None
    if not os.path.isdir("/sys/kernel/tracing/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"],
                       stderr=subprocess.DEVNULL)
    probe = ["bpftrace", "-e", BPF, "-c", f"{loop} 1"]
    if subprocess.run(probe, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
        return None
    return lambda k: ["bpftrace", "-e", BPF, "-c", f"{loop} {k}"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--slow-calls", type=int)
    a = ap.parse_args()
    loop, n = fixture("loop"), a.calls
    slow = a.slow_calls or n // 10
    off = dict(os.environ, UTAP_INPROC="0")
    bpf = bpftrace_cmd(loop, n)
    cases = {
        "untraced": (lambda k: [loop, str(k)], None, n),
        "utap in process": (lambda k: [UTAP, COUNT, "-c", f"{loop} {k}"], None, n),
        "utap getppid only": (lambda k: [UTAP, ONE, "-c", f"{loop} {k}"], None, n),
        "utap ptrace route": (lambda k: [UTAP, COUNT, "-c", f"{loop} {k}"], off, slow),
        "strace -f -c": (lambda k: ["strace", "-f", "-c", "-o", "/dev/null", loop, str(k)],
                         None, slow),
    }
    if bpf:
        cases["bpftrace raw_syscalls"] = (bpf, None, n)
    if shutil.which("strace") is None:
        del cases["strace -f -c"]
    wall = {c: [] for c in cases}
    slope = {c: [] for c in cases}
    load = os.getloadavg()
    for _ in range(a.rounds):
        for name, (cmd, env, k) in cases.items():
            big, small = timed(cmd(k), env), timed(cmd(k // 10), env)
            wall[name].append(big * n / k)
            # loop k makes k getppid and k/64 writes: per syscall.
            slope[name].append((big - small) / ((k - k // 10) * 65 / 64))
    base_wall = statistics.median(wall["untraced"])
    base_hit = statistics.median(slope["untraced"])
    print(f"loop {n} (getppid + a write every 64th), {a.rounds} alternating rounds, "
          f"load {load[0]:.2f} -> {os.getloadavg()[0]:.2f}")
    print(f"{'case':24} {'wall s':>8} {'/untraced':>10} {'per call':>10} {'/untraced':>10}")
    for name in cases:
        w, h = statistics.median(wall[name]), statistics.median(slope[name])
        print(f"{name:24} {w:8.3f} {w / base_wall:10.2f} {h * 1e9:8.0f}ns {h / base_hit:10.2f}")
    over = {c: statistics.median(slope[c]) - base_hit for c in cases if c != "untraced"}
    if "bpftrace raw_syscalls" in over and over["bpftrace raw_syscalls"] > 0:
        ratio = over["utap in process"] / over["bpftrace raw_syscalls"]
        print(f"added cost per call, utap in process / bpftrace: {ratio:.2f}")
    print(f"added cost per call, in process / ptrace route: "
          f"{over['utap in process'] / over['utap ptrace route']:.3f}")


if __name__ == "__main__":
    main()
