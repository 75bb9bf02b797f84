package postgres_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/idempotency/postgres"
)

// BenchmarkPostgres measures a request whose handler inserts one payment
// row, in process against the test server on loopback: Bare is the
// handler alone in a transaction of its own (BEGIN, INSERT, COMMIT), First
// the middleware with a new key each time (the handler's INSERT in the
// claim's transaction), Replay one key; FirstSQL and ReplaySQL the same
// over database/sql (NewSQL, pgx's stdlib on the same pool). roundtrips/op
// counts the statements and batches sent to PostgreSQL, the handler's
// INSERT included.
func BenchmarkPostgres(b *testing.B) {
	rt := &roundTrips{}
	pool := tracedPool(b, rt)
	ctx := context.Background()
	table := newTable()
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+`_payments (id bigserial PRIMARY KEY, amount int NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	insert := `INSERT INTO ` + table + `_payments (amount) VALUES (1000)`
	handler := func(exec func(ctx context.Context) error) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := exec(r.Context()); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"pay_1","amount":1000}` + "\n"))
		})
	}
	bare := handler(func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, insert); return err })
	})
	inClaim := handler(func(ctx context.Context) error { _, err := postgres.Tx(ctx).Exec(ctx, insert); return err })
	store := postgres.New(pool, postgres.WithTable(table))
	if err := store.CreateSchema(ctx); err != nil {
		b.Fatal(err)
	}
	mw, err := idempotency.New(store, idempotency.Config{})
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, h http.Handler, key func(i int) string) {
		b.ReportAllocs()
		before := rt.n.Load()
		n := 0
		for i := 0; b.Loop(); i++ {
			req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(`{"amount": 1000}`))
			req.Header.Set("Content-Type", "application/json")
			if key != nil {
				req.Header.Set("Idempotency-Key", key(i))
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusCreated {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
			n++
		}
		b.ReportMetric(float64(rt.n.Load()-before)/float64(n), "roundtrips/op")
	}
	var keys atomic.Int64 // b.Run calls each function more than once: keys never repeat
	b.Run("Bare", func(b *testing.B) { run(b, bare, nil) })
	b.Run("First", func(b *testing.B) {
		run(b, mw.Handler(inClaim), func(int) string { return "k" + strconv.FormatInt(keys.Add(1), 10) })
	})
	b.Run("Replay", func(b *testing.B) { run(b, mw.Handler(inClaim), func(int) string { return "same" }) })
	db := stdlib.OpenDBFromPool(pool)
	b.Cleanup(func() { _ = db.Close() })
	sqlStore := postgres.NewSQL(db, postgres.WithTable(table+"_sql"))
	if err := sqlStore.CreateSchema(ctx); err != nil {
		b.Fatal(err)
	}
	sqlMW, err := idempotency.New(sqlStore, idempotency.Config{})
	if err != nil {
		b.Fatal(err)
	}
	inSQLClaim := handler(func(ctx context.Context) error { _, err := postgres.SQLTx(ctx).ExecContext(ctx, insert); return err })
	b.Run("FirstSQL", func(b *testing.B) {
		run(b, sqlMW.Handler(inSQLClaim), func(int) string { return "k" + strconv.FormatInt(keys.Add(1), 10) })
	})
	b.Run("ReplaySQL", func(b *testing.B) { run(b, sqlMW.Handler(inSQLClaim), func(int) string { return "same" }) })
}
