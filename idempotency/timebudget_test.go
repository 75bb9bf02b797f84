package idempotency_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/idempotency"
)

// inMemory is a RoundTripper that serves requests with a handler in the
// same process, without sockets, so that a test runs in a synctest
// bubble. Like a proxy between client and server, it does not pass on
// that the client went away: the server's request context ends only when
// its handler returns.
type inMemory struct{ h http.Handler }

func (t inMemory) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	sreq := httptest.NewRequestWithContext(context.Background(), req.Method, req.URL.String(), bytes.NewReader(body))
	sreq.Header = req.Header.Clone()
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.h.ServeHTTP(rec, sreq)
	}()
	select {
	case <-done:
		return rec.Result(), nil
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}

// slowApp is a handler that works until its context ends (at most ten
// minutes), then answers 503 (it did nothing). It records when its
// context ended, relative to t0.
type slowApp struct {
	runs  atomic.Int64
	t0    time.Time
	ended atomic.Int64  // nanoseconds after t0; 0 if the context did not end
	done  chan struct{} // closed when the handler returns
}

func (a *slowApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer close(a.done)
	a.runs.Add(1)
	select {
	case <-r.Context().Done():
		a.ended.Store(int64(time.Since(a.t0)))
	case <-time.After(10 * time.Minute):
	}
	w.WriteHeader(http.StatusServiceUnavailable)
}

// A resilient client with WithTimeBudgetHeader and a 300 ms deadline calls
// a slow handler behind the middleware: the handler's context ends at
// 300 ms, not at the Lease (a minute), for a keyed POST (the middleware's
// run) and for a GET (passed through). Virtual time: exact.
func TestTimeBudgetEndsHandlerContext(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		t.Run(method, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				app := &slowApp{t0: time.Now(), done: make(chan struct{})}
				mw, err := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{Lease: time.Minute})
				require.NoError(t, err)
				client := resilient.Wrap(&http.Client{Transport: inMemory{mw.Handler(app)}}, resilient.WithTimeBudgetHeader())
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, method, "http://api.test/pay", strings.NewReader(`{"amount":1}`))
				require.NoError(t, err)
				if method == http.MethodPost {
					req.Header.Set("Idempotency-Key", "k1")
				}
				resp, err := client.Do(req)
				if err == nil { // the handler's 503 may come as the caller's deadline ends
					_ = resp.Body.Close()
				}
				<-app.done // in virtual time: 10 minutes at most
				require.Equal(t, int64(1), app.runs.Load())
				assert.LessOrEqual(t, time.Duration(app.ended.Load()), 300*time.Millisecond, "the handler's context ended with the caller's budget")
				assert.Greater(t, app.ended.Load(), int64(0), "the handler's context ended")
			})
		})
	}
}

// A request whose budget is spent on arrival (0 ms), or spent while its
// body was read, never runs the handler and stores nothing: 408, a
// problem, no Idempotency-Status, no record.
func TestTimeBudgetSpent(t *testing.T) {
	tests := []struct {
		name, method, key, header, value string
		bodyDelay                        time.Duration
	}{
		{"keyed, 0 ms", http.MethodPost, "k", idempotency.TimeBudgetHeader, "0", 0},
		{"keyed, Envoy 0 ms", http.MethodPost, "k", idempotency.EnvoyTimeBudgetHeader, "0", 0},
		{"keyed, spent reading the body", http.MethodPost, "k", idempotency.TimeBudgetHeader, "50", 100 * time.Millisecond},
		{"keyless POST", http.MethodPost, "", idempotency.TimeBudgetHeader, "0", 0},
		{"GET", http.MethodGet, "", idempotency.TimeBudgetHeader, " 0 ", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := idempotency.NewMemoryStore()
				mw, err := idempotency.New(store, idempotency.Config{})
				require.NoError(t, err)
				var runs atomic.Int64
				h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					runs.Add(1)
					w.WriteHeader(http.StatusCreated)
				}))
				req := httptest.NewRequest(tt.method, "/pay", &slowBody{r: strings.NewReader(`{}`), delay: tt.bodyDelay})
				req.Header.Set(tt.header, tt.value)
				if tt.key != "" {
					req.Header.Set("Idempotency-Key", tt.key)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				assert.Equal(t, http.StatusRequestTimeout, rec.Code)
				assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
				assert.Contains(t, rec.Body.String(), idempotency.ProblemTypeBase+"budget-spent")
				assert.Empty(t, rec.Header().Values("Idempotency-Status"))
				assert.Equal(t, int64(0), runs.Load(), "the handler never ran")
				rc, err := store.Lookup(context.Background(), idempotency.Scope{Route: tt.method + " /pay", Key: tt.key}, time.Now())
				require.NoError(t, err)
				assert.Equal(t, idempotency.Record{}, rc, "nothing stored")
				assert.Equal(t, 0, store.Len())
				d := resilient.DefaultClassifier(resilient.Outcome{Request: req, Response: rec.Result(), Keyed: tt.key != "", Now: time.Now()})
				assert.Equal(t, resilient.Retry, d.Action, "the client may try again if it has time left")
				assert.Equal(t, resilient.CategoryTimeout, d.Category)
				assert.False(t, d.Unknown, "the client knows nothing was done")
			})
		})
	}
}

// slowBody delays its first Read by delay, as a slow client's body.
type slowBody struct {
	r     io.Reader
	delay time.Duration
	slept bool
}

func (b *slowBody) Read(p []byte) (int, error) {
	if !b.slept {
		b.slept = true
		time.Sleep(b.delay)
	}
	return b.r.Read(p)
}

// The budget only shortens the handler's context: the smaller of the two
// headers wins, a budget longer than the Lease is bounded by it, and a
// value that is not a non-negative integer of milliseconds is ignored
// (the request runs as without it, never fails).
func TestTimeBudgetValues(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration // the handler's deadline after arrival
		pass   time.Duration // for a request passed through, if not want
	}{
		{"none", http.Header{}, time.Minute, 0},
		{"300 ms", http.Header{"X-Request-Timeout": {"300"}}, 300 * time.Millisecond, 0},
		{"Envoy", http.Header{"X-Envoy-Expected-Rq-Timeout-Ms": {"250"}}, 250 * time.Millisecond, 0},
		{"the smaller of both", http.Header{"X-Request-Timeout": {"300"}, "X-Envoy-Expected-Rq-Timeout-Ms": {"200"}}, 200 * time.Millisecond, 0},
		{"the smaller of two values", http.Header{"X-Request-Timeout": {"300", "100"}}, 100 * time.Millisecond, 0},
		{"longer than the Lease", http.Header{"X-Request-Timeout": {"3600000"}}, time.Minute, time.Hour}, // the Lease bounds keyed runs only
		{"too many digits", http.Header{"X-Request-Timeout": {"99999999999999999999"}}, time.Minute, 0},
		{"negative: ignored", http.Header{"X-Request-Timeout": {"-5"}}, time.Minute, 0},
		{"fraction: ignored", http.Header{"X-Request-Timeout": {"1.5"}}, time.Minute, 0},
		{"unit: ignored", http.Header{"X-Request-Timeout": {"300ms"}}, time.Minute, 0},
		{"empty: ignored", http.Header{"X-Request-Timeout": {""}}, time.Minute, 0},
		{"garbage beside a valid one", http.Header{"X-Request-Timeout": {"soon"}, "X-Envoy-Expected-Rq-Timeout-Ms": {"400"}}, 400 * time.Millisecond, 0},
	}
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		for _, tt := range tests {
			t.Run(method+" "+tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					mw, err := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{Lease: time.Minute})
					require.NoError(t, err)
					var got time.Duration
					h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						dl, ok := r.Context().Deadline()
						if method == http.MethodGet && !ok {
							dl = time.Now().Add(time.Minute) // passed through as it came: no deadline of the middleware's
						}
						got = time.Until(dl)
						w.WriteHeader(http.StatusCreated)
					}))
					req := httptest.NewRequest(method, "/pay", strings.NewReader(`{}`))
					req.Header = tt.header.Clone()
					req.Header.Set("Idempotency-Key", "k")
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					assert.Equal(t, http.StatusCreated, rec.Code)
					want := tt.want
					if method == http.MethodGet && tt.pass != 0 {
						want = tt.pass
					}
					assert.Equal(t, want, got)
				})
			})
		}
	}
}

// Over a real loopback connection, NewClient(WithTimeBudgetHeader()) with
// a 300 ms deadline: the handler's context has a deadline at most 300 ms
// after the handler started (arrival is earlier). Only the invariant is
// asserted, never how long anything took.
func TestTimeBudgetLoopback(t *testing.T) {
	mw, err := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{Lease: time.Minute})
	require.NoError(t, err)
	type seen struct {
		has   bool
		left  time.Duration
		value string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		dl, ok := r.Context().Deadline()
		got <- seen{has: ok, left: dl.Sub(start), value: r.Header.Get(idempotency.TimeBudgetHeader)}
		w.WriteHeader(http.StatusCreated)
	})))
	defer srv.Close()
	client := resilient.NewClient(resilient.WithTimeBudgetHeader())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/pay", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "loop")
	resp, err := client.Do(req)
	if err != nil {
		// A machine too busy to send within 300 ms: the server answered
		// 408 or the client gave up; no handler ran.
		require.Empty(t, got)
		return
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusRequestTimeout {
		require.Empty(t, got, "a spent budget runs no handler")
		return
	}
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	s := <-got
	require.NotEmpty(t, s.value, "the client sent its budget")
	require.True(t, s.has, "the handler's context has a deadline")
	assert.LessOrEqual(t, s.left, 300*time.Millisecond, "the deadline is within the caller's budget of arrival")
}
