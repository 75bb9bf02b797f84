package resilient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/resilienthttp/resilient/persist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func opReq(t *testing.T, op, body string) *http.Request {
	t.Helper()
	return stubtest.Post(resilient.ContextWithOperation(context.Background(), op), body)
}

func TestStoreResumesPendingOperationWithSameKey(t *testing.T) {
	store := persist.NewMemory()
	ctx := context.Background()

	// First run: every attempt is reset after sending; the outcome is unknown.
	s1 := stubtest.New(stubtest.Fail(readErr()))
	_, err := do(t, resilient.NewTransport(s1, fast(resilient.WithStore(store))...), opReq(t, "refund:ch_123", `{"amount":1000}`))
	var re *resilient.Error
	require.ErrorAs(t, err, &re)
	assert.True(t, re.Unknown)
	assert.Equal(t, "refund:ch_123", re.Operation)
	pending, err := store.Pending(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 1, "an unknown outcome stays pending")
	assert.Equal(t, re.Key, pending[0].Key)
	assert.Equal(t, 4, pending[0].Attempts)

	// Second run (a restarted process): same operation, same key, and done.
	s2 := stubtest.New(stubtest.Reply(201, "Idempotency-Status: replayed"))
	resp, err := do(t, resilient.NewTransport(s2, fast(resilient.WithStore(store))...), opReq(t, "refund:ch_123", `{"amount":1000}`))
	require.NoError(t, err)
	assert.Equal(t, 201, resp.StatusCode)
	assert.Equal(t, re.Key, s2.Attempts()[0].Header.Get("Idempotency-Key"))
	pending, err = store.Pending(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending, "a definitive answer marks the operation done")

	// Third run after success: still the same key (the server replays).
	s3 := stubtest.New(stubtest.Reply(201))
	_, err = do(t, resilient.NewTransport(s3, fast(resilient.WithStore(store))...), opReq(t, "refund:ch_123", `{"amount":1000}`))
	require.NoError(t, err)
	assert.Equal(t, re.Key, s3.Attempts()[0].Header.Get("Idempotency-Key"))
}

func TestStoreTerminalAnswerIsDone(t *testing.T) {
	store := persist.NewMemory()
	s := stubtest.New(stubtest.Reply(400))
	_, err := do(t, resilient.NewTransport(s, fast(resilient.WithStore(store))...), opReq(t, "op", `{}`))
	require.NoError(t, err)
	pending, err := store.Pending(context.Background())
	require.NoError(t, err)
	assert.Empty(t, pending)
}

func TestStoreConcurrentClaimsGetOneKey(t *testing.T) {
	store := persist.NewMemory()
	s := stubtest.New(stubtest.Reply(201))
	tr := resilient.NewTransport(s, fast(resilient.WithStore(store))...)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			_, err := do(t, tr, opReq(t, "order:42", `{"sku":"x"}`))
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	at := s.Attempts()
	require.Len(t, at, 50)
	for _, a := range at {
		assert.Equal(t, at[0].Header.Get("Idempotency-Key"), a.Header.Get("Idempotency-Key"))
	}
}

func TestStoreMismatchedBodyFailsBeforeSending(t *testing.T) {
	store := persist.NewMemory()
	s := stubtest.New(stubtest.Fail(readErr()))
	tr := resilient.NewTransport(s, fast(resilient.WithStore(store))...)
	do(t, tr, opReq(t, "refund:1", `{"amount":1000}`))
	n := len(s.Attempts())

	_, err := do(t, tr, opReq(t, "refund:1", `{"amount":9999}`))
	require.ErrorIs(t, err, resilient.ErrOperationMismatch)
	assert.Len(t, s.Attempts(), n, "nothing sent")
}

func TestStoreExpiredKey(t *testing.T) {
	ctx := context.Background()
	store := persist.NewMemory()
	// A first run leaves the operation pending.
	do(t, resilient.NewTransport(stubtest.New(stubtest.Fail(readErr())), fast(resilient.WithStore(store))...), opReq(t, "refund:1", `{}`))
	recs, err := store.Pending(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 1)

	// Age it: same request, but a key minted in June 2024.
	aged := recs[0]
	aged.Key = "0190163d-8694-739b-aea5-966c26f8ad91"
	require.NoError(t, store.Delete(ctx, aged.Operation))
	_, _, err = store.Claim(ctx, aged)
	require.NoError(t, err)

	s := stubtest.New(stubtest.Reply(201))
	_, err = do(t, resilient.NewTransport(s, fast(resilient.WithStore(store))...), opReq(t, "refund:1", `{}`))
	require.ErrorIs(t, err, resilient.ErrKeyExpired)
	assert.Empty(t, s.Attempts(), "an expired key is not sent")

	// With a retention longer than its age, it is reused.
	_, err = do(t, resilient.NewTransport(s, fast(resilient.WithStore(store), resilient.WithKeyRetention(100*365*24*time.Hour))...), opReq(t, "refund:1", `{}`))
	require.NoError(t, err)
	assert.Equal(t, aged.Key, s.Attempts()[0].Header.Get("Idempotency-Key"))
}

// downStore is a Store whose backend is unreachable.
type downStore struct{ persist.Store }

var errDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (downStore) Claim(context.Context, persist.Record) (persist.Record, bool, error) {
	return persist.Record{}, false, errDown
}

func TestStoreDownSendsNothing(t *testing.T) {
	s := stubtest.New(stubtest.Reply(201))
	client := &http.Client{Transport: resilient.NewTransport(s, fast(resilient.WithStore(downStore{}))...)}
	_, err := client.Do(opReq(t, "refund:1", `{}`))
	require.ErrorIs(t, err, resilient.ErrStore)
	require.ErrorIs(t, err, errDown)
	assert.Empty(t, s.Attempts(), "no request without its durable key")

	// Requests without an operation do not touch the store.
	_, err = do(t, resilient.NewTransport(s, fast(resilient.WithStore(downStore{}))...), stubtest.Post(context.Background(), `{}`))
	require.NoError(t, err)
}

// Regression: a 307/308 redirect of an operation with a Store fails with
// ErrOperationMismatch: the redirect's fingerprint covers the new URL.
func TestRedirectOfAStoredOperation(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/new", http.StatusPermanentRedirect)
	})
	mux.HandleFunc("/new", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	store := persist.NewMemory()
	client := resilient.Wrap(srv.Client(), fast(resilient.WithStore(store))...)
	ctx := resilient.ContextWithOperation(context.Background(), "charge:1")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/old", strings.NewReader(`{"a":1}`))
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 201, resp.StatusCode)
}
