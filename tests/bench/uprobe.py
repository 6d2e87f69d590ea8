#!/usr/bin/env python3
"""Function-probe benchmark (issue 13): cost per hit of an entry probe and of
an entry+return pair, against a syscall stop, on the same machine.

Workloads: `ufuncs hot N` (N calls of a probed function, one thread) and the
`loop` fixture (N getppid calls). Cost per hit = (traced - untraced) / N,
medians over rounds that alternate between the cases.

Usage: tests/bench/uprobe.py [--rounds R] [--calls N] [--before UTAP]
--before runs a second utap binary (e.g. main's) in the same alternating
rounds, so a change is measured against the old one under the same load.
Needs a release build (cargo build --release). Say the load with the figures.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import UTAP, fixture, script  # noqa: E402

ENTRY = 'probe process("{exe}").function("hot") {{ }}\n'
PAIR = ENTRY + 'probe process("{exe}").function("hot").return {{ }}\n'
SYSCALL = "probe syscall.getppid { }\n"


def timed(argv):
    env = None
    if argv and argv[0].startswith("UTAP_"):
        name, value = argv[0].split("=", 1)
        env, argv = dict(os.environ, **{name: value}), argv[1:]
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=50000)
    ap.add_argument("--before", help="another utap binary to compare with")
    a = ap.parse_args()
    exe, loop, n = fixture("ufuncs"), fixture("loop"), a.calls
    entry, pair = script(ENTRY.format(exe=exe)), script(PAIR.format(exe=exe))
    sysc = script(SYSCALL)
    cases = {
        "hot untraced": [exe, "hot", str(n)],
        "hot entry": [UTAP, entry, "-c", f"{exe} hot {n}"],
        "hot entry+return": [UTAP, pair, "-c", f"{exe} hot {n}"],
        "loop untraced": [loop, str(n)],
        # A ptrace syscall stop: an entry-only getppid probe would otherwise
        # be served by a seccomp notification, no stop at all.
        "loop syscall stop": ["UTAP_NOTIFY=0", UTAP, sysc, "-c", f"{loop} {n}"],
    }
    if a.before:
        cases["before entry"] = [a.before, entry, "-c", f"{exe} hot {n}"]
        cases["before entry+return"] = [a.before, pair, "-c", f"{exe} hot {n}"]
    times = {k: [] for k in cases}
    for _ in range(a.rounds):
        for k, argv in cases.items():
            times[k].append(timed(argv))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"load {os.getloadavg()[0]:.2f}, {n} calls, {a.rounds} rounds (medians)")
    per = lambda t, base: (med[t] - med[base]) / n * 1e6  # noqa: E731
    sys_stop = per("loop syscall stop", "loop untraced")
    rows = [("entry probe", "hot entry"), ("entry+return", "hot entry+return")]
    if a.before:
        rows += [("before: entry", "before entry"), ("before: pair", "before entry+return")]
    for label, t in rows:
        us = per(t, "hot untraced")
        print(f"{label:14} {us:6.2f} us/hit  ({us / sys_stop:.2f}x a syscall stop)")
    print(f"{'syscall stop':14} {sys_stop:6.2f} us/hit")


if __name__ == "__main__":
    main()
