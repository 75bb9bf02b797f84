#!/usr/bin/env bash
# callgrind.sh: instructions per request of each client over the stub base
# transport (BenchmarkOverhead/stub), counted with valgrind's callgrind,
# as in results/overhead-callgrind.txt. Needs valgrind.
#
# Mutator only (GOGC=off: no GC work is counted); a clock read (vDSO) counts
# as its instructions, not its time. Per request = (I(45000 iterations) -
# I(5000)) / 40000, so that start-up and warm-up cancel out (the resumable
# row, a 256 KiB body per request: 4500 and 500 iterations, / 4000).
#
# A process's map hash seed is random, so a figure moves by about ±30
# between runs of the same binary (map lookups probe more or less). RUNS=N
# measures each benchmark N times and prints the median.
#
# Usage: [RUNS=N] ./callgrind.sh [REGEX]   (default: every stub benchmark, RUNS=1)
set -euo pipefail
cd "$(dirname "$0")"
regex="${1:-.}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
go test -c -o "$dir/bench.test" .

count() { # count BENCH ITERATIONS: the run's total instructions
  GODEBUG=cpu.rdtscp=off,asyncpreemptoff=1 GOMAXPROCS=1 GOGC=off \
    valgrind --tool=callgrind --callgrind-out-file="$dir/out" \
    "$dir/bench.test" -test.run '^$' -test.bench "^BenchmarkOverhead\$/stub/$1\$" \
    -test.benchtime "$2x" -test.cpu 1 >/dev/null 2>"$dir/log"
  sed -n 's/.*Collected : //p' "$dir/log"
}

declare -A bare
printf '%-32s %8s %8s\n' benchmark instr +bare
for method in GET POST resumable; do
  for client in nethttp resilient retryablehttp failsafe; do
    name="$method/$client"
    [[ "stub/$name" =~ $regex ]] || [ "$client" = nethttp ] || continue
    runs=()
    # The resumable row reads a 256 KiB body per request: a tenth of the
    # iterations keeps its run as long as the others'.
    n=40000
    [ "$method" = resumable ] && n=4000
    for ((r = 0; r < ${RUNS:-1}; r++)); do
      hi="$(count "$name" $((n * 9 / 8)))"
      lo="$(count "$name" $((n / 8)))"
      runs+=($(((hi - lo) / n)))
    done
    per="$(printf '%s\n' "${runs[@]}" | sort -n | sed -n "$(((${#runs[@]} + 1) / 2))p")"  # the median
    if [ "$client" = nethttp ]; then
      bare[$method]=$per
      printf '%-32s %8d %8s\n' "stub/$name" "$per" -
    else
      printf '%-32s %8d %+8d\n' "stub/$name" "$per" $((per - bare[$method]))
    fi
  done
done
