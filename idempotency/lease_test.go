package idempotency_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
)

// A handler that ignores its context and runs ten leases keeps its claim:
// the middleware renews it every third of the lease, so a duplicate at
// any time gets 409, and the renewal stops with the handler (synctest
// ends only when every goroutine of the bubble has).
func TestMemoryLeaseSlowHandlerKeepsClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := idempotency.NewMemoryStore()
		mw, err := idempotency.New(store, idempotency.Config{Lease: time.Minute})
		require.NoError(t, err)
		var runs atomic.Int64
		h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			time.Sleep(10 * time.Minute) // ignores its context, which ended at 1 min
			w.WriteHeader(http.StatusCreated)
		}))
		serve := func() *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(`{}`))
			req.Header.Set("Idempotency-Key", "slow")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec
		}
		first := make(chan *httptest.ResponseRecorder)
		go func() { first <- serve() }()
		for range 9 {
			time.Sleep(time.Minute)
			assert.Equal(t, http.StatusConflict, serve().Code, "the owner is alive: 409")
		}
		got := <-first
		assert.Equal(t, http.StatusCreated, got.Code)
		assert.Equal(t, idempotency.StatusStored, got.Header().Get("Idempotency-Status"))
		assert.Equal(t, idempotency.StatusReplayed, serve().Header().Get("Idempotency-Status"))
		assert.Equal(t, int64(1), runs.Load(), "one run")
		assert.Equal(t, int64(9), mw.Stats().InProgress)
	})
}

// The bound of the memory store: a claim whose owner stopped renewing
// passes on exactly one lease after its last renewal, never before.
func TestMemoryLeaseRenewBound(t *testing.T) {
	ctx := context.Background()
	m := idempotency.NewMemoryStore()
	s := idempotency.Scope{Route: "POST /x", Key: "k"}
	fp := idempotency.Fingerprint{1}
	t0 := time.Unix(1000, 0)
	first, err := m.Begin(ctx, s, fp, t0, t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, first.State)
	last := t0
	for i := 1; i <= 5; i++ { // renewed every 40 s: held for 200 s
		last = t0.Add(time.Duration(i) * 40 * time.Second)
		require.NoError(t, first.Claim.(idempotency.Renewer).Renew(ctx, last.Add(time.Minute)))
		b, err := m.Begin(ctx, s, fp, last.Add(time.Second), last.Add(time.Minute))
		require.NoError(t, err)
		assert.Equal(t, idempotency.Busy, b.State, "renewed at %v", last.Sub(t0))
	}
	// The owner stops (died, or paused) at last.
	busy, err := m.Begin(ctx, s, fp, last.Add(time.Minute-time.Nanosecond), last.Add(2*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, idempotency.Busy, busy.State, "within a lease of the last renewal")
	taken, err := m.Begin(ctx, s, fp, last.Add(time.Minute), last.Add(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, taken.State, "a lease after the last renewal")
	assert.ErrorIs(t, first.Claim.(idempotency.Renewer).Renew(ctx, last.Add(3*time.Minute)), idempotency.ErrClaimEnded, "the paused owner learns it lost the claim")
	assert.ErrorIs(t, first.Claim.Complete(ctx, &idempotency.Response{Status: 201}, t0.Add(time.Hour)), idempotency.ErrClaimEnded)
	require.NoError(t, taken.Claim.Release(ctx))
	assert.ErrorIs(t, taken.Claim.(idempotency.Renewer).Renew(ctx, last.Add(3*time.Minute)), idempotency.ErrClaimEnded, "an ended claim is not renewed")
}

// Inbox.Do's fn is renewed the same way.
func TestMemoryLeaseInboxSlowFn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := &idempotency.Inbox{Store: idempotency.NewMemoryStore(), Lease: time.Minute}
		var runs atomic.Int64
		fn := func(context.Context) ([]byte, error) {
			runs.Add(1)
			time.Sleep(10 * time.Minute)
			return []byte("ok"), nil
		}
		done := make(chan error)
		go func() {
			_, _, err := in.Do(context.Background(), "evt", nil, fn)
			done <- err
		}()
		for range 9 {
			time.Sleep(time.Minute)
			_, _, err := in.Do(context.Background(), "evt", nil, fn)
			assert.ErrorIs(t, err, idempotency.ErrInProgress)
		}
		require.NoError(t, <-done)
		res, replayed, err := in.Do(context.Background(), "evt", nil, fn)
		require.NoError(t, err)
		assert.True(t, replayed)
		assert.Equal(t, "ok", string(res))
		assert.Equal(t, int64(1), runs.Load())
	})
}

// Lookup reads a record's state without claiming it: in progress (with
// its lease, which renewals move), replayable, expired.
func TestMemoryLookup(t *testing.T) {
	ctx := context.Background()
	m := idempotency.NewMemoryStore()
	s := idempotency.Scope{Route: "POST /x", Key: "k"}
	fp := idempotency.Fingerprint{7}
	t0 := time.Unix(1000, 0)
	none, err := m.Lookup(ctx, s, t0)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Record{}, none)
	b, err := m.Begin(ctx, s, fp, t0, t0.Add(time.Minute))
	require.NoError(t, err)
	busy, err := m.Lookup(ctx, s, t0)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Record{State: idempotency.Busy, Fingerprint: fp, Lease: t0.Add(time.Minute)}, busy)
	require.NoError(t, b.Claim.(idempotency.Renewer).Renew(ctx, t0.Add(2*time.Minute)))
	busy, err = m.Lookup(ctx, s, t0.Add(90*time.Second))
	require.NoError(t, err)
	assert.Equal(t, idempotency.Busy, busy.State, "renewed")
	again, err := m.Begin(ctx, s, fp, t0.Add(90*time.Second), t0.Add(3*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, idempotency.Busy, again.State, "Lookup claimed nothing")
	resp := &idempotency.Response{Status: 201, Body: []byte("ok")}
	require.NoError(t, b.Claim.Complete(ctx, resp, t0.Add(time.Hour)))
	done, err := m.Lookup(ctx, s, t0)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Record{State: idempotency.Replay, Fingerprint: fp, Response: resp, Expires: t0.Add(time.Hour)}, done)
	old, err := m.Lookup(ctx, s, t0.Add(time.Hour))
	require.NoError(t, err)
	assert.True(t, old.Expired)
	assert.Equal(t, idempotency.State(0), old.State)
}
