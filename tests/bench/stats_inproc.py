#!/usr/bin/env python3
"""Statistics in the traced program (issue 27): cost per hit of
`probe syscall.getppid.return { s <<< $return }` (a scalar statistic) and of
`a["getppid"] <<< $return` printed as a log histogram, in process and on
the ptrace route (UTAP_INPROC=0), with `n++` in process for comparison,
on the `loop` fixture and on 4 threads of `mtsys`; then the choice the
in-process `<<<` makes: one shared copy updated with atomics (add for
count, sum and the bucket, compare-and-swap loops for min and max)
against a copy per thread with plain stores, 4 threads on this machine's
CPUs, in a few lines of C built here.

Cost per hit is the slope between k and k/10 hits (start-up drops out),
medians over the rounds, the cases alternating (function_inproc.slopes).

Usage: tests/bench/stats_inproc.py [--rounds R] [--calls N]
Say the load with the figures.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from function_inproc import slopes  # noqa: E402
from overhead import UTAP, fixture, script  # noqa: E402

# Shared atomics or per-thread copies: THREADS threads each add N values
# (a varying one, so min/max change now and then) to one statistic;
# prints ns per add.
COPIES = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
struct st { long count, sum, min, max, b[128]; } __attribute__((aligned(64)));
static struct st shared = { 0, 0, 1L << 62, -(1L << 62) };
static struct st mine[64];
static long n; static int per_thread;
static void keep_min(long *p, long v) { long o = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v < o && !__atomic_compare_exchange_n(p, &o, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)); }
static void keep_max(long *p, long v) { long o = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v > o && !__atomic_compare_exchange_n(p, &o, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)); }
static void *work(void *arg) {
  long id = (long)arg; struct st *s = &mine[id];
  for (long i = 0; i < n; i++) {
    long v = (i * 2654435761L) & 0xffff; int b = 64 - __builtin_clzl(v | 1);
    if (per_thread) { s->count++; s->sum += v; if (v < s->min) s->min = v;
      if (v > s->max) s->max = v; s->b[b]++; }
    else { __atomic_fetch_add(&shared.count, 1, __ATOMIC_SEQ_CST);
      __atomic_fetch_add(&shared.sum, v, __ATOMIC_SEQ_CST); keep_min(&shared.min, v);
      keep_max(&shared.max, v); __atomic_fetch_add(&shared.b[b], 1, __ATOMIC_SEQ_CST); }
  }
  return 0;
}
int main(int argc, char **argv) {
  int threads = atoi(argv[1]); n = atol(argv[2]); per_thread = atoi(argv[3]);
  pthread_t t[64]; struct timespec a, z; clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < threads; i++) pthread_create(&t[i], 0, work, (void *)i);
  for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
  clock_gettime(CLOCK_MONOTONIC, &z);
  printf("%.2f\n", ((z.tv_sec - a.tv_sec) * 1e9 + (z.tv_nsec - a.tv_nsec)) / (threads * (double)n));
  return 0;
}
"""


def copies(tmp, threads, n, rounds):
    """ns per add of the shared-atomics and per-thread variants (medians)."""
    src, exe = os.path.join(tmp, "copies.c"), os.path.join(tmp, "copies")
    with open(src, "w") as f:
        f.write(COPIES)
    subprocess.run(["cc", "-O2", "-pthread", "-o", exe, src], check=True)
    out = {}
    for mode, name in [("0", "shared, atomics"), ("1", "per-thread copies")]:
        v = sorted(float(subprocess.run([exe, str(threads), str(n), mode], check=True,
                                        capture_output=True, text=True).stdout)
                   for _ in range(rounds))
        out[name] = v[len(v) // 2]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2_000_000)
    ap.add_argument("--slow-calls", type=int, default=20_000)
    a = ap.parse_args()
    loop, mtsys = fixture("loop"), fixture("mtsys")
    scalar = script("global s\nprobe syscall.getppid.return { s <<< $return }\n"
                    "probe end { println(@count(s)) }\n")
    hist = script('global a\nprobe syscall.getppid.return { a["getppid"] <<< $return }\n'
                  'probe end { print(@hist_log(a["getppid"])) }\n')
    count = script("global n\nprobe syscall.getppid.return { n++ }\nprobe end { println(n) }\n")
    n, slow = a.calls, a.slow_calls
    tracer = dict(os.environ, UTAP_INPROC="0")

    def traced(s, prog=None):
        return lambda k: [UTAP, s, "-c", prog(k) if prog else f"{loop} {k}"]

    four = lambda k: f"{mtsys} 4 {k // 4}"  # noqa: E731
    cases = {
        "untraced": (lambda k: [loop, str(k)], None, n),
        "n++ in process (.return)": (traced(count), None, n),
        "s <<< $return in process": (traced(scalar), None, n),
        "s <<< $return, ptrace route": (traced(scalar), tracer, slow),
        "a[\"getppid\"] <<< $return, hist_log, in process": (traced(hist), None, n),
        "a[\"getppid\"] <<< $return, hist_log, ptrace": (traced(hist), tracer, slow),
        "untraced, 4 threads": (lambda k: [mtsys, "4", str(k // 4)], None, n),
        "s <<< $return in process, 4 threads": (traced(scalar, four), None, n),
    }
    per = slopes(cases, a.rounds)
    print(f"load {os.getloadavg()[0]:.1f}, {a.rounds} rounds, {n} calls, {os.cpu_count()} CPUs")
    print(f"{'case':44} {'ns/hit':>9} {'added ns':>9}")
    for c, v in per.items():
        base = per["untraced, 4 threads" if "4 threads" in c else "untraced"]
        print(f"{c:44} {v:9.1f} {v - base:9.1f}")
    tmp = tempfile.mkdtemp(prefix="utap-sbench-")
    for name, v in copies(tmp, 4, n, a.rounds).items():
        print(f"{'4 threads, ' + name:44} {v:9.2f} ns/add")
    for name, v in copies(tmp, 1, n, a.rounds).items():
        print(f"{'1 thread, ' + name:44} {v:9.2f} ns/add")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
