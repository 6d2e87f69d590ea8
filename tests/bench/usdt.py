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

With --per-hit (issue 28), instead: the cost per hit of a marker probe
on tests/fixtures/usdt/usdt_hot.c's hot:tick (a marker in a loop, one
thread), counted with its first argument summed, in process (the
marker's nop patched with a jump), on the ptrace route (UTAP_INPROC=0),
and by bpftrace's `usdt:` probe (a kernel uprobe on the nop), against the
untraced program, in one alternating run. Per hit is the slope between
N and N/10 hits (start-up and attach drop out), medians over the rounds;
the ptrace route and bpftrace run on --slow-hits (their hits cost
microseconds).

Usage: tests/bench/usdt.py [--rounds R] [--per-hit [--hits N] [--slow-hits M]]
Needs a release build (cargo build --release). Say the load with the figures.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import UTAP, fixture, script  # noqa: E402
from function_inproc import bpftrace_usable, slopes, timed  # noqa: E402

PY = "/usr/bin/python3.11"
MARK = 'probe process("%s").mark("function__entry") { }\n' % PY
BEGIN = "probe process.begin { }\n"


def per_hit(a):
    exe = fixture("usdt_hot")
    probe = script('global n, s\nprobe process("%s").mark("tick") { n++; s += $arg1 }\n'
                   'probe end { println(n, " ", s) }\n' % exe)
    tracer_env = dict(os.environ, UTAP_INPROC="0")
    n, slow = a.hits, a.slow_hits
    # name: (argv for k hits, env, hits)
    cases = {
        "untraced": (lambda k: [exe, "1", str(k)], None, n),
        "utap in process": (lambda k: [UTAP, probe, "-c", f"{exe} 1 {k}"], None, n),
        "utap ptrace route": (lambda k: [UTAP, probe, "-c", f"{exe} 1 {k}"], tracer_env, slow),
    }
    if bpftrace_usable():
        bt = "usdt:%s:hot:tick { @n = count(); @s = sum(arg0); }" % exe
        cases["bpftrace usdt"] = (lambda k: ["bpftrace", "-e", bt, "-c", f"{exe} 1 {k}"],
                                  None, slow)
    per = slopes(cases, a.rounds)
    base = per["untraced"]
    print(f"load {os.getloadavg()[0]:.2f}, {a.rounds} rounds, {n} hits ({slow} slow)")
    print(f"{'case':20} {'ns/hit':>9} {'added ns':>9}")
    for c, v in per.items():
        print(f"{c:20} {v:9.1f} {v - base:9.1f}")
    ours = per["utap in process"] - base
    for peer in ["utap ptrace route", "bpftrace usdt"]:
        if peer in per and per[peer] - base > 0:
            print(f"added cost, utap in process / {peer}: {ours / (per[peer] - base):.4f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--per-hit", action="store_true")
    ap.add_argument("--hits", type=int, default=20_000_000)
    ap.add_argument("--slow-hits", type=int, default=100_000)
    a = ap.parse_args()
    if a.per_hit:
        per_hit(a)
        return
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
