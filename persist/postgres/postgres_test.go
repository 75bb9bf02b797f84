package postgres_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/persisttest"
	"github.com/resilienthttp/resilient/persist/postgres"
)

func TestConformance(t *testing.T) {
	pool := newPool(t)
	persisttest.Run(t, func(t *testing.T) persist.Store { return newStore(t, pool) })
}

func TestConformanceDefaultTable(t *testing.T) {
	pool := newPool(t)
	persisttest.Run(t, func(t *testing.T) persist.Store {
		_, err := pool.Exec(t.Context(), `DROP TABLE IF EXISTS resilient_operations`)
		require.NoError(t, err)
		s := postgres.New(pool)
		require.NoError(t, s.CreateSchema(t.Context()))
		return s
	})
}

func TestCreateSchemaTwice(t *testing.T) {
	pool := newPool(t)
	_, err := pool.Exec(t.Context(), `CREATE SCHEMA IF NOT EXISTS app`)
	require.NoError(t, err)
	s := postgres.New(pool, postgres.WithTable("app", "Odd \"name\""))
	require.NoError(t, s.CreateSchema(t.Context()))
	require.NoError(t, s.CreateSchema(t.Context()), "idempotent")
	_, claimed, err := s.Claim(t.Context(), persist.Record{Operation: "op", Key: "k"})
	require.NoError(t, err)
	assert.True(t, claimed)
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM app."Odd ""name"""`).Scan(&n))
	assert.Equal(t, 1, n)
}

func TestClaimTxCommitsWithTheBusinessRow(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool)
	orders := newTable()
	_, err := pool.Exec(t.Context(), `CREATE TABLE `+orders+` (id text PRIMARY KEY)`)
	require.NoError(t, err)

	tests := []struct {
		name   string
		commit bool
	}{
		{"committed", true},
		{"rolled back", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := "pay:" + tt.name
			tx, err := pool.Begin(t.Context())
			require.NoError(t, err)
			_, err = tx.Exec(t.Context(), `INSERT INTO `+orders+` (id) VALUES ($1)`, op)
			require.NoError(t, err)
			rec, claimed, err := s.ClaimTx(t.Context(), tx, persist.Record{Operation: op, Key: "key-" + op})
			require.NoError(t, err)
			require.True(t, claimed)
			assert.Equal(t, persist.Pending, rec.State)
			assert.Empty(t, rec.Fingerprint)

			// Not visible outside the transaction before it commits.
			pending, err := s.Pending(t.Context())
			require.NoError(t, err)
			assert.NotContains(t, operations(pending), op)

			if tt.commit {
				require.NoError(t, tx.Commit(t.Context()))
			} else {
				require.NoError(t, tx.Rollback(t.Context()))
			}
			pending, err = s.Pending(t.Context())
			require.NoError(t, err)
			var orderRows int
			require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM `+orders+` WHERE id = $1`, op).Scan(&orderRows))
			if tt.commit {
				assert.Contains(t, operations(pending), op)
				assert.Equal(t, 1, orderRows)
				// The Transport's claim finds it, adopts the fingerprint
				// and sends the stored key.
				got, claimed, err := s.Claim(t.Context(), persist.Record{Operation: op, Key: "another", Fingerprint: "fp"})
				require.NoError(t, err)
				assert.False(t, claimed)
				assert.Equal(t, "key-"+op, got.Key)
				assert.Equal(t, "fp", got.Fingerprint)
				got, _, err = s.Claim(t.Context(), persist.Record{Operation: op, Key: "another", Fingerprint: "fp2"})
				require.NoError(t, err)
				assert.Equal(t, "fp", got.Fingerprint, "adopted once")
			} else {
				assert.NotContains(t, operations(pending), op)
				assert.Zero(t, orderRows)
			}
		})
	}
}

func TestClaimTxExisting(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool)
	first, claimed, err := s.ClaimTx(t.Context(), pool, persist.Record{Operation: "op", Key: "k1", Fingerprint: "fp"})
	require.NoError(t, err)
	require.True(t, claimed)
	tx, err := pool.Begin(t.Context())
	require.NoError(t, err)
	defer tx.Rollback(t.Context())
	again, claimed, err := s.ClaimTx(t.Context(), tx, persist.Record{Operation: "op", Key: "k2"})
	require.NoError(t, err)
	assert.False(t, claimed)
	assert.Equal(t, first, again)
}

func TestClaimTxInvalid(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool)
	for _, rec := range []persist.Record{{Key: "k"}, {Operation: "op"}, {Operation: "op", Key: "k", Attempts: -1}} {
		_, _, err := s.ClaimTx(t.Context(), pool, rec)
		assert.Error(t, err, "%+v", rec)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := s.ClaimTx(ctx, pool, persist.Record{Operation: "op", Key: "k"})
	require.ErrorIs(t, err, context.Canceled)
}

// TestClaimTxConcurrent: two transactions claim one operation; the second
// waits for the first and, once it commits, gets its record.
func TestClaimTxConcurrent(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool)
	tx1, err := pool.Begin(t.Context())
	require.NoError(t, err)
	_, claimed, err := s.ClaimTx(t.Context(), tx1, persist.Record{Operation: "op", Key: "k1"})
	require.NoError(t, err)
	require.True(t, claimed)
	type result struct {
		rec     persist.Record
		claimed bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		rec, claimed, err := s.ClaimTx(context.Background(), pool, persist.Record{Operation: "op", Key: "k2"})
		done <- result{rec, claimed, err}
	}()
	require.NoError(t, tx1.Commit(t.Context()))
	r := <-done
	require.NoError(t, r.err)
	assert.False(t, r.claimed)
	assert.Equal(t, "k1", r.rec.Key)
}

// TestLease drives the lease rules with a short lease: the first holder
// claims while it holds the generation; after a Resumer takes the record the
// first holder's Claim fails with ErrLeaseLost, even once the record is done.
func TestLease(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool, postgres.WithLease(time.Microsecond))
	_, _, err := s.ClaimTx(t.Context(), pool, persist.Record{Operation: "op", Key: "k"})
	require.NoError(t, err)

	r := &postgres.Resumer{Store: s, Client: deadClient(), KeysHonored: true,
		Request: func(ctx context.Context, rec persist.Record) (*http.Request, error) {
			// Inside the resume, the previous holder is refused.
			_, _, err := s.Claim(context.Background(), persist.Record{Operation: "op", Key: "k"})
			assert.ErrorIs(t, err, postgres.ErrLeaseLost)
			return nil, errSkip
		}}
	res, err := r.Resume(t.Context())
	require.ErrorIs(t, err, errSkip)
	assert.Equal(t, postgres.Result{Failed: 1}, res)
	require.NoError(t, s.Finish(t.Context(), "op", persist.Done, 1))
	_, _, err = s.Claim(t.Context(), persist.Record{Operation: "op", Key: "k"})
	require.ErrorIs(t, err, postgres.ErrLeaseLost, "a done record the resumer took is not for the first holder either")
}

// TestFinishStaleHolder: a Pending Finish of an earlier generation does not
// make a done record pending again; a Done one is always recorded.
func TestFinishStaleHolder(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool, postgres.WithLease(time.Microsecond))
	_, _, err := s.ClaimTx(t.Context(), pool, persist.Record{Operation: "op", Key: "k"})
	require.NoError(t, err)
	r := &postgres.Resumer{Store: s, Client: deadClient(), KeysHonored: true,
		Request: func(ctx context.Context, rec persist.Record) (*http.Request, error) {
			require.NoError(t, s.Finish(ctx, "op", persist.Done, 1)) // the resumer's generation
			return nil, errSkip
		}}
	_, err = r.Resume(t.Context())
	require.ErrorIs(t, err, errSkip)
	require.NoError(t, s.Finish(t.Context(), "op", persist.Pending, 2)) // the first holder, late
	pending, err := s.Pending(t.Context())
	require.NoError(t, err)
	assert.Empty(t, pending)
}

// operations returns the Operation of each record, in order.
func operations(recs []persist.Record) []string {
	ops := make([]string, 0, len(recs))
	for _, r := range recs {
		ops = append(ops, r.Operation)
	}
	return ops
}

// errSkip is what a test's request builder returns to stop there.
var errSkip = errors.New("skip")

// deadClient is a client whose every request fails without a network: the
// tests that use it never send.
func deadClient() *http.Client {
	return &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("deadClient: no network in this test")
	})}
}

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// BenchmarkClaim measures Store.Claim of new operations at 1 and 64
// goroutines (persisttest.Benchmark) against the test server.
func BenchmarkClaim(b *testing.B) {
	pool := newPool(b)
	persisttest.Benchmark(b, func(b *testing.B) persist.Store { return newStore(b, pool) })
}
