package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"

	"github.com/resilienthttp/resilient/idempotency/idempotencytest"
	"github.com/resilienthttp/resilient/idempotency/internal/servercrash"
	"github.com/resilienthttp/resilient/idempotency/postgres"
	"github.com/resilienthttp/resilient/internal/pgtest"
)

// dsn is the connection string of the server TestMain started.
var dsn string

func TestMain(m *testing.M) {
	// Re-executed by TestServerCrashMatrix: a server on the Postgres Store.
	servercrash.Main(openCrashServer)
	srv, err := pgtest.Start(os.Getenv("IDEMPOTENCY_POSTGRES_DIR"))
	if err != nil {
		// Never a skip: scripts/test installs PostgreSQL.
		fmt.Fprintln(os.Stderr, "idempotency/postgres tests: start PostgreSQL:", err)
		os.Exit(1)
	}
	dsn = srv.DSN()
	code := m.Run()
	srv.Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// newPool returns a pool of at most maxConns on the test server, closed
// when t ends.
func newPool(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

var tables atomic.Int64

// newTable returns a table name no other test of this run uses.
func newTable() string {
	return fmt.Sprintf("idem_%d_%d", time.Now().UnixNano()%1e9, tables.Add(1))
}

// pgxEnv is a conformance Env on a Store made by New: effects are rows of
// a table of their own, written in the claim's transaction.
func pgxEnv(t testing.TB, pool *pgxpool.Pool) idempotencytest.Env {
	t.Helper()
	table := newTable()
	store := postgres.New(pool, postgres.WithTable(table))
	ctx := context.Background()
	if err := store.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	effects := table + "_effects"
	if _, err := pool.Exec(ctx, `CREATE TABLE `+effects+` (name text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return idempotencytest.Env{
		Store: store,
		Apply: func(ctx context.Context, name string) error {
			q := `INSERT INTO ` + effects + ` (name) VALUES ($1)`
			if tx := postgres.Tx(ctx); tx != nil {
				_, err := tx.Exec(ctx, q, name)
				return err
			}
			_, err := pool.Exec(ctx, q, name)
			return err
		},
		Count: func(name string) int {
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+effects+` WHERE name = $1`, name).Scan(&n); err != nil {
				t.Error(err)
			}
			return n
		},
	}
}

// sqlEnv is pgxEnv for a Store made by NewSQL.
func sqlEnv(t testing.TB, pool *pgxpool.Pool) idempotencytest.Env {
	t.Helper()
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	table := newTable()
	store := postgres.NewSQL(db, postgres.WithTable(table))
	ctx := context.Background()
	if err := store.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	effects := table + "_effects"
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+effects+` (name text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return idempotencytest.Env{
		Store: store,
		Apply: func(ctx context.Context, name string) error {
			q := `INSERT INTO ` + effects + ` (name) VALUES ($1)`
			var err error
			if tx := postgres.SQLTx(ctx); tx != nil {
				_, err = tx.ExecContext(ctx, q, name)
			} else {
				_, err = db.ExecContext(ctx, q, name)
			}
			return err
		},
		Count: func(name string) int {
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM `+effects+` WHERE name = $1`, name).Scan(&n); err != nil {
				t.Error(err)
			}
			return n
		},
	}
}
