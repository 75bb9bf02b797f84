package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
)

// failingStore fails every Begin, as a store that is down does.
type failingStore struct{ idempotency.Store }

func (failingStore) Begin(context.Context, idempotency.Scope, idempotency.Fingerprint, time.Time, time.Time) (idempotency.Begun, error) {
	return idempotency.Begun{}, errors.New("the store is down")
}

// A default Config logs a store failure to slog.Default(): a newcomer
// whose store is down sees why in the log, not only a 503.
func TestStoreFailureLoggedByDefault(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	mw, err := idempotency.New(failingStore{idempotency.NewMemoryStore()}, idempotency.Config{})
	require.NoError(t, err)
	h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the handler ran") }))
	req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "k")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, buf.String(), "idempotency: store_error")
	assert.Contains(t, buf.String(), "the store is down")

	buf.Reset()
	in := &idempotency.Inbox{Store: failingStore{idempotency.NewMemoryStore()}}
	_, _, err = in.Do(context.Background(), "evt", nil, func(context.Context) ([]byte, error) { return nil, nil })
	require.Error(t, err)
	assert.Contains(t, buf.String(), "the store is down", "the Inbox logs by default too")
}
