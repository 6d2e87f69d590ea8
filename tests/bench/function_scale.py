#!/usr/bin/env python3
"""In-process function probes (issue 28), the goals beside the per-hit
cost (function_inproc.py):

* Threads: throughput of 4 threads calling a probed `hot()` against one
  thread making as many calls (4 x N/4 against 1 x N), untraced and with
  counting handlers in the program: `n++` (a long global, counted in
  each thread's copy), `a[tid()]++` (an array: one slot per thread) and
  `s <<< 1` (a statistic). Goal: at least 1.8x on 2 CPUs. The program
  times its own loops from a barrier the threads wait at once created to
  the last loop's end, so start-up, attach, the clone stops and the exit
  stops drop out. One thread runs pinned
  to each CPU in turn (taskset) and its throughput is the mean of the
  two: this VM's two CPUs are not equally fast when the host shares one
  of them (memory-bound code ran 2x slower on cpu0 than on cpu1 on
  2026-11-29), and an unpinned single thread lands on either.
* python3: `bytearray(1000)` in a loop (a malloc and a free each) with
  entry and return probes on libc's malloc and free counting in the
  program, against the untraced loop. Goal: at most 1.5x. python3 times
  its loop itself.

Medians over the rounds, cases alternating. As root every run is under
SCHED_FIFO (chrt -f 50): other builds share this machine, and a loaded
machine gives 4 threads less than 2 CPUs; the figures say so.

Usage: tests/bench/function_scale.py [--rounds R] [--calls N] [--py-loops N]
Say the load with the figures.

Measured 2026-11-29 (docs/internals/dataplane.md): 10:50 UTC, load 7.1,
5 rounds: 4T/1T untraced 1.97, n++ 1.75, a[tid()]++ 1.83, s <<< 1 1.87
(main: n++ and s <<< 1 below 1.0); python3 1.40x untraced. 10:56-10:58,
load 9, three runs of 9 rounds: untraced 1.90/1.49/1.82, n++
1.73/1.51/1.69, a[tid()]++ 1.76/1.78/1.81, s <<< 1 1.81/1.97/1.66;
python3 1.40x/1.46x/1.20x. At that load a figure moves by +-0.2 or more.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import UTAP, script  # noqa: E402

PROGRAM = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) long hot(long i) { return i + 1; }
static long n; static pthread_barrier_t go; static struct timespec end[64];
static void *work(void *arg) {
	long s = 0;
	pthread_barrier_wait(&go);
	for (long i = 0; i < n; i++)
		s += hot(i);
	clock_gettime(CLOCK_MONOTONIC, &end[(long)arg]);
	return (void *)s;
}
int main(int argc, char **argv) {
	int t = atoi(argv[1]); pthread_t th[64]; struct timespec a;
	n = atol(argv[2]);
	pthread_barrier_init(&go, 0, t + 1);
	for (long i = 0; i < t; i++)
		pthread_create(&th[i], 0, work, (void *)i);
	clock_gettime(CLOCK_MONOTONIC, &a);
	pthread_barrier_wait(&go);
	long last = 0;
	for (long i = 0; i < t; i++) {
		pthread_join(th[i], 0);
		long ns = (end[i].tv_sec - a.tv_sec) * 1000000000L + end[i].tv_nsec - a.tv_nsec;
		last = ns > last ? ns : last;
	}
	printf("%ld\n", last);
	return 0;
}
"""

PY_LOOP = ("import time\nt = time.perf_counter()\nfor i in range({n}): bytearray(1000)\n"
           "print(int((time.perf_counter() - t) * 1e9))")

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def ns_of(argv):
    """The first line of the run's output that is a number: its own
    timing, in ns (utap's end probe prints after the program)."""
    pre = ["chrt", "-f", "50"] if os.geteuid() == 0 else []
    out = subprocess.run(pre + argv, check=True, capture_output=True, text=True).stdout
    return next(int(line) for line in out.split() if line.isdigit())


def medians(cases, rounds):
    samples = {c: [] for c in cases}
    for _ in range(rounds):
        for name, argv in cases.items():
            samples[name].append(ns_of(argv))
    return {c: statistics.median(v) for c, v in samples.items()}


def threads(exe, calls, rounds):
    handlers = {
        "untraced": None,
        "n++": "global n\nprobe process(\"%s\").function(\"hot\") { n++ }\n"
               "probe end { println(n) }\n",
        "a[tid()]++": "global a\nprobe process(\"%s\").function(\"hot\") { a[tid()]++ }\n"
                      "probe end { println(a[0]) }\n",
        "s <<< 1": "global s\nprobe process(\"%s\").function(\"hot\") { s <<< 1 }\n"
                   "probe end { println(@count(s)) }\n",
    }
    cases = {}
    for name, text in handlers.items():
        pre = [] if text is None else [UTAP, script(text % exe), "-c"]
        join = (lambda a: a) if text is None else (lambda a: [" ".join(a)])
        for cpu in ["0", "1"]:
            cases[(name, cpu)] = ["taskset", "-c", cpu] + pre + join([exe, "1", str(calls)])
        cases[(name, 4)] = pre + join([exe, "4", str(calls // 4)])
    per = medians(cases, rounds)
    print(f"threads: load {os.getloadavg()[0]:.1f}, {rounds} rounds, {calls} calls in all")
    print(f"{'handler':12} {'1T cpu0 ms':>11} {'1T cpu1 ms':>11} {'4T ms':>8} {'4T/1T':>6}")
    for name in handlers:
        c0, c1, four = per[(name, "0")], per[(name, "1")], per[(name, 4)]
        # One thread's throughput: the mean of the two CPUs' (this VM's
        # CPUs are not always equally fast: the host shares them).
        one = 2 / (1 / c0 + 1 / c1)
        print(f"{name:12} {c0 / 1e6:11.1f} {c1 / 1e6:11.1f} {four / 1e6:8.1f} {one / four:6.2f}")


def python(loops, rounds):
    text = "".join(
        f"global {f}_e, {f}_r\n"
        f"probe process(\"{LIBC}\").function(\"{f}\") {{ {f}_e++ }}\n"
        f"probe process(\"{LIBC}\").function(\"{f}\").return {{ {f}_r++ }}\n"
        for f in ["malloc", "free"])
    text += "probe end { println(malloc_e, \" \", malloc_r, \" \", free_e, \" \", free_r) }\n"
    code = PY_LOOP.format(n=loops)
    # Debian's python3, not a version manager's shim found first on PATH
    # (another interpreter build, started by a shell script).
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"
    cases = {
        "untraced": [py, "-c", code],
        "malloc+free entry+return in the program": [UTAP, script(text), "-c",
                                                    f"{py} -c '{code}'"],
    }
    per = medians(cases, rounds)
    base = per["untraced"]
    print(f"{py}: load {os.getloadavg()[0]:.1f}, {rounds} rounds, {loops} bytearray(1000)")
    for c, v in per.items():
        print(f"{c:42} {v / 1e6:9.1f} ms {v / base:6.2f}x")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=8_000_000)
    ap.add_argument("--py-loops", type=int, default=1_000_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="utap-fscale-") as tmp:
        src, exe = os.path.join(tmp, "thr.c"), os.path.join(tmp, "thr")
        with open(src, "w") as f:
            f.write(PROGRAM)
        subprocess.run(["cc", "-O2", "-pthread", "-o", exe, src], check=True)
        threads(exe, a.calls, a.rounds)
    python(a.py_loops, a.rounds)


if __name__ == "__main__":
    main()
