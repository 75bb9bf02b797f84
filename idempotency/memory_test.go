package idempotency_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
)

func TestMemoryStoreLeaseTakeover(t *testing.T) {
	ctx := context.Background()
	m := idempotency.NewMemoryStore()
	s := idempotency.Scope{Route: "POST /x", Key: "k"}
	fp := idempotency.Fingerprint{1}
	t0 := time.Unix(1000, 0)

	first, err := m.Begin(ctx, s, fp, t0, t0.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, first.State)

	busy, err := m.Begin(ctx, s, fp, t0.Add(999*time.Millisecond), t0.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, idempotency.Busy, busy.State, "within the lease: never run twice at once")

	taken, err := m.Begin(ctx, s, fp, t0.Add(time.Second), t0.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, taken.State, "past the lease, a run that died is taken over")

	resp := &idempotency.Response{Status: 201, Body: []byte("second")}
	assert.ErrorIs(t, first.Claim.Complete(ctx, &idempotency.Response{Status: 201}, t0.Add(time.Hour)), idempotency.ErrClaimEnded)
	assert.ErrorIs(t, first.Claim.Release(ctx), idempotency.ErrClaimEnded)
	require.NoError(t, taken.Claim.Complete(ctx, resp, t0.Add(time.Hour)))
	assert.ErrorIs(t, taken.Claim.Release(ctx), idempotency.ErrClaimEnded, "a claim ends once")

	replay, err := m.Begin(ctx, s, fp, t0.Add(2*time.Second), t0.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, idempotency.Replay, replay.State)
	assert.Equal(t, resp, replay.Response)

	other, err := m.Begin(ctx, s, idempotency.Fingerprint{2}, t0.Add(2*time.Second), t0.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, idempotency.Mismatch, other.State)

	expired, err := m.Begin(ctx, s, idempotency.Fingerprint{2}, t0.Add(time.Hour), t0.Add(2*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, idempotency.Claimed, expired.State)
	assert.True(t, expired.Expired)
	require.NoError(t, expired.Claim.Release(ctx))
	assert.Equal(t, 0, m.Len(), "a released claim leaves no record")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = m.Begin(cctx, s, fp, t0, t0)
	assert.ErrorIs(t, err, context.Canceled)
}

// The handler's context ends at the request's deadline, else after Lease,
// and not when the client goes away.
func TestHandlerContextIsTheLease(t *testing.T) {
	mw, err := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{Lease: time.Hour})
	require.NoError(t, err)
	var deadline time.Time
	var hasDeadline bool
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deadline, hasDeadline = r.Context().Deadline()
	}))
	before := time.Now()
	req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "k")
	h.ServeHTTP(httptest.NewRecorder(), req)
	require.True(t, hasDeadline)
	assert.False(t, deadline.Before(before.Add(time.Hour)))

	want := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), want)
	defer cancel()
	req = httptest.NewRequestWithContext(ctx, http.MethodPost, "/x", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "k2")
	h.ServeHTTP(httptest.NewRecorder(), req)
	assert.Equal(t, want, deadline, "the request's own deadline is the lease")
}

func TestNewNilStore(t *testing.T) {
	_, err := idempotency.New(nil, idempotency.Config{})
	assert.ErrorContains(t, err, "nil Store")
}
