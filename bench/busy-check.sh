#!/usr/bin/env bash
# bench/busy-check.sh: the default storm on a busy machine, as the README
# quotes it. It starts two CPU-bound processes (`while :; do :; done`),
# runs `go run ./cmd/storm -out DIR` beside them (built first, so that the
# time is the run's, not the compiler's), stops them, and prints the wall
# time, the headline's length and how many results are disturbed or
# invalid (from DIR/storm.json and DIR/tail.json).
#
# Usage, from bench/:  ./busy-check.sh [DIR]   (default: a temporary directory)
set -euo pipefail
cd "$(dirname "$0")"
dir="${1:-$(mktemp -d)}"
go build -o "$dir/storm.bin" ./cmd/storm
spinners=()
cleanup() { for p in "${spinners[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for _ in 1 2; do
  sh -c 'while :; do :; done' &
  spinners+=("$!")
done
echo "busy-check: $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg); spinners ${spinners[*]}"
start="$EPOCHREALTIME"
"$dir/storm.bin" -out "$dir" >"$dir/stdout.txt" 2>"$dir/stderr.txt"
end="$EPOCHREALTIME"
cleanup
echo "busy-check: load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$dir" "$start" "$end" <<'PY'
import json, sys
d, start, end = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
res = json.load(open(d + "/storm.json")) + json.load(open(d + "/tail.json"))
lines = open(d + "/stdout.txt").read().count("\n")
print("busy-check: wall %.1f s; headline %d lines; %d results, %d disturbed, %d invalid" % (
    end - start, lines, len(res), sum(r["disturbed"] for r in res), sum(r["invalid"] for r in res)))
PY
