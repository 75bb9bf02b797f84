package postgres_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/idempotency/postgres"
)

// TestReadmePostgres is idempotency/README.md's PostgreSQL snippet, run on a
// fresh, empty database, from
// start to replay: a first POST stored, its retry replayed, a POST without
// a key in a transaction too, and one payment per key.
func TestReadmePostgres(t *testing.T) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	db := "readme_" + newTable()
	_, err = admin.Exec(ctx, `CREATE DATABASE `+db)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `DROP DATABASE `+db+` WITH (FORCE)`)
		_ = admin.Close(context.Background())
	})
	dsn := strings.Replace(dsn, "dbname=postgres", "dbname="+db, 1)
	require.Contains(t, dsn, "dbname="+db)
	mux := http.NewServeMux()

	// README: begin
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	store := postgres.New(pool)
	if err := store.CreateSchema(ctx); err != nil { // once, at startup
		log.Fatal(err)
	}
	_, err = pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS payments (
		id bigserial PRIMARY KEY, amount int NOT NULL)`) // the application's own
	if err != nil {
		log.Fatal(err)
	}
	mw, err := idempotency.New(store, idempotency.Config{})
	if err != nil {
		log.Fatal(err)
	}
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id int64
		err := postgres.Tx(r.Context()).QueryRow(r.Context(),
			`INSERT INTO payments (amount) VALUES (1000) RETURNING id`).Scan(&id)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError) // rolled back, not stored
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id": %d}`, id)
	})
	mux.Handle("POST /payments", mw.Handler(pay)) // after authentication
	// README: end

	t.Cleanup(pool.Close)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	post := func(key string) (int, string, string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(`{"amount": 1000}`))
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, resp.Header.Get("Idempotency-Status"), string(b)
	}
	tests := []struct{ key, status, mark, body string }{
		{"order-1", "201", idempotency.StatusStored, `{"id": 1}`},
		{"order-1", "201", idempotency.StatusReplayed, `{"id": 1}`},
		{"", "201", "", `{"id": 2}`}, // no key: run as it is, in a transaction all the same
		{"order-2", "201", idempotency.StatusStored, `{"id": 3}`},
	}
	for _, tt := range tests {
		code, mark, body := post(tt.key)
		assert.Equal(t, tt.status, fmt.Sprint(code), "%q: %s", tt.key, body)
		assert.Equal(t, tt.mark, mark, tt.key)
		assert.Equal(t, tt.body, body, tt.key)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&n))
	assert.Equal(t, 3, n, "one payment per key, and the keyless one")
}
