#!/usr/bin/env python3
"""Profiler overhead: the `profile` fixture doing a fixed amount of work
(main -> a -> b -> spin, 1 + THREADS threads) untraced, traced without
sampling (`probe end {}`: attached, no stops), and under
examples/profile.stp (timer.profile.hz(99): one stop per running thread
per tick, a CFI unwind each). Cases alternate round by round so machine
noise hits all alike; prints medians of the wall time.

Usage: tests/bench/profile.py [--rounds R] [--work K] [--threads T]
(K million loop steps per thread.) Needs a release build
(cargo build --release). Say the load (printed) with the figures.
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

import overhead

ROOT = overhead.ROOT
UTAP = overhead.UTAP
EXAMPLE = os.path.join(ROOT, "examples", "profile.stp")


def timed(argv):
    start = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", type=int, default=500)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    prog = f"{overhead.fixture('profile')} -{args.work} {args.threads}"
    idle = tempfile.NamedTemporaryFile("w", suffix=".stp", delete=False)
    idle.write("probe end { }\n")
    idle.close()
    cases = {
        "untraced": ["sh", "-c", f"exec {prog}"],
        "traced, no sampling": [UTAP, idle.name, "-c", prog],
        "profile.stp (99 Hz)": [UTAP, EXAMPLE, "-c", prog],
    }
    times = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, argv in cases.items():
            times[name].append(timed(argv))
    print(f"load: {os.getloadavg()[0]:.2f}; {1 + args.threads} thread(s), "
          f"{args.work}M steps each, {args.rounds} rounds")
    base = statistics.median(times["untraced"])
    for name, t in times.items():
        m = statistics.median(t)
        print(f"{name:22} median {m * 1000:8.1f} ms  ({m / base:.3f}x untraced)")


if __name__ == "__main__":
    main()
