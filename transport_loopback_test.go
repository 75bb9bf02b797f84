package resilient_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keysSeen is a handler wrapper that records the key of every request.
type keysSeen struct {
	mu   sync.Mutex
	keys []string
	next http.HandlerFunc
}

func (k *keysSeen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	k.keys = append(k.keys, r.Header.Get("Idempotency-Key"))
	n := len(k.keys)
	k.mu.Unlock()
	io.Copy(io.Discard, r.Body)
	if n == 1 {
		// Lose the response: close the connection after reading the request.
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic("no hijacker")
		}
		conn, _, _ := hj.Hijack()
		conn.Close()
		return
	}
	k.next(w, r)
}

func TestLostResponseRetriedWithSameKeyOverLoopback(t *testing.T) {
	h := &keysSeen{next: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }}
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := resilient.Wrap(srv.Client(), fast(resilient.WithDedupingServer(srv.Listener.Addr().String()))...)
	resp, err := client.Post(srv.URL+"/v1/charges", "application/json", strings.NewReader(`{"amount":1}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	require.GreaterOrEqual(t, len(h.keys), 2)
	for _, k := range h.keys {
		assert.Equal(t, h.keys[0], k)
	}
	assert.NotEmpty(t, h.keys[0])
}

func TestRedirectKeepsTheKey(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	mux := http.NewServeMux()
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		http.Redirect(w, r, "/new", http.StatusPermanentRedirect)
	})
	mux.HandleFunc("/new", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
		w.Write(b)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := resilient.Wrap(srv.Client(), fast()...)
	resp, err := client.Post(srv.URL+"/old", "application/json", strings.NewReader(`{"a":1}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, `{"a":1}`, string(b), "the 308 re-sends the body")
	require.Len(t, keys, 2)
	assert.NotEmpty(t, keys[0])
	assert.Equal(t, keys[0], keys[1], "a 308 re-send of a POST is the same operation")
}

func TestCancelDuringAttemptOverLoopback(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	client := resilient.Wrap(srv.Client(), fast()...)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
	start := time.Now()
	_, err := client.Do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 30*time.Second, "bounded by the deadline, not by the hanging server (a generous bound: CI is busy)")
	var re *resilient.Error
	require.ErrorAs(t, err, &re)
	assert.True(t, re.Unknown, "the request was sent and no answer came: the outcome is unknown")
	assert.Equal(t, 1, re.Attempts)
	srv.CloseClientConnections()
}
