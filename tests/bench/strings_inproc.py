#!/usr/bin/env python3
"""Strings read in the program (issue 27): an opensnoop-like script printing
every openat's `filename` (`user_string_quoted`, read by the safe load in
the program), against the same script on the ptrace route (UTAP_INPROC=0),
the same script without the string, `strace -f -e trace=openat`, bpftrace's
`sys_enter_openat` with `str(args->filename)` (when it can run here) and
the untraced loop, in one alternating run.

Per case, medians over the rounds: wall time of `openloop N`, its ratio to
untraced, the cost per call (slope between `openloop N` and `openloop
N/10`), and the share of the N lines printed (a line every ~1.5 µs from
one thread is more than the program's rings always carry; the rest is
counted as lost, as SystemTap's transport failures are).

Usage: tests/bench/strings_inproc.py [--rounds R] [--calls N]
Say the load with the figures.
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

SNOOP = script('probe syscall.openat { printf("%s %d %s\\n", execname(), pid(), filename) }\n')
NO_STRING = script('probe syscall.openat { printf("%s %d\\n", execname(), pid()) }\n')
BPF = ('tracepoint:syscalls:sys_enter_openat /comm == "openloop"/ '
       '{ printf("%s %d %s\\n", comm, pid, str(args->filename)); }')
MARK = b"some-file-name"


def timed(argv, env=None):
    """Seconds, and the lines naming the file."""
    t = time.perf_counter()
    out = subprocess.run(argv, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=env).stdout
    return time.perf_counter() - t, out.count(MARK)


def bpftrace_ok(loop):
    if shutil.which("bpftrace") is None or os.geteuid() != 0:
        return False
    if not os.path.isdir("/sys/kernel/tracing/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"],
                       stderr=subprocess.DEVNULL)
    probe = ["bpftrace", "-e", BPF, "-c", f"{loop} 1"]
    return subprocess.run(probe, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=200_000)
    a = ap.parse_args()
    loop, n = fixture("openloop"), a.calls
    off = dict(os.environ, UTAP_INPROC="0")
    cases = {
        "untraced": (lambda k: [loop, str(k)], None),
        "utap in process": (lambda k: [UTAP, SNOOP, "-c", f"{loop} {k}"], None),
        "utap, no string": (lambda k: [UTAP, NO_STRING, "-c", f"{loop} {k}"], None),
        "utap ptrace route": (lambda k: [UTAP, SNOOP, "-c", f"{loop} {k}"], off),
    }
    if shutil.which("strace"):
        cases["strace -e openat"] = (
            lambda k: ["strace", "-f", "-qq", "-e", "trace=openat", "-o", "/dev/stdout",
                       loop, str(k)], None)
    if bpftrace_ok(loop):
        cases["bpftrace str()"] = (lambda k: ["bpftrace", "-e", BPF, "-c", f"{loop} {k}"], None)
    wall = {c: [] for c in cases}
    slope = {c: [] for c in cases}
    shown = {c: [] for c in cases}
    load = os.getloadavg()
    for _ in range(a.rounds):
        for name, (cmd, env) in cases.items():
            (big, lines), (small, _) = timed(cmd(n), env), timed(cmd(n // 10), env)
            wall[name].append(big)
            slope[name].append((big - small) / (n - n // 10))
            shown[name].append(lines / n)
    base_wall = statistics.median(wall["untraced"])
    base_call = statistics.median(slope["untraced"])
    print(f"openloop {n}, {a.rounds} alternating rounds, "
          f"load {load[0]:.2f} -> {os.getloadavg()[0]:.2f}")
    print(f"{'case':20} {'wall s':>8} {'/untraced':>10} {'per call':>10} {'lines':>8}")
    for name in cases:
        w, c = statistics.median(wall[name]), statistics.median(slope[name])
        # The untraced loop and the script without the path print none.
        prints = name not in ("untraced", "utap, no string")
        lines = f"{100 * statistics.median(shown[name]):.0f}%" if prints else ""
        print(f"{name:20} {w:8.3f} {w / base_wall:10.2f} {c * 1e9:8.0f}ns {lines:>8}")
    over = {c: statistics.median(slope[c]) - base_call for c in cases if c != "untraced"}
    for peer in ("bpftrace str()", "utap ptrace route", "strace -e openat"):
        if peer in over and over[peer] > 0:
            print(f"added cost per call, in process / {peer}: "
                  f"{over['utap in process'] / over[peer]:.3f}")


if __name__ == "__main__":
    main()
