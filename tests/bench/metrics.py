#!/usr/bin/env python3
"""What `--metrics` scrapes cost the traced program (issue 29 point 3).

Three cases, alternating round by round so that machine noise hits them
alike: the `loop` fixture untraced; traced with `--metrics` and nobody
scraping; traced with `--metrics` and a client scraping back to back for
the whole run. Prints the median wall time of each, the ratios, and the
scrapes made and their median latency.

Usage: tests/bench/metrics.py [--rounds R] [--calls N] [--utap PATH]
(--utap: another build to compare, e.g. main's.) Needs a release build.
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

# A typical exporter: counts per syscall name, a size histogram, and a
# table of 2,000 entries (a per-key gauge: what makes a scrape's text long).
SCRIPT = """global calls, sizes, table
probe begin { for (i = 0; i < 2000; i++) table[i] = i }
probe syscall.* { calls[name]++ }
probe syscall.write { sizes <<< count }
probe end { print(@hist_log(sizes)) }
"""


def fixture(name):
    """Path of a compiled fixture from the release build's build-script output."""
    build = os.path.join(ROOT, "target", "release", "build")
    for d in sorted(os.listdir(build)):
        p = os.path.join(build, d, "out", "fixtures", name)
        if os.path.exists(p):
            return p
    sys.exit(f"fixture {name} not found: run cargo build --release first")


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
    ap.add_argument("--utap", default=os.path.join(ROOT, "target", "release", "utap"))
    a = ap.parse_args()
    loop = fixture("loop")
    with tempfile.NamedTemporaryFile("w", suffix=".stp", delete=False) as f:
        f.write(SCRIPT)
        script = f.name
    times = {"untraced": [], "traced, no scrapes": [], "traced, scraped back to back": []}
    lat = []
    for _ in range(a.rounds):
        times["untraced"].append(untraced(loop, a.calls))
        times["traced, no scrapes"].append(traced(a.utap, script, loop, a.calls, False)[0])
        t, l = traced(a.utap, script, loop, a.calls, True)
        times["traced, scraped back to back"].append(t)
        lat.extend(l)
    os.unlink(script)
    print(f"utap: {a.utap}")
    print(f"workload: loop {a.calls}, {a.rounds} rounds alternating; load {os.getloadavg()[0]:.2f}")
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        print(f"  {k:30} {v * 1000:8.1f} ms")
    quiet = med["traced, no scrapes"]
    print(f"scraped / not scraped: {med['traced, scraped back to back'] / quiet:.3f}")
    print(f"traced (no scrapes) / untraced: {quiet / med['untraced']:.2f}")
    if lat:
        print(f"scrapes: {len(lat)} in all, median {statistics.median(lat) * 1000:.1f} ms, "
              f"max {max(lat) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
