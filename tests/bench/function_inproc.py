#!/usr/bin/env python3
"""In-process function probes (issue 28): cost per hit of an entry probe,
and of an entry+return pair, whose handlers run in the program, against the same script on the ptrace
route (UTAP_INPROC=0), bpftrace's uprobe and uprobe+uretprobe, uftrace's
in-process hooks and the untraced program, in one alternating run.

The program is built here from a few lines of C: N calls of a noinline
`hot()`, once plain (utap, bpftrace, untraced) and once with -pg for
uftrace, which needs its mcount calls (its figure is over the untraced
-pg build). utap patches `hot`'s entry with a jump; on the -pg build the
jump displaces the mcount call, which the stub emulates, so utap also
runs on uftrace's binary: its entry+return pair there is over the
untraced -pg build too. Cost per hit is the slope between N and N/10 calls
(start-up and attach drop out), medians over the rounds; the ptrace
route runs on --slow-calls and bpftrace on N/10 and N/100 (their hits
cost microseconds).

Usage: tests/bench/function_inproc.py [--rounds R] [--calls N]
Say the load with the figures.

Measured 2026-11-29 10:48 UTC (load 5.4, 3 rounds; docs/internals/
dataplane.md): added per call, entry 32.9 ns, entry+return 71.9 ns (94.0
on the -pg build), bpftrace uprobe 5.6 us, uprobe+uretprobe 5.7 us,
uftrace 223.7 ns: 0.006x, 0.013x and 0.32x (goals 0.05x, 0.10x, 2x).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import UTAP, script  # noqa: E402

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long hot(long i) { return i + 1; }
int main(int argc, char **argv)
{
	long n = atol(argv[1]), s = 0;
	for (long i = 0; i < n; i++)
		s += hot(i);
	printf("%ld\n", s);
	return 0;
}
"""


def timed(argv, env=None):
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env)
    return time.perf_counter() - t


def slopes(cases, rounds):
    """ns per hit of each case (name -> (argv(k), env, k)): the slope between
    a run of k hits and one of k/10, so start-up drops out; the cases
    alternate, and each figure is the median over the rounds."""
    samples = {c: [] for c in cases}
    for _ in range(rounds):
        for name, (argv, env, k) in cases.items():
            big, small = timed(argv(k), env), timed(argv(k // 10), env)
            samples[name].append((big - small) / (k - k // 10) * 1e9)
    return {c: statistics.median(v) for c, v in samples.items()}


def added_of(case, per):
    """What a case adds per call over its untraced build (the -pg one for
    uftrace and utap on the -pg build)."""
    pg = case == "uftrace record" or (case.endswith(", -pg"))
    return per[case] - per["untraced -pg" if pg else "untraced"]


def build(dir):
    src, exe, pg = (os.path.join(dir, n) for n in ["hot.c", "hot", "hot_pg"])
    with open(src, "w") as f:
        f.write(PROGRAM)
    subprocess.run(["cc", "-O2", "-o", exe, src], check=True)
    subprocess.run(["cc", "-O2", "-pg", "-o", pg, src], check=True)
    return exe, pg


def bpftrace_usable():
    if shutil.which("bpftrace") is None or os.geteuid() != 0:
        return False
    if not os.path.isdir("/sys/kernel/tracing/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"],
                       stderr=subprocess.DEVNULL)
    return subprocess.run(["bpftrace", "-e", "BEGIN { exit(); }"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2_000_000)
    ap.add_argument("--slow-calls", type=int, default=20_000)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="utap-fbench-")
    exe, pg = build(tmp)
    os.chdir(tmp)  # the -pg build writes gmon.out where it runs
    entry = script('global n\nprobe process("%s").function("hot") { n++ }\n'
                   'probe end { println(n) }\n' % exe)
    pair_script = script('global n, s\nprobe process("%s").function("hot") { n++ }\n'
                         'probe process("%s").function("hot").return { s += $return }\n'
                         'probe end { println(n, " ", s) }\n' % (exe, exe))
    pg_pair = script('global n, s\nprobe process("%s").function("hot") { n++ }\n'
                     'probe process("%s").function("hot").return { s += $return }\n'
                     'probe end { println(n, " ", s) }\n' % (pg, pg))
    n, slow = a.calls, a.slow_calls
    tracer_env = dict(os.environ, UTAP_INPROC="0")
    # name: (argv for k calls, env, calls)
    cases = {
        "untraced": (lambda k: [exe, str(k)], None, n),
        "untraced -pg": (lambda k: [pg, str(k)], None, n),
        "utap in process": (lambda k: [UTAP, entry, "-c", f"{exe} {k}"], None, n),
        "utap ptrace route": (lambda k: [UTAP, entry, "-c", f"{exe} {k}"], tracer_env, slow),
        "utap in process, entry+return": (
            lambda k: [UTAP, pair_script, "-c", f"{exe} {k}"], None, n),
        "utap ptrace route, entry+return": (
            lambda k: [UTAP, pair_script, "-c", f"{exe} {k}"], tracer_env, slow),
        "utap in process, entry+return, -pg": (
            lambda k: [UTAP, pg_pair, "-c", f"{pg} {k}"], None, n),
    }
    if shutil.which("uftrace"):
        data = os.path.join(tmp, "uftrace.data")
        cases["uftrace record"] = (
            lambda k: ["uftrace", "record", "--no-libcall", "-d", data, pg, str(k)], None, n)
    if bpftrace_usable():
        up = 'uprobe:%s:hot { @n = count(); }' % exe
        pair = up + ' uretprobe:%s:hot { @r = count(); }' % exe
        cases["bpftrace uprobe"] = (lambda k: ["bpftrace", "-e", up, "-c", f"{exe} {k}"],
                                    None, n // 10)
        cases["bpftrace uprobe+uretprobe"] = (
            lambda k: ["bpftrace", "-e", pair, "-c", f"{exe} {k}"], None, n // 10)
    per = slopes(cases, a.rounds)
    print(f"load {os.getloadavg()[0]:.1f}, {a.rounds} rounds, {n} calls")
    print(f"{'case':36} {'ns/call':>9} {'added ns':>9}")
    for c, v in per.items():
        print(f"{c:36} {v:9.1f} {added_of(c, per):9.1f}")
    added = {c: added_of(c, per) for c in per}
    # An entry probe against an entry probe; an entry+return pair against
    # a pair (uftrace records both).
    ratios = [("utap in process", "bpftrace uprobe"),
              ("utap in process, entry+return", "bpftrace uprobe+uretprobe"),
              ("utap in process, entry+return", "uftrace record"),
              ("utap in process, entry+return, -pg", "uftrace record")]
    for ours, peer in ratios:
        if peer in added and added[peer] > 0:
            print(f"added cost, {ours} / {peer}: {added[ours] / added[peer]:.3f}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
