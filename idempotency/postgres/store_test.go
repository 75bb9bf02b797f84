package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/idempotency/postgres"
)

func rows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n))
	return n
}

func newStore(t *testing.T, pool postgres.Pool) *postgres.Store {
	t.Helper()
	s := postgres.New(pool, postgres.WithTable(newTable()))
	require.NoError(t, s.CreateSchema(context.Background()))
	return s
}

// A released claim (a rolled-back transaction) leaves no record: the next
// request claims the key again.
func TestRollbackLeavesNoRecord(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, 4)
	s := newStore(t, pool)
	sc := idempotency.Scope{Route: "POST /x", Key: "k"}
	now := time.Now()
	b, err := s.Begin(ctx, sc, idempotency.Fingerprint{1}, now, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, b.State)
	_, err = postgres.Tx(b.Claim.Context(ctx)).Exec(ctx, `CREATE TABLE effect_in_tx (id int)`)
	require.NoError(t, err)
	require.NoError(t, b.Claim.Release(ctx))
	assert.ErrorIs(t, b.Claim.Release(ctx), idempotency.ErrClaimEnded)
	assert.Equal(t, 0, rows(t, pool, s.Table()))
	var exists bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass('effect_in_tx') IS NOT NULL`).Scan(&exists))
	assert.False(t, exists, "the effect was rolled back with the claim")

	again, err := s.Begin(ctx, sc, idempotency.Fingerprint{2}, now, now.Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, idempotency.Claimed, again.State)
	require.NoError(t, again.Claim.Complete(ctx, &idempotency.Response{Status: 201, Body: []byte("ok")}, now.Add(time.Hour)))
	assert.Equal(t, 1, rows(t, pool, s.Table()))
}

// A duplicate is answered Busy at once while the first holds its
// transaction, even when the pool has one spare connection: it never
// waits on the uncommitted row.
func TestBusyDoesNotBlock(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, 2)
	s := newStore(t, pool)
	sc := idempotency.Scope{Route: "POST /x", Key: "k"}
	now := time.Now()
	first, err := s.Begin(ctx, sc, idempotency.Fingerprint{1}, now, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, first.State)
	for range 20 {
		dctx, cancel := context.WithTimeout(ctx, time.Minute) // a bound, not an assertion on time
		b, err := s.Begin(dctx, sc, idempotency.Fingerprint{1}, now, now.Add(time.Minute))
		cancel()
		require.NoError(t, err)
		assert.Equal(t, idempotency.Busy, b.State)
	}
	require.NoError(t, first.Claim.Complete(ctx, &idempotency.Response{Status: 201, Header: http.Header{"A": {"1", "2"}}, Body: []byte("ok")}, now.Add(time.Hour)))
	b, err := s.Begin(ctx, sc, idempotency.Fingerprint{1}, now, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, idempotency.Replay, b.State)
	assert.Equal(t, &idempotency.Response{Status: 201, Header: http.Header{"A": {"1", "2"}}, Body: []byte("ok")}, b.Response)
}

// A claim whose handler hangs without using its context is ended by the
// server once idle in its transaction for the lease: the key is free
// again, and the stuck claim cannot store.
func TestStuckTransactionIsBounded(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, 4)
	s := newStore(t, pool)
	sc := idempotency.Scope{Route: "POST /x", Key: "stuck"}
	now := time.Now()
	stuck, err := s.Begin(ctx, sc, idempotency.Fingerprint{1}, now, now.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, stuck.State)
	var setting string
	require.NoError(t, postgres.Tx(stuck.Claim.Context(ctx)).QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&setting))
	assert.Equal(t, "1s", setting, "the transaction is bounded by the lease")
	var state idempotency.State
	for i := 0; i < 600 && state != idempotency.Claimed; i++ { // bounded: 600 × 100 ms
		time.Sleep(100 * time.Millisecond)
		b, err := s.Begin(ctx, sc, idempotency.Fingerprint{1}, time.Now(), time.Now().Add(time.Minute))
		require.NoError(t, err)
		if state = b.State; state == idempotency.Claimed {
			require.NoError(t, b.Claim.Release(ctx))
		}
	}
	assert.Equal(t, idempotency.Claimed, state, "the server ended the stuck transaction and freed the key")
	assert.Error(t, stuck.Claim.Complete(ctx, &idempotency.Response{Status: 201}, now.Add(time.Hour)))
	assert.Equal(t, 0, rows(t, pool, s.Table()))
}

// roundTrips counts the statements and batches a pool sends: one round
// trip each.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// tracedPool returns a pool whose round trips rt counts.
func tracedPool(t testing.TB, rt *roundTrips) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = rt
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// The round trips to PostgreSQL of the middleware's paths, the handler
// writing nothing. On a pgxpool.Pool (New): a first request 2 (BEGIN, lock
// and read in one batch; INSERT and COMMIT in another), a replay 2 (the
// batch; ROLLBACK), a duplicate in progress 2. database/sql (NewSQL)
// cannot pipeline: 5, 4 and 4. A request passed through (a GET, a POST
// without a key) whose handler does not use its transaction costs 0; one
// whose handler runs one statement in it 3 (BEGIN, the statement, COMMIT),
// as the same handler in a transaction of its own.
func TestRoundTrips(t *testing.T) {
	tests := []struct {
		name               string
		sql                bool
		first, replay, dup int64
		get, keyless       int64
	}{
		{"pgxpool", false, 2, 2, 2, 0, 3},
		{"database/sql", true, 5, 4, 4, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := &roundTrips{}
			pool := tracedPool(t, rt)
			s := newStore(t, pool)
			if tt.sql {
				db := stdlib.OpenDBFromPool(pool)
				t.Cleanup(func() { _ = db.Close() })
				s = postgres.NewSQL(db, postgres.WithTable(newTable()))
				require.NoError(t, s.CreateSchema(context.Background()))
			}
			mw, err := idempotency.New(s, idempotency.Config{})
			require.NoError(t, err)
			hold, held := make(chan struct{}), make(chan struct{})
			h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Hold") != "" {
					close(held)
					<-hold
				}
				if r.Header.Get("X-Use-Tx") != "" {
					require.NoError(t, useTx(r.Context(), "SELECT 1"))
				}
				w.WriteHeader(http.StatusCreated)
			}))
			send := func(key string, hdr ...string) *httptest.ResponseRecorder {
				method := http.MethodPost
				if key == "GET" {
					method, key = http.MethodGet, ""
				}
				req := httptest.NewRequest(method, "/x", strings.NewReader(`{}`))
				if key != "" {
					req.Header.Set("Idempotency-Key", key)
				}
				for i := 0; i+1 < len(hdr); i += 2 {
					req.Header.Set(hdr[i], hdr[i+1])
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				return w
			}
			count := func(f func()) int64 {
				before := rt.n.Load()
				f()
				return rt.n.Load() - before
			}
			assert.Equal(t, tt.first, count(func() { assert.Equal(t, 201, send("a").Code) }), "first request")
			assert.Equal(t, tt.replay, count(func() { assert.Equal(t, 201, send("a").Code) }), "replay")
			assert.Equal(t, tt.get, count(func() { assert.Equal(t, 201, send("GET").Code) }), "GET, Tx unused")
			assert.Equal(t, tt.get, count(func() { assert.Equal(t, 201, send("").Code) }), "no key, Tx unused")
			assert.Equal(t, tt.keyless, count(func() { assert.Equal(t, 201, send("", "X-Use-Tx", "1").Code) }), "no key, one statement in Tx")

			done := make(chan struct{})
			go func() { defer close(done); send("b", "X-Hold", "1") }()
			<-held
			assert.Equal(t, tt.dup, count(func() { assert.Equal(t, http.StatusConflict, send("b").Code) }), "duplicate in progress")
			close(hold)
			<-done
		})
	}
}

// A renewed claim keeps its transaction past the server's idle timeout
// (the lease); once its owner stops renewing, the server ends it and frees
// the key, and its effects never commit.
func TestRenewHoldsTransaction(t *testing.T) {
	for _, name := range []string{"pgx", "sql"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			pool := newPool(t, 4)
			var s *postgres.Store
			if name == "pgx" {
				s = newStore(t, pool)
			} else {
				db := stdlib.OpenDBFromPool(pool)
				t.Cleanup(func() { _ = db.Close() })
				s = postgres.NewSQL(db, postgres.WithTable(newTable()))
				require.NoError(t, s.CreateSchema(ctx))
			}
			sc := idempotency.Scope{Route: "POST /x", Key: "renewed"}
			now := time.Now()
			held, err := s.Begin(ctx, sc, idempotency.Fingerprint{1}, now, now.Add(2*time.Second))
			require.NoError(t, err)
			require.Equal(t, idempotency.Claimed, held.State)
			start := time.Now()
			for time.Since(start) < 5*time.Second { // two idle timeouts and more, bounded by the clock
				time.Sleep(200 * time.Millisecond)
				require.NoError(t, held.Claim.(idempotency.Renewer).Renew(ctx, time.Now().Add(2*time.Second)))
			}
			b, err := s.Begin(ctx, sc, idempotency.Fingerprint{1}, time.Now(), time.Now().Add(time.Minute))
			require.NoError(t, err)
			assert.Equal(t, idempotency.Busy, b.State, "the renewed transaction is alive")
			// The owner stops renewing: the server ends its transaction.
			var state idempotency.State
			for i := 0; i < 600 && state != idempotency.Claimed; i++ { // bounded: 600 × 100 ms
				time.Sleep(100 * time.Millisecond)
				b, err := s.Begin(ctx, sc, idempotency.Fingerprint{1}, time.Now(), time.Now().Add(time.Minute))
				require.NoError(t, err)
				if state = b.State; state == idempotency.Claimed {
					require.NoError(t, b.Claim.Release(ctx))
				}
			}
			assert.Equal(t, idempotency.Claimed, state, "a lease without renewal frees the key")
			assert.Error(t, held.Claim.(idempotency.Renewer).Renew(ctx, time.Now().Add(time.Second)), "the stopped owner's transaction is gone")
			assert.Error(t, held.Claim.Complete(ctx, &idempotency.Response{Status: 201}, now.Add(time.Hour)))
			assert.Equal(t, 0, rows(t, pool, s.Table()))
		})
	}
}

// A Store whose table was never created: the first request's error, and
// the middleware's default log, name CreateSchema.
func TestMissingSchemaNamesCreateSchema(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	pool := newPool(t, 2)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	for _, s := range []*postgres.Store{postgres.New(pool, postgres.WithTable(newTable())), postgres.NewSQL(db, postgres.WithTable(newTable()))} {
		_, err := s.Begin(context.Background(), idempotency.Scope{Key: "k"}, idempotency.Fingerprint{}, time.Now(), time.Now().Add(time.Minute))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "call Store.CreateSchema")
		mw, err := idempotency.New(s, idempotency.Config{})
		require.NoError(t, err)
		req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", "k")
		rec := httptest.NewRecorder()
		mw.Handler(http.NotFoundHandler()).ServeHTTP(rec, req)
		assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
		assert.Contains(t, buf.String(), "call Store.CreateSchema", "logged by default")
		buf.Reset()
	}
}

// Lookup reads a record's state without claiming it, over pgx and
// database/sql.
func TestLookup(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, 4)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	for _, s := range []*postgres.Store{newStore(t, pool), postgres.NewSQL(db, postgres.WithTable(newTable()))} {
		require.NoError(t, s.CreateSchema(ctx))
		sc := idempotency.Scope{Route: "POST /x", Key: "looked"}
		t0 := time.UnixMicro(time.Now().UnixMicro())
		none, err := s.Lookup(ctx, sc, t0)
		require.NoError(t, err)
		assert.Equal(t, idempotency.Record{}, none)
		b, err := s.Begin(ctx, sc, idempotency.Fingerprint{1}, t0, t0.Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, idempotency.Claimed, b.State)
		busy, err := s.Lookup(ctx, sc, t0)
		require.NoError(t, err)
		assert.Equal(t, idempotency.Record{State: idempotency.Busy}, busy)
		again, err := s.Begin(ctx, sc, idempotency.Fingerprint{1}, t0, t0.Add(time.Minute))
		require.NoError(t, err)
		assert.Equal(t, idempotency.Busy, again.State, "Lookup took no lock")
		other, err := s.Lookup(ctx, idempotency.Scope{Route: "POST /x", Key: "other"}, t0)
		require.NoError(t, err)
		assert.Equal(t, idempotency.Record{}, other, "another scope's lock is not this one's")
		resp := &idempotency.Response{Status: 201, Header: http.Header{"Location": {"/x"}}, Body: []byte("ok")}
		require.NoError(t, b.Claim.Complete(ctx, resp, t0.Add(time.Hour)))
		done, err := s.Lookup(ctx, sc, t0)
		require.NoError(t, err)
		assert.Equal(t, idempotency.Replay, done.State)
		assert.Equal(t, idempotency.Fingerprint{1}, done.Fingerprint)
		assert.Equal(t, resp, done.Response)
		assert.True(t, t0.Add(time.Hour).Equal(done.Expires))
		old, err := s.Lookup(ctx, sc, t0.Add(time.Hour))
		require.NoError(t, err)
		assert.True(t, old.Expired)
		assert.Equal(t, idempotency.State(0), old.State)
	}
}

// On a pgxpool.Pool the handler's Tx is the pipelined claim's: its Begin
// is a savepoint that rolls back alone, and the claim's transaction
// cannot be ended through it.
func TestPoolTxSavepoint(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, 4)
	s := newStore(t, pool)
	table := newTable()
	_, err := pool.Exec(ctx, `CREATE TABLE `+table+` (name text NOT NULL)`)
	require.NoError(t, err)
	mw, err := idempotency.New(s, idempotency.Config{})
	require.NoError(t, err)
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx := postgres.Tx(r.Context())
		assert.Error(t, tx.Commit(r.Context()), "the claim's transaction ends with the answer")
		sp, err := tx.Begin(r.Context())
		require.NoError(t, err)
		_, err = sp.Exec(r.Context(), `INSERT INTO `+table+` VALUES ('undone')`)
		require.NoError(t, err)
		require.NoError(t, sp.Rollback(r.Context()))
		sp, err = tx.Begin(r.Context())
		require.NoError(t, err)
		_, err = sp.Exec(r.Context(), `INSERT INTO `+table+` VALUES ('kept')`)
		require.NoError(t, err)
		require.NoError(t, sp.Commit(r.Context()))
		var n int
		require.NoError(t, tx.QueryRow(r.Context(), `SELECT count(*) FROM `+table).Scan(&n))
		assert.Equal(t, 1, n)
		w.WriteHeader(http.StatusCreated)
	}))
	req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "sp")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusCreated, rec.Code)
	var names []string
	rows, err := pool.Query(ctx, `SELECT name FROM `+table)
	require.NoError(t, err)
	names, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"kept"}, names, "the savepoint rolled back alone; the rest committed with the answer")
}

// useTx runs query in the request's transaction: Tx's, else SQLTx's.
func useTx(ctx context.Context, query string) error {
	if tx := postgres.Tx(ctx); tx != nil {
		_, err := tx.Exec(ctx, query)
		return err
	}
	tx := postgres.SQLTx(ctx)
	if tx == nil {
		return errors.New("no transaction")
	}
	_, err := tx.ExecContext(ctx, query)
	return err
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// With the database unreachable, a request the middleware passes through
// (a GET, a POST without a key) whose handler does not use its
// transaction is answered by the handler, as without the middleware: the
// transaction begins at the handler's first use, never before. A handler
// that uses it gets the error of the begin (pgx), or no transaction
// (database/sql), and answers for itself; a keyed POST is refused 503.
func TestPassThroughWithoutDatabase(t *testing.T) {
	host, port, err := net.SplitHostPort(closedPort(t))
	require.NoError(t, err)
	cfg, err := pgxpool.ParseConfig("host=" + host + " port=" + port + " user=nobody dbname=none sslmode=disable connect_timeout=5")
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	for name, s := range map[string]*postgres.Store{"pgxpool": postgres.New(pool), "database/sql": postgres.NewSQL(db)} {
		t.Run(name, func(t *testing.T) {
			mw, err := idempotency.New(s, idempotency.Config{Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Use-Tx") != "" {
					if err := useTx(r.Context(), "SELECT 1"); err != nil {
						http.Error(w, "database: "+err.Error(), http.StatusInternalServerError)
						return
					}
				}
				_, _ = w.Write([]byte("ok"))
			}))
			tests := []struct {
				name, method, key, useTx string
				status                   int
				body                     string
			}{
				{"GET, Tx unused", http.MethodGet, "", "", http.StatusOK, "ok"},
				{"POST without a key, Tx unused", http.MethodPost, "", "", http.StatusOK, "ok"},
				{"GET, Tx used", http.MethodGet, "", "1", http.StatusInternalServerError, "database: "},
				{"POST with a key", http.MethodPost, "k", "", http.StatusServiceUnavailable, "unavailable"},
			}
			for _, tt := range tests {
				req := httptest.NewRequest(tt.method, "/x", strings.NewReader(`{}`))
				if tt.key != "" {
					req.Header.Set("Idempotency-Key", tt.key)
				}
				if tt.useTx != "" {
					req.Header.Set("X-Use-Tx", tt.useTx)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				assert.Equal(t, tt.status, rec.Code, "%s: %s", tt.name, rec.Body)
				assert.Contains(t, rec.Body.String(), tt.body, tt.name)
			}
		})
	}
}
