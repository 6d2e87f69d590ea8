#!/bin/sh
# How long `-T 1` takes to give the shell back (issue 11, point 2):
#   1. on `-c 'sleep 5'` with a syscall probe (seccomp filter): before the
#      tracing process existed, utap waited for the command (5 s);
#   2. on `-x` of a process with N busy threads (default 1000), each calling
#      getppid and sleeping 1 ms in a loop (tests/fixtures/busy.c).
# Usage (release build): sh tests/bench/endings.sh [N] [ROUNDS]
# It prints wall times in seconds; the goal is "-T plus at most 0.1 s" once
# attached. Attaching many busy threads is CPU-bound on a loaded machine:
# run it when the machine is otherwise idle, and note `uptime`.
set -eu
N=${1:-1000}
ROUNDS=${2:-3}
UTAP=${UTAP:-target/release/utap}
BUSY=$(ls target/release/build/utap-*/out/fixtures/busy 2>/dev/null | head -1)
[ -x "$BUSY" ] || { echo "build first: cargo build --release" >&2; exit 1; }
now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc; }
uptime
for r in $(seq "$ROUNDS"); do
    t0=$(now)
    "$UTAP" -e 'probe syscall.nanosleep, syscall.clock_nanosleep { } probe end { }' \
        -T 1 -c 'sleep 5' >/dev/null
    echo "round $r: -T 1 on -c 'sleep 5': $(secs "$t0" "$(now)") s"
done
out=$(mktemp)
for r in $(seq "$ROUNDS"); do
    "$BUSY" "$N" 1000 >"$out" &
    pid=$!
    while ! grep -q ready "$out"; do sleep 0.05; done
    t0=$(now)
    "$UTAP" -e 'global n probe process.syscall { n++ } probe end { }' -T 1 -x "$pid" >/dev/null
    echo "round $r: -T 1 on -x of $N busy threads: $(secs "$t0" "$(now)") s"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
done
rm -f "$out"
uptime
