package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/resilienthttp/resilient/persist/postgres"
	"github.com/resilienthttp/resilient/persist/postgres/pgtest"
)

// dsn is the connection string of the server TestMain started.
var dsn string

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(matrixDSNEnv) != "":
		// Re-executed by TestCrashMatrix.
		os.Exit(matrixChild())
	}
	srv, err := pgtest.Start(os.Getenv("PERSIST_POSTGRES_DIR"))
	if err != nil {
		// Never a skip: scripts/test installs PostgreSQL.
		fmt.Fprintln(os.Stderr, "persist/postgres tests: start PostgreSQL:", err)
		os.Exit(1)
	}
	dsn = srv.DSN()
	code := 0
	func() {
		defer srv.Stop()
		code = runVerified(m)
	}()
	os.Exit(code)
}

// runVerified runs the tests and then fails if goroutines leaked.
func runVerified(m *testing.M) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		return 1
	}
	return 0
}

// newPool returns a pool on the test server, closed when t ends.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 80
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// tables numbers the tables of one test binary.
var tables atomic.Int64

// newTable returns a table name no other Store of this test run uses.
func newTable() string {
	return fmt.Sprintf("ops_%d_%d", time.Now().UnixNano()%1e9, tables.Add(1))
}

// newStore returns a Store on a new table of pool, its schema created.
func newStore(t testing.TB, pool *pgxpool.Pool, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	s := postgres.New(pool, append([]postgres.Option{postgres.WithTable(newTable())}, opts...)...)
	if err := s.CreateSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}
