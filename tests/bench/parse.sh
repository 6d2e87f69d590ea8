#!/usr/bin/env bash
# Front-end benchmarks (release build):
#  1. parse throughput on a ~200,000-line generated script (goal >= 1,000,000 lines/s);
#  2. `utap -p1` wall time on a 100-line script, mean of 200 runs (goal <= 5 ms).
# Say whether the machine was otherwise idle when quoting the figures.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo bench -q -p utap-compiler --bench parse 2>/dev/null | grep '^parse:'
cargo build -q --release --bin utap
script=$(mktemp --suffix=.stp)
trap 'rm -f "$script"' EXIT
{
  echo 'global counts, total'
  for i in $(seq 1 13); do
    cat <<STP
probe process.syscall, timer.ms($i) {
  if (pid() != target()) next
  counts[execname(), \$syscall] <<< 1
  total += \$arg1 * 2
  foreach ([e, s] in counts- limit 10)
    printf("%s %d %d\n", e, s, @count(counts[e, s]))
}
STP
  done
  for i in $(seq 1 8); do echo "function f$i(a) { return a + $i }"; done
} > "$script"
runs=200
start=$(date +%s%N)
for _ in $(seq $runs); do ./target/release/utap -p1 "$script" > /dev/null; done
end=$(date +%s%N)
echo "utap -p1 on a $(wc -l < "$script")-line script: $(( (end - start) / runs / 1000 )) us per run (mean of $runs)"
