#!/usr/bin/env python3
"""Daemon benchmark (issue 17): the cost of a traced syscall with one and
two daemon sessions against a standalone `utap -x`.

Workload: the `gate` fixture, which makes N getppid calls each time a line
arrives on its stdin. Every case traces a fresh gate with `-x` (so every
case pays the same PTRACE_SYSCALL stops), waits for "attached", then times
phases (one line in, "done" out). Cases alternate round by round so that
machine noise hits them alike. Prints the median phase time, the cost per
call over the untraced gate, and the ratio to standalone.

Usage: tests/bench/daemon.py [--rounds R] [--calls N]
Needs: a release build (cargo build --release). Say the load (printed).
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import fixture  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UTAP = os.path.join(ROOT, "target", "release", "utap")

COUNT = """global n
probe process.begin { println("attached") }
probe process.syscall { if ($syscall == 110) n++ }
probe end { printf("%d\\n", n) }
"""


class Gate:
    def __init__(self, calls):
        self.p = subprocess.Popen([fixture("gate"), str(calls)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, bufsize=1)
        assert self.p.stdout.readline() == "ready\n"

    def phase(self):
        t = time.perf_counter()
        self.p.stdin.write("\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        assert line.startswith("done"), line
        return time.perf_counter() - t

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def client(args, pid):
    p = subprocess.Popen([UTAP] + args + ["-x", str(pid), "-e", COUNT],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "attached\n", p.stderr.read()
    return p


def case(kind, calls, phases, socket):
    gate = Gate(calls)
    clients = []
    if kind == "standalone":
        clients.append(client(["--no-daemon"], gate.p.pid))
    elif kind.startswith("daemon"):
        for _ in range(int(kind[-1])):
            clients.append(client([f"--connect={socket}"], gate.p.pid))
    gate.phase()  # warm-up
    times = [gate.phase() for _ in range(phases)]
    gate.close()
    for c in clients:
        out, err = c.communicate(timeout=30)
        assert out.strip() == str(calls * (phases + 1)), (kind, out, err)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--phases", type=int, default=3)
    a = ap.parse_args()
    d = tempfile.mkdtemp()
    socket = os.path.join(d, "utapd.sock")
    daemon = subprocess.Popen([UTAP, "--daemon", "--socket", socket], stderr=subprocess.DEVNULL)
    while not os.path.exists(socket):
        time.sleep(0.01)
    kinds = ["untraced", "standalone", "daemon1", "daemon2"]
    results = {k: [] for k in kinds}
    try:
        for _ in range(a.rounds):
            for k in kinds:
                results[k].append(case(k, a.calls, a.phases, socket))
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)
    print(f"load: {os.getloadavg()[0]:.2f}; {a.calls} getppid calls per phase, "
          f"{a.rounds} rounds x {a.phases} phases (medians)")
    base = statistics.median(results["untraced"])
    std = statistics.median(results["standalone"]) - base
    for k in kinds:
        m = statistics.median(results[k])
        per = (m - base) / a.calls * 1e6
        ratio = f"{(m - base) / std:.2f}x standalone" if k != "untraced" and std > 0 else ""
        print(f"{k:12} {m * 1000:9.1f} ms   {per:7.2f} us/call over untraced   {ratio}")


if __name__ == "__main__":
    main()
