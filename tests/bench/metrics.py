#!/usr/bin/env python3
"""What `--metrics` scrapes cost the traced program (issue 29 point 3).

Three cases, alternating round by round so that machine noise hits them
alike: the `loop` fixture untraced; traced with `--metrics` and nobody
scraping; traced with `--metrics` and a client scraping back to back for
the whole run. Prints the median wall time of each, the ratios, and the
scrapes made and their median latency.

Usage: tests/bench/metrics.py [--rounds R] [--calls N] [--utap PATH]...
(--utap, repeatable: the builds to measure, e.g. this one and main's, in
the same rounds; default target/release/utap.) Needs a release build.
Say the load (printed) with the figures.
"""
import argparse
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import fixture  # noqa: E402

# A typical exporter: counts per syscall name, a size histogram, and a
# table of 2,000 entries (a per-key gauge: what makes a scrape's text long).
SCRIPT = """global calls, sizes, table
probe begin { for (i = 0; i < 2000; i++) table[i] = i }
probe syscall.* { calls[name]++ }
probe syscall.write { sizes <<< count }
probe end { print(@hist_log(sizes)) }
"""


def scrape_loop(addr, stop, latencies):
    """GETs /metrics back to back until `stop` is set."""
    host, port = addr.rsplit(":", 1)
    while not stop.is_set():
        t = time.perf_counter()
        try:
            c = http.client.HTTPConnection(host, int(port), timeout=10)
            c.request("GET", "/metrics")
            r = c.getresponse()
            r.read()
            c.close()
            if r.status == 200:
                latencies.append(time.perf_counter() - t)
        except OSError:
            time.sleep(0.001)


def traced(utap, script, loop, calls, scrape):
    """Wall time of one traced run; the scrape latencies if `scrape`."""
    t = time.perf_counter()
    p = subprocess.Popen(
        [utap, "--metrics", "127.0.0.1:0", script, "-c", f"{loop} {calls}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline().strip()
    prefix = "utap: serving metrics at http://"
    if not line.startswith(prefix):
        sys.exit(f"unexpected first line from utap: {line!r}")
    addr = line[len(prefix):].removesuffix("/metrics")
    stop, latencies = threading.Event(), []
    scraper = None
    if scrape:
        scraper = threading.Thread(target=scrape_loop, args=(addr, stop, latencies))
        scraper.start()
    p.stderr.read()
    rc = p.wait()
    elapsed = time.perf_counter() - t
    stop.set()
    if scraper:
        scraper.join()
    if rc != 0:
        sys.exit(f"utap exited {rc}")
    return elapsed, latencies


def untraced(loop, calls):
    t = time.perf_counter()
    subprocess.run([loop, str(calls)], check=True)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--utap", action="append",
                    help="a build to measure (repeat to compare builds in the same rounds)")
    a = ap.parse_args()
    builds = a.utap or [os.path.join(ROOT, "target", "release", "utap")]
    loop = fixture("loop")
    with tempfile.NamedTemporaryFile("w", suffix=".stp", delete=False) as f:
        f.write(SCRIPT)
        script = f.name
    untraced_times = []
    times = {b: ([], []) for b in builds}
    lat = {b: [] for b in builds}
    for _ in range(a.rounds):
        untraced_times.append(untraced(loop, a.calls))
        for b in builds:
            times[b][0].append(traced(b, script, loop, a.calls, False)[0])
            t, l = traced(b, script, loop, a.calls, True)
            times[b][1].append(t)
            lat[b].extend(l)
    os.unlink(script)
    print(f"workload: loop {a.calls}, {a.rounds} rounds alternating; load {os.getloadavg()[0]:.2f}")
    base = statistics.median(untraced_times)
    print(f"  untraced {base * 1000:.1f} ms")
    for b in builds:
        quiet, scraped = (statistics.median(v) for v in times[b])
        print(f"utap: {b}")
        print(f"  traced, no scrapes           {quiet * 1000:8.1f} ms  ({quiet / base:.1f}x untraced)")
        print(f"  traced, scraped back to back {scraped * 1000:8.1f} ms  ({scraped / base:.1f}x untraced)")
        print(f"  scraped / not scraped: {scraped / quiet:.3f}")
        if lat[b]:
            print(f"  scrapes: {len(lat[b])} in all, median {statistics.median(lat[b]) * 1000:.1f} ms, "
                  f"max {max(lat[b]) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
