package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/resilienthttp/resilient/internal/redistest"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/bolt"
	"github.com/resilienthttp/resilient/persist/postgres"
	"github.com/resilienthttp/resilient/persist/postgres/pgtest"
	"github.com/resilienthttp/resilient/persist/redis"
)

// BenchmarkStores compares, in one run and on one disk, what it costs to
// make an operation's key durable:
//
//   - postgres/insert: the baseline, a transaction that inserts one business
//     row (an order) and commits;
//   - postgres/insert+ClaimTx: the same transaction, which also claims the
//     order's payment with Store.ClaimTx;
//   - postgres/insert+ClaimBatch: the same, the insert and Store.ClaimBatch
//     in one round trip (a pgx.Batch);
//   - postgres/Claim: Store.Claim alone (its own transaction);
//   - bolt/Claim: persist/bolt (fsync per commit, group commit);
//   - redis/Claim: persist/redis on a redis-server with appendfsync always.
//
// Each at 1 and 64 goroutines, reporting ops/s. PostgreSQL runs with fsync
// and synchronous_commit on. Every data directory is under $STORES_BENCH_DIR
// (default /var/tmp), which must not be a tmpfs. The cases run in
// $STORES_ROUNDS rounds (default 3) and a summary gives their medians and the
// ratio of insert+ClaimTx to insert. persist/postgres/benchmark.sh runs this
// with pg_test_fsync in the same directory.
func BenchmarkStores(b *testing.B) {
	parent := os.Getenv("STORES_BENCH_DIR")
	if parent == "" {
		parent = "/var/tmp"
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(parent, &fs); err != nil {
		b.Fatal(err)
	}
	if fs.Type == 0x01021994 { // TMPFS_MAGIC
		b.Fatalf("%s is a tmpfs: set STORES_BENCH_DIR to a directory on disk", parent)
	}
	srv, err := pgtest.Start(parent)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	cfg, err := pgxpool.ParseConfig(srv.DSN())
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 80
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	dir, err := os.MkdirTemp(parent, "stores-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// Its append-only file in dir, fsync'd before every reply.
	rs := redistest.Start(b, redistest.Config{Dir: dir, Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	defer rs.Stop() // before dir is removed
	redisAddr := rs.Addr

	var tables atomic.Int64
	newTables := func(b *testing.B) (*postgres.Store, string) {
		n := tables.Add(1)
		store := postgres.New(pool, postgres.WithTable(fmt.Sprintf("ops_%d", n)))
		if err := store.CreateSchema(b.Context()); err != nil {
			b.Fatal(err)
		}
		orders := fmt.Sprintf("orders_%d", n)
		if _, err := pool.Exec(b.Context(), `CREATE TABLE `+orders+` (id text PRIMARY KEY, amount integer NOT NULL, created timestamptz NOT NULL DEFAULT now())`); err != nil {
			b.Fatal(err)
		}
		return store, orders
	}
	insert := func(ctx context.Context, orders, id string, claim func(tx pgxTx) error) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO `+orders+` (id, amount) VALUES ($1, $2)`, id, 1000); err != nil {
			return err
		}
		if claim != nil {
			if err := claim(tx); err != nil {
				return err
			}
		}
		return tx.Commit(ctx)
	}
	created := time.Now()
	record := func(id string) persist.Record {
		return persist.Record{Operation: "pay:" + id, Key: "key-" + id, Fingerprint: "fp", Created: created}
	}
	claimWith := func(s persist.Store) func(ctx context.Context, id string) error {
		return func(ctx context.Context, id string) error {
			_, claimed, err := s.Claim(ctx, record(id))
			if err == nil && !claimed {
				err = errors.New("already claimed: " + id)
			}
			return err
		}
	}

	cases := []struct {
		name string
		op   func(b *testing.B) func(ctx context.Context, id string) error
	}{
		{"postgres/insert", func(b *testing.B) func(context.Context, string) error {
			_, orders := newTables(b)
			return func(ctx context.Context, id string) error { return insert(ctx, orders, id, nil) }
		}},
		{"postgres/insert+ClaimTx", func(b *testing.B) func(context.Context, string) error {
			store, orders := newTables(b)
			return func(ctx context.Context, id string) error {
				return insert(ctx, orders, id, func(tx pgxTx) error {
					_, _, err := store.ClaimTx(ctx, tx, record(id))
					return err
				})
			}
		}},
		{"postgres/insert+ClaimBatch", func(b *testing.B) func(context.Context, string) error {
			store, orders := newTables(b)
			return func(ctx context.Context, id string) error {
				tx, err := pool.Begin(ctx)
				if err != nil {
					return err
				}
				defer tx.Rollback(ctx)
				var batch pgx.Batch
				batch.Queue(`INSERT INTO `+orders+` (id, amount) VALUES ($1, $2)`, id, 1000)
				if _, _, err := store.ClaimBatch(ctx, tx, &batch, record(id)); err != nil {
					return err
				}
				return tx.Commit(ctx)
			}
		}},
		{"postgres/Claim", func(b *testing.B) func(context.Context, string) error {
			store, _ := newTables(b)
			return claimWith(store)
		}},
		{"bolt/Claim", func(b *testing.B) func(context.Context, string) error {
			s, err := bolt.Open(filepath.Join(dir, fmt.Sprintf("bolt-%d.db", tables.Add(1))))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return claimWith(s)
		}},
		{"redis/Claim", func(b *testing.B) func(context.Context, string) error {
			c := goredis.NewClient(&goredis.Options{Addr: redisAddr, PoolSize: 80})
			b.Cleanup(func() { c.Close() })
			return claimWith(redis.New(c, redis.WithPrefix(fmt.Sprintf("bench%d:", tables.Add(1)))))
		}},
	}
	// The cases run in rounds, each case once per round, so that a burst of
	// load from elsewhere on the machine, or a checkpoint, falls on all of
	// them alike; the summary gives each case's median over the rounds.
	rounds := 3
	if v := os.Getenv("STORES_ROUNDS"); v != "" {
		if rounds, err = strconv.Atoi(v); err != nil || rounds < 1 {
			b.Fatalf("STORES_ROUNDS=%q", v)
		}
	}
	rates := map[string][]float64{}
	var names []string
	for range rounds {
		for _, tc := range cases {
			for _, conc := range []int{1, 64} {
				name := fmt.Sprintf("%s/conc=%d", tc.name, conc)
				var rate float64
				b.Run(name, func(b *testing.B) {
					rate = runConcurrently(b, conc, tc.op(b))
				})
				if _, ok := rates[name]; !ok {
					names = append(names, name)
				}
				rates[name] = append(rates[name], rate)
			}
		}
	}
	summary := fmt.Sprintf("\nmedian ops/s over %d rounds:\n", rounds)
	for _, name := range names {
		summary += fmt.Sprintf("  %-32s %8.0f  %v\n", name, median(rates[name]), roundAll(rates[name]))
	}
	for _, conc := range []string{"1", "64"} {
		bare, claim := median(rates["postgres/insert/conc="+conc]), median(rates["postgres/insert+ClaimTx/conc="+conc])
		batched := median(rates["postgres/insert+ClaimBatch/conc="+conc])
		summary += fmt.Sprintf("  at conc=%s: insert+ClaimTx / insert %.2f, insert+ClaimBatch / insert %.2f\n", conc, claim/bare, batched/bare)
	}
	fmt.Print(summary) // b.Log of a benchmark with sub-benchmarks is not shown
}

// median returns the median of xs.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// roundAll returns xs rounded to integers, for the summary.
func roundAll(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(math.Round(x))
	}
	return out
}

// pgxTx is the transaction ClaimTx receives here.
type pgxTx = postgres.DBTX

// runConcurrently runs op b.N times, with distinct ids, from conc goroutines,
// and reports and returns ops/s.
func runConcurrently(b *testing.B, conc int, op func(ctx context.Context, id string) error) float64 {
	ctx := b.Context()
	run := strconv.FormatInt(time.Now().UnixNano(), 36) // ids unique across the runs of one sub-benchmark
	var next atomic.Int64
	var failed atomic.Pointer[error]
	b.ResetTimer()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if err := op(ctx, run+"-"+strconv.FormatInt(i, 10)); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	rate := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "ops/s")
	return rate
}
