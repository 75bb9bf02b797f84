#!/usr/bin/env bash
# ab.sh: one benchmark of bench/ run with the test binaries of two commits
# in turns, so that drift of the machine falls on both alike. This is how
# bench/README.md compares commits within a session (the loopback ratios
# move by up to 0.3 % from one day to the next).
#
# Usage: ./ab.sh OLD NEW REGEX [ROUNDS] [ARGS...]
#   OLD, NEW  commits (anything git worktree accepts)
#   REGEX     passed to -test.bench
#   ROUNDS    turns per binary (default 5)
#   ARGS      more test flags (default: -test.count 2 -test.benchtime 300ms -test.benchmem)
# Output: each benchmark line, prefixed with the commit it came from. For a
# loopback pair read ratio-median; for the stub, ns/op of each client.
#
# Examples (as in bench/README.md):
#   ./ab.sh 7b0ea27 ebff16a '^BenchmarkOverhead$/stub/POST/(nethttp|resilient)$'
#   ./ab.sh 7b0ea27 ebff16a 'BenchmarkLoopback$/inproc/POST' 3 -test.count 2 -test.benchtime 1s
set -euo pipefail
cd "$(dirname "$0")"
[ $# -ge 3 ] || { sed -n '2,17p' "$0"; exit 2; }
old=$1 new=$2 regex=$3 rounds=${4:-5}
shift $(($# < 4 ? $# : 4))
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-test.count 2 -test.benchtime 300ms -test.benchmem)
dir="$(mktemp -d)"
root="$(git rev-parse --show-toplevel)"
cleanup() {
  for c in old new; do git -C "$root" worktree remove --force "$dir/$c" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
for c in old new; do
  rev=$old
  [ "$c" = new ] && rev=$new
  git -C "$root" worktree add -q --detach "$dir/$c" "$rev"
  (cd "$dir/$c/bench" && go test -c -o "$dir/$c.test" .)
done
for _ in $(seq "$rounds"); do
  for c in old new; do
    rev=$old
    [ "$c" = new ] && rev=$new
    (cd "$dir/$c/bench" && "$dir/$c.test" -test.run '^$' -test.bench "$regex" "${args[@]}") |
      grep '^Benchmark' | sed "s/^/$rev /"
  done
done
