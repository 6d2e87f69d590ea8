#!/usr/bin/env python3
"""DWARF target variables read in the program (issue 28): cost per hit of
a function entry probe that sums a parameter (`$i`) and a field through a
pointer (`$p->x`), in the program and on the ptrace route, against
bpftrace's uprobe reading the same (`arg1`, and the field through a cast
of `arg0`) and the untraced program, in one alternating run.

The program is built here, -g -O2 (both parameters in registers: only
the field is read from memory) and -g -O0 (parameters on the stack: every
value is a read of the program's memory, through the data plane's safe
load). Cost per hit is the slope between N and N/10 calls, medians over
the rounds (`function_inproc.slopes`).

Usage: tests/bench/dwarf_inproc.py [--rounds R] [--calls N]
Say the load with the figures.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import UTAP, script  # noqa: E402
from function_inproc import bpftrace_usable, slopes  # noqa: E402

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
struct pt { long x, y; };
__attribute__((noinline)) long hot(struct pt *p, long i) { return p->x + i; }
int main(int argc, char **argv)
{
	long n = atol(argv[1]), s = 0;
	struct pt q = { 3, 4 };
	for (long i = 0; i < n; i++)
		s += hot(&q, i);
	printf("%ld\n", s);
	return 0;
}
"""


def build(dir):
    src = os.path.join(dir, "hot.c")
    with open(src, "w") as f:
        f.write(PROGRAM)
    out = {}
    for opt in ["O2", "O0"]:
        out[opt] = os.path.join(dir, f"hot_{opt}")
        subprocess.run(["cc", "-g", f"-{opt}", "-o", out[opt], src], check=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2_000_000)
    ap.add_argument("--slow-calls", type=int, default=20_000)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="utap-dbench-")
    exe = build(tmp)
    n, slow = a.calls, a.slow_calls
    tracer_env = dict(os.environ, UTAP_INPROC="0")
    cases = {}
    for opt, path in exe.items():
        s = script('global n, f\nprobe process("%s").function("hot") { n += $i; f += $p->x }\n'
                   'probe end { println(n, " ", f) }\n' % path)
        cases[f"untraced -{opt}"] = (lambda k, p=path: [p, str(k)], None, n)
        cases[f"utap in process -{opt}"] = (
            lambda k, s=s, p=path: [UTAP, s, "-c", f"{p} {k}"], None, n)
        cases[f"utap ptrace route -{opt}"] = (
            lambda k, s=s, p=path: [UTAP, s, "-c", f"{p} {k}"], tracer_env, slow)
    if bpftrace_usable():
        bt = ('struct pt { long x; long y; }\n'
              'uprobe:%s:hot { @n = sum(arg1); @f = sum(((struct pt *)arg0)->x); }' % exe["O2"])
        cases["bpftrace uprobe -O2"] = (
            lambda k: ["bpftrace", "-e", bt, "-c", f"{exe['O2']} {k}"], None, n // 10)
    per = slopes(cases, a.rounds)
    print(f"load {os.getloadavg()[0]:.1f}, {a.rounds} rounds, {n} calls")
    print(f"{'case':28} {'ns/call':>9} {'added ns':>9}")
    for c, v in per.items():
        base = per["untraced -O0" if c.endswith("-O0") else "untraced -O2"]
        print(f"{c:28} {v:9.1f} {v - base:9.1f}")
    bt = per.get("bpftrace uprobe -O2")
    if bt:
        for opt in ["O2", "O0"]:
            ours = per[f"utap in process -{opt}"] - per[f"untraced -{opt}"]
            print(f"added cost, utap in process -{opt} / bpftrace uprobe: "
                  f"{ours / (bt - per['untraced -O2']):.3f}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
