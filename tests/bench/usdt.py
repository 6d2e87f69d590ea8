#!/usr/bin/env python3
"""USDT benchmark (issue 14): start-up with python3's markers resolved.

Times, medians over alternating rounds:
  python alone          python3.11 -c pass, untraced
  utap, no markers      utap with `probe process.begin {}` over the same command
  utap, markers         utap with a function__entry marker probe (the notes of
                        the 7 MB executable read at elaboration and at exec,
                        the breakpoint and the semaphore placed)
  -L markers            utap -L 'process("/usr/bin/python3.11").mark("*")'
The start-up cost of markers = "utap, markers" - "utap, no markers".

Usage: tests/bench/usdt.py [--rounds R]
Needs a release build (cargo build --release). Say the load with the figures.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import UTAP, script  # noqa: E402

PY = "/usr/bin/python3.11"
MARK = 'probe process("%s").mark("function__entry") { }\n' % PY
BEGIN = "probe process.begin { }\n"


def timed(argv):
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=11)
    a = ap.parse_args()
    cmd = f"{PY} -c pass"
    cases = {
        "python alone": [PY, "-c", "pass"],
        "utap, no markers": [UTAP, script(BEGIN), "-c", cmd],
        "utap, markers": [UTAP, script(MARK), "-c", cmd],
        "-L markers": [UTAP, "-L", f'process("{PY}").mark("*")'],
    }
    times = {k: [] for k in cases}
    for _ in range(a.rounds):
        for k, argv in cases.items():
            times[k].append(timed(argv))
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print(f"load {os.getloadavg()[0]:.2f}, {a.rounds} rounds (medians)")
    for k, ms in med.items():
        print(f"{k:18} {ms:7.1f} ms")
    print(f"{'markers start-up':18} {med['utap, markers'] - med['utap, no markers']:7.1f} ms")


if __name__ == "__main__":
    main()
