package idempotency_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
)

// countingStore is a MemoryStore seen as another Store (one that may hold
// records of an older version), counting its Begins.
type countingStore struct {
	*idempotency.MemoryStore
	begins atomic.Int64
}

func (s *countingStore) Begin(ctx context.Context, sc idempotency.Scope, fp idempotency.Fingerprint, now, lease time.Time) (idempotency.Begun, error) {
	s.begins.Add(1)
	return s.MemoryStore.Begin(ctx, sc, fp, now, lease)
}

// TestLegacyLookupsEnd: records of scope version 1 are looked up (one more
// Begin per request with a principal) until twice the TTL after the first
// middleware of version 2 used the store, as its marker record says; a
// later middleware reads the marker.
func TestLegacyLookupsEnd(t *testing.T) {
	clock := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	store := &countingStore{MemoryStore: idempotency.NewMemoryStore()}
	serve := func(mw *idempotency.Middleware, key, auth string) int64 {
		t.Helper()
		before := store.begins.Load()
		req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(201) })).ServeHTTP(w, req)
		require.Equal(t, http.StatusCreated, w.Code)
		return store.begins.Load() - before
	}
	first, err := idempotency.New(store, idempotency.Config{Now: now, TTL: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, int64(3), serve(first, "a", "Bearer x"), "the marker written, the version 1 scope, the scope")
	assert.Equal(t, int64(2), serve(first, "b", "Bearer x"), "the version 1 scope, the scope")
	assert.Equal(t, int64(1), serve(first, "c", ""), "no principal: version 1's scope is version 2's")
	clock = clock.Add(90 * time.Minute)
	later, err := idempotency.New(store, idempotency.Config{Now: now, TTL: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, int64(3), serve(later, "d", "Bearer x"), "the marker read, the version 1 scope, the scope")
	clock = clock.Add(30 * time.Minute)
	assert.Equal(t, int64(1), serve(first, "e", "Bearer x"), "two TTLs after the marker: no more lookups")
	assert.Equal(t, int64(1), serve(later, "f", "Bearer x"))

}
