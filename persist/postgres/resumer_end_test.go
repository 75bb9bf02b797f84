package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/postgres"
)

// TestResumeEndsWhenEveryResendFails: more due records than Limit, a lease
// shorter than a batch, every re-send failing. One Resume takes each record
// once and returns, with a bounded error: the count and a sample.
func TestResumeEndsWhenEveryResendFails(t *testing.T) {
	pool := newPool(t)
	store := newStore(t, pool, postgres.WithLease(time.Microsecond))
	const records = 20
	for i := range records {
		_, _, err := store.ClaimTx(t.Context(), pool, persist.Record{Operation: fmt.Sprintf("pay:o%02d", i), Key: fmt.Sprintf("key-%02d", i)})
		require.NoError(t, err)
	}
	var (
		mu    sync.Mutex
		tries = map[string]int{}
	)
	r := &postgres.Resumer{Store: store, Client: deadClient(), Limit: 3,
		Request: func(ctx context.Context, rec persist.Record) (*http.Request, error) {
			mu.Lock()
			tries[rec.Operation]++
			mu.Unlock()
			return http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:1/v1/payments", nil)
		},
		Unknown: func(context.Context, pgx.Tx, persist.Record) error {
			t.Error("a record never sent was handed over")
			return nil
		},
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := r.Resume(ctx)
	require.NoError(t, ctx.Err(), "Resume returned only when its context ended")
	assert.Equal(t, postgres.Result{Failed: records}, res)
	require.Len(t, tries, records)
	for op, n := range tries {
		assert.Equal(t, 1, n, "%s taken more than once by one Resume", op)
	}
	var rerr *postgres.ResumeError
	require.ErrorAs(t, err, &rerr)
	assert.Equal(t, records, rerr.Count)
	assert.Len(t, rerr.Sample, 8)
	assert.Contains(t, rerr.Sample[0].Error(), "try 1")
	assert.Less(t, len(err.Error()), 4096, "a bounded error")

	// The records stay pending, each with one try; a second Resume tries
	// again (their leases, doubled, are still microseconds).
	var sumTries int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT sum(tries) FROM `+store.Table()+` WHERE state = 1`).Scan(&sumTries))
	assert.Equal(t, records, sumTries)
	time.Sleep(time.Millisecond) // the doubled leases (2 µs) expire
	res, err = r.Resume(ctx)
	require.ErrorAs(t, err, &rerr)
	assert.Equal(t, postgres.Result{Failed: records}, res)
	assert.Contains(t, rerr.Sample[0].Error(), "try 2")
}

// TestResumeRebuildErrors: a request that can never be rebuilt
// (ErrCannotRebuild) is handed to Unknown once; a transient failure to
// rebuild it is tried again, with a try count, and never handed over.
func TestResumeRebuildErrors(t *testing.T) {
	pool := newPool(t)
	store := newStore(t, pool, postgres.WithLease(time.Microsecond))
	for _, op := range []string{"pay:gone", "pay:blip"} {
		_, _, err := store.ClaimTx(t.Context(), pool, persist.Record{Operation: op, Key: "key-" + op})
		require.NoError(t, err)
	}
	var handed []string
	r := &postgres.Resumer{Store: store, Client: deadClient(),
		Request: func(ctx context.Context, rec persist.Record) (*http.Request, error) {
			if rec.Operation == "pay:gone" {
				return nil, fmt.Errorf("order row deleted: %w", postgres.ErrCannotRebuild)
			}
			return nil, errors.New("connection reset by peer")
		},
		Unknown: func(ctx context.Context, tx pgx.Tx, rec persist.Record) error {
			handed = append(handed, rec.Operation)
			return nil
		},
	}
	for pass := 1; pass <= 3; pass++ {
		res, err := r.Resume(t.Context())
		var rerr *postgres.ResumeError
		require.ErrorAs(t, err, &rerr, "pass %d", pass)
		assert.Equal(t, 1, rerr.Count, "pass %d: the transient failure", pass)
		assert.Contains(t, rerr.Error(), fmt.Sprintf("try %d", pass))
		want := postgres.Result{Failed: 1}
		if pass == 1 {
			want.Unknown = 1
		}
		assert.Equal(t, want, res, "pass %d", pass)
		time.Sleep(10 * time.Millisecond) // the doubled lease expires
	}
	assert.Equal(t, []string{"pay:gone"}, handed, "handed over once")
	pending, err := store.Pending(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"pay:blip"}, operations(pending), "never turned permanent")
}

// TestResumeRefusedRebuild: a rebuilt request whose fingerprint differs
// from the record's is refused by the Transport before sending
// (ErrOperationMismatch): no later try can send it, so it is handed over
// once, and nothing is sent.
func TestResumeRefusedRebuild(t *testing.T) {
	pool := newPool(t)
	store := newStore(t, pool, postgres.WithLease(time.Microsecond))
	api := newPayAPI(t, store)
	_, _, err := store.ClaimTx(t.Context(), pool, persist.Record{Operation: "pay:o1", Key: "key-o1", Fingerprint: "another request's"})
	require.NoError(t, err)
	var handed int
	r := &postgres.Resumer{Store: store, Client: api.client,
		Request: func(ctx context.Context, rec persist.Record) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodPost, api.srv.URL+"/v1/payments", nil)
		},
		Unknown: func(context.Context, pgx.Tx, persist.Record) error {
			handed++
			return nil
		},
	}
	res, err := r.Resume(t.Context())
	require.NoError(t, err)
	assert.Equal(t, postgres.Result{Unknown: 1}, res)
	assert.Equal(t, 1, handed)
	assert.Empty(t, api.is.orders())
	_, sends := recordCount(t, pool, store, "pay:o1")
	assert.Zero(t, sends, "a refused call counts no send")
}

// TestResumerRun: Run passes until its context ends, reporting each pass,
// and returns the context's error; a Resumer without its required fields
// returns at once.
func TestResumerRun(t *testing.T) {
	pool := newPool(t)
	store := newStore(t, pool, postgres.WithLease(time.Microsecond))
	api := newPayAPI(t, store)
	_, _, err := store.ClaimTx(t.Context(), pool, persist.Record{Operation: "pay:o1", Key: "key-o1"})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var results []postgres.Result
	r := &postgres.Resumer{Store: store, Client: api.client, KeysHonored: true,
		Request: func(ctx context.Context, rec persist.Record) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodPost, api.srv.URL+"/v1/payments", strings.NewReader(`{"order":"o1"}`))
		},
		Report: func(res postgres.Result, err error) {
			assert.NoError(t, err)
			results = append(results, res)
			if len(results) == 3 {
				cancel()
			}
		},
	}
	require.ErrorIs(t, r.Run(ctx, time.Millisecond), context.Canceled)
	assert.Equal(t, []postgres.Result{{Resent: 1}, {}, {}}, results)
	assert.Equal(t, []string{"o1"}, api.is.orders())

	err = (&postgres.Resumer{Store: store}).Run(t.Context(), time.Millisecond)
	require.Error(t, err)
	assert.NotErrorIs(t, err, context.Canceled)
}
