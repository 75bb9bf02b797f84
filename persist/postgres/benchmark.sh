#!/usr/bin/env bash
# persist/postgres/benchmark.sh: the figures of persist/postgres/README.md.
#
# 1. pg_test_fsync in $STORES_BENCH_DIR (default /var/tmp): what the disk's
#    fsync costs, the floor of every durable commit below.
# 2. BenchmarkStores (bench/stores_test.go) with its data directories in the
#    same place: a bare one-row insert+commit against the same transaction with
#    Store.ClaimTx, Store.Claim alone, persist/bolt and persist/redis
#    (appendfsync always), at 1 and 64 goroutines, in one run.
#
# Environment: STORES_BENCH_DIR (must not be a tmpfs), BENCHTIME (default 3s),
# COUNT (default 1), FSYNC_SECS (pg_test_fsync's seconds per test, default 2).
# It needs PostgreSQL (initdb, pg_ctl, pg_test_fsync) and redis-server, as
# scripts/test installs them. Never run by scripts/test.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${STORES_BENCH_DIR:-/var/tmp}"
export STORES_BENCH_DIR="$dir"

bin="$(command -v pg_test_fsync || ls -d /usr/lib/postgresql/*/bin/pg_test_fsync 2>/dev/null | sort -V | tail -1)"
if [ -z "$bin" ]; then
  echo "benchmark.sh: pg_test_fsync not found (Debian package postgresql)" >&2
  exit 1
fi
echo "== df $dir"
df -hT "$dir"
tmp="$(mktemp -d "$dir/pg_test_fsync.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "== pg_test_fsync -s ${FSYNC_SECS:-2} -f $tmp/fsync.test"
"$bin" -s "${FSYNC_SECS:-2}" -f "$tmp/fsync.test"
echo "== cd bench && go test -run '^\$' -bench BenchmarkStores -benchtime ${BENCHTIME:-3s} -count ${COUNT:-1} ."
cd bench && go test -run '^$' -bench BenchmarkStores -benchtime "${BENCHTIME:-3s}" -count "${COUNT:-1}" .
