package postgres_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/postgres"
)

func TestResumerConfig(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool)
	build := func(context.Context, persist.Record) (*http.Request, error) { return nil, errSkip }
	unknown := func(context.Context, pgx.Tx, persist.Record) error { return nil }
	tests := []struct {
		name string
		r    postgres.Resumer
	}{
		{"no store", postgres.Resumer{Client: deadClient(), Request: build, Unknown: unknown}},
		{"no client", postgres.Resumer{Store: s, Request: build, Unknown: unknown}},
		{"no request", postgres.Resumer{Store: s, Client: deadClient(), Unknown: unknown}},
		{"no unknown for a key-ignoring API", postgres.Resumer{Store: s, Client: deadClient(), Request: build}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.r.Resume(t.Context())
			require.Error(t, err)
		})
	}
}

// TestResumerHandOver: against a key-ignoring API, a record that may have
// been sent is handed to Unknown, in a transaction with the hand-over; if
// Unknown fails, neither commits and the record stays pending; a record
// younger than Grace is left alone.
func TestResumerHandOver(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool, postgres.WithLease(time.Microsecond))
	notes := newTable()
	_, err := pool.Exec(t.Context(), `CREATE TABLE `+notes+` (op text PRIMARY KEY, key text NOT NULL)`)
	require.NoError(t, err)
	// Claimed by a Transport (a send counted), then the process died.
	_, claimed, err := s.Claim(t.Context(), persist.Record{Operation: "pay:o1", Key: "k1", Fingerprint: "fp"})
	require.NoError(t, err)
	require.True(t, claimed)

	fail := true
	r := &postgres.Resumer{Store: s, Client: deadClient(),
		Request: func(context.Context, persist.Record) (*http.Request, error) {
			t.Error("a record that may have been sent was rebuilt to be re-sent")
			return nil, errSkip
		},
		Unknown: func(ctx context.Context, tx pgx.Tx, rec persist.Record) error {
			if _, err := tx.Exec(ctx, `INSERT INTO `+notes+` (op, key) VALUES ($1, $2)`, rec.Operation, rec.Key); err != nil {
				return err
			}
			if fail {
				return errors.New("the application failed")
			}
			return nil
		},
	}
	res, err := r.Resume(t.Context())
	require.Error(t, err)
	assert.Equal(t, postgres.Result{Failed: 1}, res)
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM `+notes).Scan(&n))
	assert.Zero(t, n, "the application's write rolled back with the hand-over")
	pending, err := s.Pending(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"pay:o1"}, operations(pending))

	r.Grace = time.Hour
	res, err = r.Resume(t.Context())
	require.NoError(t, err)
	assert.Equal(t, postgres.Result{}, res, "younger than the grace period")

	r.Grace, fail = 0, false
	res, err = r.Resume(t.Context())
	require.NoError(t, err)
	assert.Equal(t, postgres.Result{Unknown: 1}, res)
	var key string
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT key FROM `+notes+` WHERE op = 'pay:o1'`).Scan(&key))
	assert.Equal(t, "k1", key)
	pending, err = s.Pending(t.Context())
	require.NoError(t, err)
	assert.Empty(t, pending)
	var unknown bool
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT unknown FROM `+s.Table()+` WHERE operation = 'pay:o1'`).Scan(&unknown))
	assert.True(t, unknown)

	res, err = r.Resume(t.Context())
	require.NoError(t, err)
	assert.Equal(t, postgres.Result{}, res, "a done record is never re-driven")
}

// TestResumerResendsUnsent: a record no Transport ever claimed is re-sent
// even against a key-ignoring API, with its key, and ends done.
func TestResumerResendsUnsent(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool, postgres.WithLease(time.Microsecond))
	is := &ignoringServer{}
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		is.ServeHTTP(w, r)
	}))
	defer srv.Close()
	client := &http.Client{Transport: resilient.NewTransport(srv.Client().Transport, resilient.WithStore(s))}
	defer client.CloseIdleConnections()
	_, _, err := s.ClaimTx(t.Context(), pool, persist.Record{Operation: "pay:o1", Key: "k1"})
	require.NoError(t, err)
	var answered int
	r := &postgres.Resumer{Store: s, Client: client,
		Request: func(ctx context.Context, rec persist.Record) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/payments", strings.NewReader(`{"order":"o1"}`))
		},
		Response: func(ctx context.Context, rec persist.Record, resp *http.Response) error {
			answered = resp.StatusCode
			return nil
		},
		Unknown: func(context.Context, pgx.Tx, persist.Record) error {
			t.Error("a record never sent was handed over")
			return nil
		},
	}
	res, err := r.Resume(t.Context())
	require.NoError(t, err)
	assert.Equal(t, postgres.Result{Resent: 1}, res)
	assert.Equal(t, http.StatusCreated, answered)
	assert.Equal(t, []string{"k1"}, keys)
	assert.Equal(t, []string{"o1"}, is.orders())
	pending, err := s.Pending(t.Context())
	require.NoError(t, err)
	assert.Empty(t, pending)
}
