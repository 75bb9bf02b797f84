package resilient_test

// Regression tests for defects found in review; each names what it guards.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/retrycontrol"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/resilienthttp/resilient/persist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Regression: a caller's ClientTrace is composed into the Transport's shared trace on
// every attempt, so its hooks fire once per attempt so far (1+2+3).
func TestCallerTraceHooksFireOncePerAttempt(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if n.Add(1) < 3 {
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(201)
	}))
	defer srv.Close()
	var wrote, gotConn atomic.Int32
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Add(1) },
		GotConn:      func(httptrace.GotConnInfo) { gotConn.Add(1) },
	})
	client := resilient.Wrap(srv.Client(), fast(resilient.WithDedupingServer(srv.Listener.Addr().String()))...)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, int32(3), n.Load())
	assert.Equal(t, int32(3), wrote.Load(), "caller's WroteRequest once per attempt")
	assert.Equal(t, int32(3), gotConn.Load(), "caller's GotConn once per attempt")
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

// Regression: retryable-but-unsafe outcomes (500 or reset on an unkeyed POST) are
// Terminal, so the breaker counts them as successes and never opens.
func TestBreakerCountsUnsafe5xxAsFailures(t *testing.T) {
	s := stubtest.New(stubtest.Reply(500))
	tr := breakerTransport(s, resilient.WithKeyMethods())
	for range 100 {
		_, err := do(t, tr, stubtest.Post(context.Background(), "{}"))
		if errors.Is(err, resilient.ErrCircuitOpen) {
			return
		}
	}
	t.Errorf("100 × 500 from the host, breaker never opened (%d sent)", len(s.Attempts()))
}

// Regression: X-Should-Retry: false on a 2xx turns a success into Terminal: the earlier
// ambiguous attempt is never cleared, store stays Pending, outcome "terminal".
func TestShouldRetryHintLeavesSuccessAlone(t *testing.T) {
	store := persist.NewMemory()
	s := stubtest.New(stubtest.Fail(readErr()), stubtest.Reply(201, "Idempotency-Status: replayed", "Stripe-Should-Retry: false"))
	rep := new(resilient.Report)
	ctx := resilient.ContextWithReport(resilient.ContextWithOperation(context.Background(), "op"), rep)
	resp, err := do(t, resilient.NewTransport(s, fast(resilient.WithStore(store))...), stubtest.Post(ctx, "{}"))
	require.NoError(t, err)
	assert.Equal(t, 201, resp.StatusCode)
	assert.Equal(t, resilient.Success, rep.Attempts[1].Action)
	assert.False(t, rep.Unknown, "a replayed 201 answers for attempt 0")
	p, _ := store.Pending(context.Background())
	assert.Empty(t, p)
}

// Regression: an unkeyed POST re-sent after a 503 (which the classifier marks
// Unknown) must stay Unknown after the next 200: the first POST may also
// have been applied.
func TestUnkeyedPostAfter503StaysUnknown(t *testing.T) {
	s := stubtest.New(stubtest.Reply(503), stubtest.Reply(200))
	rep := new(resilient.Report)
	_, err := do(t, resilient.NewTransport(s, fast(resilient.WithKeyMethods())...),
		stubtest.Post(resilient.ContextWithReport(context.Background(), rep), "{}"))
	require.NoError(t, err)
	assert.Len(t, s.Attempts(), 2, "a 503 is retried for any method (shed before processing, by convention)")
	assert.True(t, rep.Unknown, "without a key the second success does not answer for the first POST")
}

// Regression: nil URL with an observer panics in emit.
func TestNilURLWithObserver(t *testing.T) {
	tr := resilient.NewTransport(stubtest.New(stubtest.Reply(200)), resilient.WithObserver(func(context.Context, resilient.Event) {}))
	req := &http.Request{Method: "GET", Header: http.Header{}}
	assert.NotPanics(t, func() {
		_, err := tr.RoundTrip(req)
		assert.ErrorIs(t, err, resilient.ErrInvalidRequest)
	})
}

// Regression: WithMaxBodyBuffer(math.MaxInt64): limit+1 overflows, LimitReader reads
// nothing and a body of unknown length is sent empty.
func TestHugeBodyBufferLimit(t *testing.T) {
	s := stubtest.New(stubtest.Reply(200))
	pr, pw := io.Pipe()
	go func() { pw.Write([]byte(`{"amount":100}`)); pw.Close() }()
	req, _ := http.NewRequest(http.MethodPost, target, pr)
	_, err := do(t, resilient.NewTransport(s, fast(resilient.WithMaxBodyBuffer(math.MaxInt64))...), req)
	require.NoError(t, err)
	assert.Equal(t, `{"amount":100}`, string(s.Attempts()[0].Body))
}

// Regression: Error.StatusCode is "the status of the last response seen", but finish
// hard-codes 0 while fail reports it.
func TestErrorCarriesLastStatus(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(503), stubtest.Fail(readErr()))
	_, err := do(t, resilient.NewTransport(s, fast(resilient.WithMaxAttempts(2))...), stubtest.Post(context.Background(), "{}"))
	var re *resilient.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 503, re.StatusCode)
}

// Regression: a negative WithRetryAfterMax disables every retry (0 > negative).
func TestNegativeRetryAfterMax(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(500), stubtest.ReplyDeduping(200))
	rep := new(resilient.Report)
	resp, err := do(t, resilient.NewTransport(s, fast(resilient.WithRetryAfterMax(-1))...),
		stubtest.Post(resilient.ContextWithReport(context.Background(), rep), "{}"))
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode, "stopped: %v", rep.Stopped)
}

// TestCallerTraceDoesNotRace is a race-detector test: run it under -race
// (the test command does). A late WroteRequest of attempt n (the write loop
// still sending the body after an early 503) must not race with the
// Transport composing the caller's trace for attempt n+1. Without -race it
// asserts only what any run must show: every call ends, with the server's
// 503 or a typed *resilient.Error. (How often the caller's hook fired is
// not asserted: a late WroteRequest may land after Do returns.)
func TestCallerTraceDoesNotRace(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503) // answer before reading the body
	}))
	defer srv.Close()
	body := bytes.Repeat([]byte("x"), 900<<10)
	for range 20 {
		var wrote atomic.Int32
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Add(1) },
		})
		client := resilient.Wrap(srv.Client(), fast()...)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(body))
		resp, err := client.Do(req)
		if err == nil {
			assert.Equal(t, 503, resp.StatusCode)
			resp.Body.Close()
		} else {
			var rerr *resilient.Error
			assert.ErrorAs(t, err, &rerr)
		}
	}
}

// Regression: a retry paid for from the budget and then not sent (the caller
// cancels during the backoff) is refunded.
func TestBudgetRefundsUnsentRetry(t *testing.T) {
	b := retrycontrol.NewBudget(retrycontrol.BudgetConfig{Ratio: -1, MinPerSecond: 0.1, Window: 10 * time.Second}) // 1 retry per window
	available := b.Available
	before := available()
	require.Equal(t, 1.0, before)
	s := stubtest.New(stubtest.ReplyDeduping(503))
	tr := resilient.NewTransport(s, resilient.WithRetryControl(resilient.RetryTokens{}, resilient.SharedBudget(func(string) resilient.Budget { return b })),
		resilient.WithBackoff(resilient.Exponential(time.Hour, time.Hour)))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := do(t, tr, stubtest.Post(ctx, "{}"))
	require.ErrorIs(t, err, context.Canceled)
	assert.Len(t, s.Attempts(), 1)
	assert.Equal(t, before, available(), "no retry was sent, none is charged")

	// A retry that is sent stays charged.
	s2 := stubtest.New(stubtest.ReplyDeduping(503), stubtest.ReplyDeduping(201))
	tr2 := resilient.NewTransport(s2, resilient.WithRetryControl(resilient.RetryTokens{}, resilient.SharedBudget(func(string) resilient.Budget { return b })), resilient.WithBackoff(nil))
	_, err = do(t, tr2, stubtest.Post(context.Background(), "{}"))
	require.NoError(t, err)
	assert.Equal(t, 0.0, available())
}

// Regression: header fields net/http refuses (with an untyped error the
// classifier took for transient) are refused before anything is sent, without
// echoing the value.
func TestInvalidHeaderFieldsAreRefused(t *testing.T) {
	for name, set := range map[string]func(http.Header){
		"CRLF in value": func(h http.Header) { h["X-Note"] = []string{"secret\r\nInjected: 1"} },
		"NUL in value":  func(h http.Header) { h["X-Note"] = []string{"secret\x00"} },
		"space in name": func(h http.Header) { h["Bad Name"] = []string{"v"} },
		"colon in name": func(h http.Header) { h["Bad:Name"] = []string{"v"} },
		"empty name":    func(h http.Header) { h[""] = []string{"v"} },
	} {
		t.Run(name, func(t *testing.T) {
			s := stubtest.New(stubtest.Reply(200))
			req, _ := http.NewRequest(http.MethodGet, target, nil)
			set(req.Header)
			_, err := resilient.NewTransport(s, fast()...).RoundTrip(req)
			require.ErrorIs(t, err, resilient.ErrInvalidRequest)
			assert.NotContains(t, err.Error(), "secret")
			assert.Empty(t, s.Attempts())
		})
	}
	s := stubtest.New(stubtest.Reply(200))
	req, _ := http.NewRequest(http.MethodGet, target, nil)
	req.Header.Set("X-Tabbed", "a\tb")
	_, err := do(t, resilient.NewTransport(s, fast()...), req)
	require.NoError(t, err, "HTAB is allowed in values")
}
