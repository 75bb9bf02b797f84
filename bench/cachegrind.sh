#!/usr/bin/env bash
# cachegrind.sh: instructions, L1 instruction-cache misses and L1 data-cache
# misses per request of each client over loopback
# (BenchmarkOverhead/loopback: client and server in one process), simulated
# by valgrind's cachegrind with this machine's cache geometry. Needs
# valgrind.
#
# Over loopback a request runs about 124,000 instructions (client, server,
# net/http, runtime), far more code than a 32 KiB L1 instruction cache
# holds, so each line of code a client adds is fetched again on every
# request: what a client costs there follows the code it touches (I1
# misses) more than the instructions it runs. callgrind.sh counts the
# latter over the stub.
#
# GOMAXPROCS=1 GOGC=off (one thread, no GC work counted). Per request =
# (X(6000 iterations) - X(1000)) / 5000, so that start-up and warm-up
# cancel out. Counts move by a few misses between runs (goroutine
# scheduling differs).
#
# Usage: ./cachegrind.sh [REGEX] [FUNCS]
#   REGEX  picks the benchmarks (default: every loopback one), e.g. POST
#   FUNCS  if set, also lists the FUNCS functions whose I1 misses per
#          request differ most from bare net/http's, for each client
set -euo pipefail
cd "$(dirname "$0")"
regex="${1:-.}"
funcs="${2:-0}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
go test -c -o "$dir/bench.test" .

run() { # run BENCH ITERATIONS TAG: cachegrind output in $dir/TAG
  GODEBUG=cpu.rdtscp=off,asyncpreemptoff=1 GOMAXPROCS=1 GOGC=off \
    valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file="$dir/$3" \
    "$dir/bench.test" -test.run '^$' -test.bench "^BenchmarkOverhead\$/loopback/$1\$" \
    -test.benchtime "$2x" -test.cpu 1 >/dev/null 2>"$dir/$3.log"
}

totals() { # totals TAG: "Ir I1mr D1mr" of the run
  awk '/I *refs:/ {gsub(",","",$4); ir=$4} /I1 *misses:/ {gsub(",","",$4); i1=$4}
       /D1 *misses:/ {gsub(",","",$4); d1=$4} END {print ir, i1, d1}' "$dir/$1.log"
}

perfunc() { # perfunc TAG: "I1mr function" lines, summed by function
  cg_annotate --show=I1mr --threshold=0 "$dir/$1" 2>/dev/null |
    awk '/file:function/ {on=1; next} /Auto-annotated/ {exit}
         on && $1 ~ /^[0-9,]+$/ { n=$1; gsub(",","",n); f=$NF; if ($2 ~ /^\(/) f=$NF; s[f]+=n }
         END {for (f in s) print s[f], f}'
}

declare -A base
printf '%-24s %9s %8s %8s %8s %8s\n' benchmark Ir/req I1mr/req D1mr/req +I1mr +D1mr
for method in GET POST; do
  [[ "loopback/$method/resilient loopback/$method/retryablehttp loopback/$method/failsafe" =~ $regex ]] || continue
  for client in nethttp resilient retryablehttp failsafe; do
    name="$method/$client"
    [[ "loopback/$name" =~ $regex ]] || [ "$client" = nethttp ] || continue
    tag="${method}_$client"
    run "$name" 6000 "$tag.hi"
    run "$name" 1000 "$tag.lo"
    read -r ih i1h d1h < <(totals "$tag.hi")
    read -r il i1l d1l < <(totals "$tag.lo")
    ir=$(((ih - il) / 5000)) i1=$(((i1h - i1l) / 5000)) d1=$(((d1h - d1l) / 5000))
    if [ "$client" = nethttp ]; then
      base[$method]="$i1 $d1"
      printf '%-24s %9d %8d %8d %8s %8s\n' "loopback/$name" "$ir" "$i1" "$d1" - -
      continue
    fi
    read -r bi1 bd1 <<<"${base[$method]}"
    printf '%-24s %9d %8d %8d %+8d %+8d\n' "loopback/$name" "$ir" "$i1" "$d1" $((i1 - bi1)) $((d1 - bd1))
    if [ "$funcs" != 0 ]; then
      for t in "$tag" "${method}_nethttp"; do
        join -1 2 -2 2 -a 1 -a 2 -e 0 -o 0,1.1,2.1 \
          <(perfunc "$t.hi" | sort -k2,2) <(perfunc "$t.lo" | sort -k2,2) |
          awk '{printf "%s %.1f\n", $1, ($2 - $3) / 5000}' | sort >"$dir/$t.per"
      done
      join -a 1 -a 2 -e 0 -o 0,1.2,2.2 "$dir/$tag.per" "$dir/${method}_nethttp.per" |
        awk '{d = $2 - $3; if (d < 0) a = -d; else a = d; printf "%.1f %+7.1f  %s\n", a, d, $1}' |
        sort -rn | awk -v n="$funcs" 'NR <= n' | cut -d' ' -f2-
    fi
  done
done
