#!/usr/bin/env python3
"""Syscall probes on an attached program (`-x`, issue 27): every syscall
counted by name in a program that is already running, with the handlers
in the program (Syscall User Dispatch finds the sites), against the same
script on the ptrace route (UTAP_INPROC=0), `strace -f -c -p`, bpftrace's
raw_syscalls probe (when it can run here) and no tracer, in one
alternating run.

Workload: the `gate` fixture, a round of N getppid calls per line it
reads; each tracer attaches to a fresh gate, a warm-up round runs, then
the timed round. Figures: the round's wall time, its ratio to untraced,
and the cost per call over untraced ((traced - untraced) / N), medians
over the rounds. Say the load with the figures.

Usage: tests/bench/attached.py [--rounds R] [--calls N]
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import UTAP, fixture  # noqa: E402

COUNT = ("global c\nprobe syscall.* { c[name]++ }\n"
         "probe end { foreach (n in c- limit 2) printf(\"%s %d\\n\", n, c[n]) }\n")
BPF = "tracepoint:raw_syscalls:sys_enter /pid == PID/ { @[args->id] = count(); }"


def gate(n):
    g = subprocess.Popen([fixture("gate"), str(n)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    assert g.stdout.readline() == b"ready\n"
    return g


def round_time(g):
    t = time.perf_counter()
    g.stdin.write(b"\n")
    g.stdin.flush()
    line = g.stdout.readline()
    assert line.startswith(b"done"), line
    return time.perf_counter() - t


def attached(g):
    """Waits until a tracer holds `g` (TracerPid in its status)."""
    for _ in range(400):
        with open(f"/proc/{g.pid}/status") as f:
            if any(l.startswith("TracerPid:") and l.split()[1] != "0" for l in f):
                return True
        time.sleep(0.01)
    return False


def measure(n, tracer_argv, env=None, settle=0.3):
    g = gate(n)
    tracer = None
    if tracer_argv is not None:
        argv = [a.replace("PID", str(g.pid)) for a in tracer_argv]
        tracer = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env=env)
        if argv[0] == "bpftrace":
            time.sleep(settle * 6)  # no TracerPid: give it time to load
        elif not attached(g):
            raise RuntimeError(f"{argv[0]} did not attach")
        time.sleep(settle)
    round_time(g)  # warm-up: sites found and patched
    t = round_time(g)
    if tracer is not None:
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=60)
    g.stdin.close()
    g.wait()
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=1_000_000)
    a = ap.parse_args()
    n = a.calls
    ptrace_env = dict(os.environ, UTAP_INPROC="0")
    cases = {
        "untraced": (None, None, n),
        "utap -x (in process, SUD)": ([UTAP, "-e", COUNT, "-x", "PID"], None, n),
        "utap -x (ptrace route)": ([UTAP, "-e", COUNT, "-x", "PID"], ptrace_env, n // 10),
    }
    if shutil.which("strace"):
        cases["strace -f -c -p"] = (["strace", "-f", "-c", "-p", "PID"], None, n // 10)
    if shutil.which("bpftrace") and os.geteuid() == 0:
        cases["bpftrace raw_syscalls"] = (["bpftrace", "-e", BPF], None, n)
    times = {k: [] for k in cases}
    for _ in range(a.rounds):
        for name, (argv, env, calls) in cases.items():
            try:
                times[name].append((measure(calls, argv, env), calls))
            except RuntimeError as e:
                print(f"{name}: {e}", file=sys.stderr)
    base = statistics.median(t / c for t, c in times["untraced"])
    print(f"load average {os.getloadavg()[0]:.1f}; {n} getppid calls a round; medians of {a.rounds}")
    print(f"{'tracer':28} {'ns/call':>9} {'x untraced':>11} {'+ns/call':>9}")
    for name, runs in times.items():
        if not runs:
            continue
        per = statistics.median(t / c for t, c in runs)
        print(f"{name:28} {per * 1e9:9.0f} {per / base:11.2f} {(per - base) * 1e9:9.0f}")


if __name__ == "__main__":
    main()
