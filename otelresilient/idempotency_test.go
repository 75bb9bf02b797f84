package otelresilient_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
)

// A server's idempotency middleware, observed: each decision is counted
// under its name.
func TestObserveIdempotency(t *testing.T) {
	h := newHarness(t)
	mw, err := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{})
	require.NoError(t, err)
	reg, err := h.inst.ObserveIdempotency("payments", mw.Stats)
	require.NoError(t, err)
	srv := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	for _, body := range []string{`{"a":1}`, `{"a":1}`, `{"a":1}`, `{"a":2}`} {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", "k")
		srv.ServeHTTP(httptest.NewRecorder(), req)
	}
	got := counts(t, h.collect(t), "resilient.server.idempotency.decisions")
	assert.Equal(t, map[string]int64{
		"decision=stored,name=payments":   1,
		"decision=replayed,name=payments": 2,
		"decision=mismatch,name=payments": 1,
	}, got)

	require.NoError(t, reg.Unregister())
	assert.Empty(t, counts(t, h.collect(t), "resilient.server.idempotency.decisions"), "unregistered: no longer reported")
}
