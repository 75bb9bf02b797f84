package resilient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keylessAPI is an API that knows nothing of idempotency keys (GitHub's,
// say): every POST creates a resource. fault decides, per request number
// (1 for the first), what goes wrong after the resource is created.
type keylessAPI struct {
	effects atomic.Int32
	n       atomic.Int32
	fault   func(n int32) string // "", "drop" (commit, then close the connection), "503"
	echo    bool                 // echo the key (a server that dedupes would)
	mu      sync.Mutex
	keys    map[string]bool
}

func (a *keylessAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	n := a.n.Add(1)
	fault := ""
	if a.fault != nil {
		fault = a.fault(n)
	}
	if fault == "503" {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if a.echo {
		// A server that dedupes: the same key creates one resource.
		k := r.Header.Get("Idempotency-Key")
		a.mu.Lock()
		dup := a.keys[k]
		if a.keys == nil {
			a.keys = map[string]bool{}
		}
		a.keys[k] = true
		a.mu.Unlock()
		if !dup {
			a.effects.Add(1)
		}
		w.Header().Set("Idempotency-Key", k)
	} else {
		a.effects.Add(1)
	}
	if fault == "drop" {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	w.WriteHeader(http.StatusCreated)
}

func postTo(t *testing.T, client *http.Client, ctx context.Context, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"name":"repo"}`))
	require.NoError(t, err)
	resp, err := client.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// Regression (never worse than a bare client): against an API that ignores
// keys, a POST whose handler commits and then drops the connection creates
// one resource with the SDK, as without it, and the caller learns that the
// outcome is unknown. Both on a fresh connection (the SDK's own retry) and
// on a reused one (net/http's silent re-send of a request that carries an
// Idempotency-Key header).
func TestNoSecondEffectOnAServerThatIgnoresKeys(t *testing.T) {
	tests := []struct {
		name  string
		fault func(n int32) string
		ops   int
	}{
		{"fresh connection", func(n int32) string { return "drop" }, 1},
		{"reused connection", func(n int32) string {
			if n == 2 {
				return "drop"
			}
			return ""
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, wrap := range []bool{false, true} {
				api := &keylessAPI{fault: tt.fault}
				srv := httptest.NewServer(api)
				client := srv.Client()
				if wrap {
					client = resilient.Wrap(client, resilient.WithBackoff(nil))
				}
				var last error
				for range tt.ops {
					_, last = postTo(t, client, context.Background(), srv.URL+"/v1/repos")
				}
				srv.Close()
				require.Error(t, last, "wrapped=%v: the dropped answer is an error", wrap)
				assert.Equal(t, int32(tt.ops), api.effects.Load(), "wrapped=%v: one resource per operation", wrap)
				if wrap {
					var re *resilient.Error
					require.ErrorAs(t, last, &re)
					assert.True(t, re.Unknown, "the effect may exist")
					assert.ErrorIs(t, last, resilient.ErrUnsafeRetry)
				}
			}
		})
	}
}

// With evidence that the server dedupes — it echoes the key, the
// application declares it, or the key is the application's own — the lost
// answer is retried and the operation completes, with one effect.
func TestRetriedWhenTheServerDedupes(t *testing.T) {
	drop := func(n int32) string {
		if n == 1 {
			return "drop"
		}
		return ""
	}
	tests := []struct {
		name string
		echo bool
		opts func(host string) []resilient.Option
		ctx  context.Context
	}{
		{"application declares the host", false, func(h string) []resilient.Option { return []resilient.Option{resilient.WithDedupingServer(h)} }, context.Background()},
		{"application declares the host, any port", false, func(string) []resilient.Option { return []resilient.Option{resilient.WithDedupingServer("127.0.0.1")} }, context.Background()},
		{"application declares the path", false, func(h string) []resilient.Option { return []resilient.Option{resilient.WithDedupingServer(h + "/v1")} }, context.Background()},
		{"application declares the URL", false, func(h string) []resilient.Option {
			return []resilient.Option{resilient.WithDedupingServer("http://" + h + "/v1")}
		}, context.Background()},
		{"application's own key", false, nil, resilient.ContextWithKey(context.Background(), "create-repo-1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &keylessAPI{fault: drop, echo: true}
			srv := httptest.NewServer(api)
			defer srv.Close()
			opts := []resilient.Option{resilient.WithBackoff(nil)}
			if tt.opts != nil {
				opts = append(opts, tt.opts(srv.Listener.Addr().String())...)
			}
			resp, err := postTo(t, resilient.Wrap(srv.Client(), opts...), tt.ctx, srv.URL+"/v1/repos")
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, resp.StatusCode)
			assert.Equal(t, int32(1), api.effects.Load())
		})
	}
}

// Evidence shown on a plain success, with nothing observing the call (no
// Report: the first attempt's success ends it early), counts for the next
// operation on the route: a server that echoed the key has its lost answer
// retried; one that did not has the ambiguous failure returned.
func TestEvidenceFromASuccess(t *testing.T) {
	tests := []struct {
		name    string
		echo    bool
		retried bool
	}{
		{"server echoed the key", true, true},
		{"server showed nothing", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &keylessAPI{echo: tt.echo, fault: func(n int32) string {
				if n == 2 {
					return "drop"
				}
				return ""
			}}
			srv := httptest.NewServer(api)
			defer srv.Close()
			client := resilient.Wrap(srv.Client(), resilient.WithBackoff(nil))
			resp, err := postTo(t, client, context.Background(), srv.URL+"/v1/repos")
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			resp, err = postTo(t, client, context.Background(), srv.URL+"/v1/repos")
			assert.Equal(t, int32(2), api.effects.Load(), "one effect per operation")
			if !tt.retried {
				assert.ErrorIs(t, err, resilient.ErrUnsafeRetry)
				assert.Equal(t, int32(2), api.n.Load(), "not re-sent")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, resp.StatusCode)
			assert.Equal(t, int32(3), api.n.Load(), "the lost answer re-sent once")
		})
	}
}

// A declaration names a route: another port or path is not covered.
func TestDeclarationIsScoped(t *testing.T) {
	api := &keylessAPI{fault: func(int32) string { return "drop" }}
	srv := httptest.NewServer(api)
	defer srv.Close()
	decls := []string{"127.0.0.1:1", "127.0.0.1/v2", "", "/v1"} // an empty entry and a bare path declare nothing
	for _, decl := range decls {
		_, err := postTo(t, resilient.Wrap(srv.Client(), resilient.WithBackoff(nil), resilient.WithDedupingServer(decl)), context.Background(), srv.URL+"/v1/repos")
		assert.ErrorIs(t, err, resilient.ErrUnsafeRetry, decl)
	}
	assert.Equal(t, int32(len(decls)), api.effects.Load(), "one per operation")
}

// Evidence shown by the server is scoped to its route: behind one gateway,
// /payments may dedupe while /webhooks does not.
func TestEvidenceIsScopedToTheRoute(t *testing.T) {
	var webhooks atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/payments/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Idempotency-Key", r.Header.Get("Idempotency-Key"))
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("/webhooks/", func(w http.ResponseWriter, r *http.Request) {
		webhooks.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := resilient.Wrap(srv.Client(), resilient.WithBackoff(nil))
	resp, err := postTo(t, client, context.Background(), srv.URL+"/payments/p1")
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	rep := new(resilient.Report)
	resp, err = postTo(t, client, resilient.ContextWithReport(context.Background(), rep), srv.URL+"/webhooks/w1")
	require.NoError(t, err, "the 503 is returned as a bare client would return it")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, int32(1), webhooks.Load(), "not re-sent: no evidence on /webhooks")
	assert.ErrorIs(t, rep.Stopped, resilient.ErrUnsafeRetry)
	assert.True(t, rep.Unknown)
}

// Without evidence, a failure that proves the request was not applied is
// still retried: a refused connection, a 429.
func TestRetriedWithoutEvidenceWhenNothingWasApplied(t *testing.T) {
	t.Run("429", func(t *testing.T) {
		api := &keylessAPI{}
		var n atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			api.ServeHTTP(w, r)
		}))
		defer srv.Close()
		resp, err := postTo(t, resilient.Wrap(srv.Client(), resilient.WithBackoff(nil)), context.Background(), srv.URL+"/v1/repos")
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
		assert.Equal(t, int32(1), api.effects.Load())
	})
	t.Run("connection refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		ln.Close() // nothing listens: every dial is refused
		var attempts atomic.Int32
		obs := resilient.WithObserver(func(_ context.Context, e resilient.Event) {
			if e.Kind == resilient.EventAttempt {
				attempts.Add(1)
			}
		})
		_, err = postTo(t, resilient.Wrap(&http.Client{}, resilient.WithBackoff(nil), obs), context.Background(), "http://"+addr+"/v1/repos")
		require.Error(t, err)
		assert.False(t, errors.Is(err, resilient.ErrUnsafeRetry))
		assert.Equal(t, int32(4), attempts.Load(), "a refused dial is retried (WithMaxAttempts' default, 4)")
		var re *resilient.Error
		require.ErrorAs(t, err, &re)
		assert.False(t, re.Unknown, "nothing was sent")
	})
}

// A request without a key whose method is not idempotent (a POST when no
// method is keyed, a custom or WebDAV method, a method net/http sends as
// written, such as "post") can be deduped by nothing: it is re-sent only
// when the failure proves it was not applied, as a keyed one without
// evidence. A 503, 408 or 425 proves nothing (a proxy answers 503 after
// the backend applied it), so the caller has it as from a bare client,
// with ErrUnsafeRetry and Unknown. An idempotent method is retried.
func TestUnkeyedUnsafeRequestResentOnlyWhenNotApplied(t *testing.T) {
	unkeyed := []resilient.Option{resilient.WithKeyMethods()}
	refused := &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}
	tests := []struct {
		method   string
		opts     []resilient.Option
		code     int   // the first answer's status, or
		err      error // the first attempt's error
		attempts int   // what the server got
		unknown  bool  // the outcome may have been applied
	}{
		{"POST", unkeyed, 503, nil, 1, true},
		{"POST", unkeyed, 408, nil, 1, false},
		{"PURGE", nil, 503, nil, 1, true},
		{"LOCK", nil, 425, nil, 1, false},
		{"MKCOL", nil, 408, nil, 1, false},
		{"post", nil, 503, nil, 1, true},
		// Terminal for it already (the classifier): no guard needed.
		{"PURGE", nil, 502, nil, 1, true},
		{"PURGE", nil, 0, syscall.ECONNRESET, 1, true},
		// Proof that nothing was applied: re-sent, whatever the method.
		{"PURGE", nil, 429, nil, 2, false},
		{"POST", unkeyed, 429, nil, 2, false},
		{"PURGE", nil, 0, refused, 2, false},
		// Idempotent methods are retried without a key.
		{"PUT", nil, 503, nil, 2, false},
		{"DELETE", nil, 408, nil, 2, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %d %v", tt.method, tt.code, tt.err), func(t *testing.T) {
			first := stubtest.Reply(tt.code)
			if tt.err != nil {
				first = stubtest.Fail(tt.err)
			}
			s := stubtest.New(first, stubtest.Reply(200))
			rep := new(resilient.Report)
			req, err := http.NewRequestWithContext(resilient.ContextWithReport(context.Background(), rep), tt.method, stubtest.Target, strings.NewReader("{}"))
			require.NoError(t, err)
			resp, err := do(t, resilient.NewTransport(s, fast(tt.opts...)...), req)
			assert.Len(t, s.Attempts(), tt.attempts, "requests sent")
			for _, a := range s.Attempts() {
				assert.Empty(t, a.Header.Get("Idempotency-Key"), "no key minted")
			}
			if tt.attempts == 2 {
				require.NoError(t, err)
				assert.Equal(t, 200, resp.StatusCode)
				return
			}
			if tt.code == 503 || tt.code == 408 || tt.code == 425 {
				assert.ErrorIs(t, rep.Stopped, resilient.ErrUnsafeRetry, "a retryable answer, refused by the guard")
			}
			assert.Equal(t, tt.unknown, rep.Unknown)
			if tt.err == nil {
				require.NoError(t, err)
				assert.Equal(t, tt.code, resp.StatusCode, "the server's answer, as a bare client gets it")
			} else {
				assert.ErrorIs(t, err, tt.err)
			}
		})
	}
}
