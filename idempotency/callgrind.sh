#!/usr/bin/env bash
# callgrind.sh: instructions per request of BenchmarkMiddleware's Bare,
# First and Replay (MemoryStore, in process), counted with valgrind's
# callgrind as bench/callgrind.sh counts the client's: mutator only
# (GOGC=off), per request = (I(HI iterations) - I(LO)) / (HI - LO), so that
# start-up and warm-up cancel out; RUNS=N prints the median of N. A count
# does not depend on the machine's load, unlike ns/op.
#
# Usage: [RUNS=N] ./callgrind.sh
set -euo pipefail
cd "$(dirname "$0")"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
go test -c -o "$dir/idem.test" .
hi=12000 lo=2000

count() { # count BENCH ITERATIONS: the run's total instructions
  GODEBUG=cpu.rdtscp=off,asyncpreemptoff=1 GOMAXPROCS=1 GOGC=off \
    valgrind --tool=callgrind --callgrind-out-file="$dir/out" \
    "$dir/idem.test" -test.run '^$' -test.bench "^BenchmarkMiddleware\$/^$1\$" \
    -test.benchtime "$2x" -test.cpu 1 >/dev/null 2>"$dir/log"
  sed -n 's/.*Collected : //p' "$dir/log"
}

printf '%-10s %8s %8s\n' benchmark instr xbare
for name in Bare First Replay; do
  runs=()
  for ((r = 0; r < ${RUNS:-1}; r++)); do
    a="$(count "$name" "$hi")"
    b="$(count "$name" "$lo")"
    runs+=($(((a - b) / (hi - lo))))
  done
  per="$(printf '%s\n' "${runs[@]}" | sort -n | sed -n "$(((${#runs[@]} + 1) / 2))p")"
  [ "$name" = Bare ] && bare=$per
  printf '%-10s %8d %8s\n' "$name" "$per" "$(awk -v p="$per" -v b="$bare" 'BEGIN { printf "%.2f", p / b }')"
done
