package resilient_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// timed answers code after d, or fails with the request's context error if
// it ends first, as net/http does; live counts the calls still running.
func timed(d time.Duration, code int, live *atomic.Int32) stubtest.Step {
	return func(req *http.Request) (*http.Response, error) {
		live.Add(1)
		defer live.Add(-1)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return stubtest.Reply(code)(req)
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
}

// hedgeClient returns a client over s with hedging after a fixed delay and
// a Report on every request.
func hedgeDo(t *testing.T, rt http.RoundTripper, method string, body io.Reader, hdr ...string) (*http.Response, *resilient.Report, error) {
	t.Helper()
	rep := new(resilient.Report)
	req, err := http.NewRequestWithContext(resilient.ContextWithReport(t.Context(), rep), method, "http://api.test/v1/x", body)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := rt.RoundTrip(req)
	return resp, rep, err
}

func TestHedgeSlowCopyLosesAndHasEndedWhenRoundTripReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var live atomic.Int32
		s := stubtest.New(timed(time.Second, 200, &live), timed(10*time.Millisecond, 200, &live))
		tr := resilient.NewTransport(s, resilient.WithHedging(resilient.HedgingConfig{Delay: 50 * time.Millisecond}))
		start := time.Now()
		resp, rep, err := hedgeDo(t, tr, http.MethodGet, nil)
		require.NoError(t, err)
		assert.Zero(t, live.Load(), "the slow copy's call has returned")
		assert.Equal(t, 60*time.Millisecond, time.Since(start), "answer of the hedge: 50 ms + 10 ms")
		assert.Equal(t, 200, resp.StatusCode)
		resp.Body.Close()
		assert.Equal(t, s.Opened.Load(), s.Closed.Load(), "every body closed")
		got := s.Attempts()
		require.Len(t, got, 2)
		assert.Empty(t, got[0].Header.Values("Retry-Attempt"), "a first attempt has none")
		assert.Equal(t, "1", got[1].Header.Get("Retry-Attempt"), "a hedge is a new attempt")
		assert.Equal(t, 1, rep.Winner)
		assert.Equal(t, 1, rep.Hedges)
		assert.True(t, rep.HedgeWon)
		require.Len(t, rep.Attempts, 2)
		assert.False(t, rep.Attempts[0].Hedge)
		assert.Equal(t, resilient.CategoryCanceled, rep.Attempts[0].Category, "the loser was cancelled")
		assert.True(t, rep.Attempts[1].Hedge)
		assert.Equal(t, 50*time.Millisecond, rep.Attempts[1].Wait)
	})
}

func TestHedgeFastFirstCopySendsNoHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var live atomic.Int32
		s := stubtest.New(timed(10*time.Millisecond, 200, &live))
		tr := resilient.NewTransport(s, resilient.WithHedging(resilient.HedgingConfig{Delay: 50 * time.Millisecond}))
		resp, rep, err := hedgeDo(t, tr, http.MethodGet, nil)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Len(t, s.Attempts(), 1)
		assert.Zero(t, rep.Hedges)
		assert.Zero(t, rep.Winner)
		assert.False(t, rep.HedgeWon)
	})
}

// Only requests that are safe to send twice at once are hedged.
func TestHedgeOnlySafeRequests(t *testing.T) {
	big := strings.Repeat("x", 2048)
	for _, tc := range []struct {
		name   string
		method string
		body   func() io.Reader
		hdr    []string
		hedged bool
	}{
		{"GET", http.MethodGet, nil, nil, true},
		{"HEAD", http.MethodHead, nil, nil, true},
		{"OPTIONS", http.MethodOptions, nil, nil, true},
		{"PUT with a replayable body", http.MethodPut, func() io.Reader { return strings.NewReader("{}") }, nil, true},
		{"DELETE", http.MethodDelete, nil, nil, true},
		{"POST (keyed by default)", http.MethodPost, func() io.Reader { return strings.NewReader("{}") }, nil, false},
		{"PATCH (keyed by default)", http.MethodPatch, func() io.Reader { return strings.NewReader("{}") }, nil, false},
		{"POST with the caller's key", http.MethodPost, func() io.Reader { return strings.NewReader("{}") }, []string{"Idempotency-Key", "k-1"}, false},
		{"GET with a key", http.MethodGet, nil, []string{"Idempotency-Key", "k-2"}, false},
		{"PUT with a body over the buffer", http.MethodPut, func() io.Reader { return io.MultiReader(strings.NewReader(big)) }, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var live atomic.Int32
				s := stubtest.New(timed(time.Second, 200, &live), timed(time.Millisecond, 200, &live))
				tr := resilient.NewTransport(s, resilient.WithMaxBodyBuffer(1024),
					resilient.WithHedging(resilient.HedgingConfig{Delay: 50 * time.Millisecond}))
				var body io.Reader
				if tc.body != nil {
					body = tc.body()
				}
				resp, rep, err := hedgeDo(t, tr, tc.method, body, tc.hdr...)
				require.NoError(t, err)
				resp.Body.Close()
				if tc.hedged {
					assert.Len(t, s.Attempts(), 2)
					assert.Equal(t, 1, rep.Hedges)
					return
				}
				assert.Len(t, s.Attempts(), 1, "not hedged: the slow answer is waited for")
				assert.Zero(t, rep.Hedges)
			})
		})
	}
}

// A hedge's PUT carries the same body as the first copy's.
func TestHedgeReplaysTheBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var live atomic.Int32
		s := stubtest.New(timed(time.Second, 200, &live), timed(time.Millisecond, 200, &live))
		tr := resilient.NewTransport(s, resilient.WithHedging(resilient.HedgingConfig{Delay: 50 * time.Millisecond}))
		resp, _, err := hedgeDo(t, tr, http.MethodPut, bytes.NewReader([]byte(`{"a":1}`)))
		require.NoError(t, err)
		resp.Body.Close()
		got := s.Attempts()
		require.Len(t, got, 2)
		assert.Equal(t, `{"a":1}`, string(got[0].Body))
		assert.Equal(t, `{"a":1}`, string(got[1].Body))
	})
}

// A hedge is admitted by the host's gate: no token, a paused host, an open
// breaker or no attempt left refuse it, and the first copy goes on.
func TestHedgeAdmittedByTheGate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []resilient.Option
		first  stubtest.Step // the answer to setup's requests; default 503 Retry-After: 30
		firsts int           // setup's requests answered first (default 1)
		setup  func(t *testing.T, tr http.RoundTripper)
	}{
		{name: "no retry token", opts: []resilient.Option{resilient.WithRetryControl(resilient.RetryTokens{MinTokens: -1, CapRatio: -1})}},
		{name: "budget exhausted", opts: []resilient.Option{
			resilient.WithRetryControl(resilient.RetryBudget{Ratio: -1, MinPerSecond: -1})}},
		{name: "no attempt left", opts: []resilient.Option{resilient.WithMaxAttempts(1)}},
		{name: "host paused by a 503's Retry-After", firsts: 20, setup: func(t *testing.T, tr http.RoundTripper) {
			// 20 first attempts answered 503 Retry-After: 30 show that
			// the host sheds (docs/defaults.md): the last pauses the
			// host's retries. None is retried, as the delay ends after
			// its deadline.
			for range 20 {
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/x", nil)
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
				cancel()
			}
		}},
		// Retry-After over the maximum: no pause, only the pushback (for the maximum).
		{name: "server pushed back", opts: []resilient.Option{resilient.WithRetryAfterMax(10 * time.Second)},
			first: stubtest.Reply(503, "Retry-After: 30", "X-Should-Retry: false"), setup: func(t *testing.T, tr http.RoundTripper) {
				resp, _, err := hedgeDo(t, tr, http.MethodDelete, nil)
				require.NoError(t, err)
				resp.Body.Close()
			}},
		{name: "breaker open", opts: []resilient.Option{resilient.WithRetryControl(resilient.RetryTokens{}, resilient.CircuitBreaker{MinRequests: 1, FailureRatio: 0.5,
			OpenTimeout: time.Minute, RetriesOnly: true})}, setup: func(t *testing.T, tr http.RoundTripper) {
			resp, _, err := hedgeDo(t, tr, http.MethodDelete, nil)
			require.NoError(t, err)
			resp.Body.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var live atomic.Int32
				steps := []stubtest.Step{timed(time.Second, 200, &live), timed(time.Millisecond, 200, &live)}
				if tc.setup != nil {
					first := tc.first
					if first == nil {
						first = stubtest.Reply(503, "Retry-After: 30")
					}
					for range max(tc.firsts, 1) {
						steps = append([]stubtest.Step{first}, steps...)
					}
				}
				s := stubtest.New(steps...)
				opts := append([]resilient.Option{resilient.WithHedging(resilient.HedgingConfig{Delay: 50 * time.Millisecond})}, tc.opts...)
				tr := resilient.NewTransport(s, opts...)
				if tc.setup != nil {
					tc.setup(t, tr)
				}
				n := len(s.Attempts())
				start := time.Now()
				resp, rep, err := hedgeDo(t, tr, http.MethodGet, nil)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Len(t, s.Attempts(), n+1, "no hedge")
				assert.Zero(t, rep.Hedges)
				assert.Equal(t, time.Second, time.Since(start), "the first copy was not cancelled")
			})
		})
	}
}

// A retryable answer while another copy is in flight waits for that copy;
// when every copy failed, the Transport retries as usual.
func TestHedgeRetryableAnswerWaitsForTheOtherCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var live atomic.Int32
		s := stubtest.New(timed(200*time.Millisecond, 503, &live), timed(300*time.Millisecond, 200, &live))
		tr := resilient.NewTransport(s, resilient.WithHedging(resilient.HedgingConfig{Delay: 100 * time.Millisecond}))
		start := time.Now()
		resp, rep, err := hedgeDo(t, tr, http.MethodGet, nil)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, 400*time.Millisecond, time.Since(start))
		assert.Len(t, s.Attempts(), 2, "no retry while the hedge was in flight")
		require.Len(t, rep.Attempts, 2)
		assert.Equal(t, 503, rep.Attempts[0].StatusCode)
		assert.Equal(t, 1, rep.Winner)
		assert.Equal(t, s.Opened.Load(), s.Closed.Load())
	})
	synctest.Test(t, func(t *testing.T) {
		var live atomic.Int32
		s := stubtest.New(timed(200*time.Millisecond, 503, &live), timed(300*time.Millisecond, 503, &live), stubtest.Reply(200))
		tr := resilient.NewTransport(s, resilient.WithHedging(resilient.HedgingConfig{Delay: 100 * time.Millisecond}))
		resp, rep, err := hedgeDo(t, tr, http.MethodGet, nil)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		got := s.Attempts()
		require.Len(t, got, 3, "both copies failed: one retry")
		assert.Equal(t, "2", got[2].Header.Get("Retry-Attempt"), "the retry is numbered after the hedge")
		assert.Equal(t, 2, rep.Winner)
		assert.False(t, rep.HedgeWon)
		assert.Equal(t, s.Opened.Load(), s.Closed.Load())
	})
}

// The caller's deadline bounds every copy.
func TestHedgeCallerDeadlineBoundsEveryCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var live atomic.Int32
		s := stubtest.New(timed(time.Hour, 200, &live))
		tr := resilient.NewTransport(s, resilient.WithHedging(resilient.HedgingConfig{Delay: 100 * time.Millisecond, MaxHedges: 2}))
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/x", nil)
		start := time.Now()
		_, err := tr.RoundTrip(req)
		require.Error(t, err)
		assert.True(t, errors.Is(err, context.DeadlineExceeded), err)
		assert.Equal(t, time.Second, time.Since(start))
		assert.Zero(t, live.Load())
		assert.Len(t, s.Attempts(), 3, "two hedges, 100 ms apart")
	})
}

// With a quantile, the hedge waits for the host's recent latency at that
// quantile, and until enough latencies are known, the fixed Delay.
func TestHedgeDelayFollowsTheHostsQuantile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var live atomic.Int32
		var mu sync.Mutex
		var delays []time.Duration
		obs := func(_ context.Context, e resilient.Event) {
			if e.Kind == resilient.EventHedge {
				mu.Lock()
				delays = append(delays, e.Delay)
				mu.Unlock()
			}
		}
		steps := []stubtest.Step{timed(time.Second, 200, &live), timed(time.Millisecond, 200, &live)} // the first request: fallback delay
		for range 200 {
			steps = append(steps, timed(20*time.Millisecond, 200, &live))
		}
		steps = append(steps, timed(time.Second, 200, &live), timed(time.Millisecond, 200, &live))
		s := stubtest.New(steps...)
		tr := resilient.NewTransport(s, resilient.WithObserver(obs),
			resilient.WithHedging(resilient.HedgingConfig{Quantile: 0.95, Delay: 300 * time.Millisecond}))
		for range 202 {
			resp, _, err := hedgeDo(t, tr, http.MethodGet, nil)
			require.NoError(t, err)
			resp.Body.Close()
		}
		require.Len(t, delays, 2)
		assert.Equal(t, 300*time.Millisecond, delays[0], "too few latencies: the fixed delay")
		assert.GreaterOrEqual(t, delays[1], 20*time.Millisecond)
		assert.LessOrEqual(t, delays[1], 24*time.Millisecond, "the p95 of 20 ms answers, within a bucket")
	})
}

// Events, the Report and the slog observer say which attempt was a hedge
// and which won.
func TestHedgeEventsAndLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var live atomic.Int32
		var mu sync.Mutex
		var events []resilient.Event
		var logs bytes.Buffer
		s := stubtest.New(timed(time.Second, 200, &live), timed(10*time.Millisecond, 200, &live))
		tr := resilient.NewTransport(s,
			resilient.WithHedging(resilient.HedgingConfig{Delay: 50 * time.Millisecond}),
			resilient.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
			resilient.WithObserver(func(_ context.Context, e resilient.Event) {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}))
		resp, _, err := hedgeDo(t, tr, http.MethodGet, nil)
		require.NoError(t, err)
		resp.Body.Close()
		var kinds []resilient.EventKind
		for _, e := range events {
			kinds = append(kinds, e.Kind)
		}
		require.Equal(t, []resilient.EventKind{resilient.EventHedge, resilient.EventAttempt, resilient.EventAttempt, resilient.EventOutcome}, kinds)
		assert.Equal(t, 1, events[0].Attempt.Attempt)
		assert.Equal(t, 50*time.Millisecond, events[0].Delay)
		assert.False(t, events[1].Attempt.Hedge, "the first copy, cancelled")
		assert.True(t, events[2].Attempt.Hedge)
		out := events[3]
		assert.Equal(t, 1, out.Attempt.Attempt, "the winner")
		assert.True(t, out.Attempt.Hedge)
		assert.Equal(t, 1, out.Summary.Hedges)
		assert.Contains(t, logs.String(), `msg="resilient: hedge"`)
		assert.Contains(t, logs.String(), "hedges=1 winner=1 hedge_won=true")
	})
}

// A hedge whose body cannot be rewound is not sent, and the first copy's
// answer is returned.
func TestHedgeWithAFailingGetBodyLeavesTheFirstCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var live atomic.Int32
		s := stubtest.New(timed(time.Second, 200, &live), timed(time.Millisecond, 200, &live))
		tr := resilient.NewTransport(s, resilient.WithHedging(resilient.HedgingConfig{Delay: 50 * time.Millisecond}))
		rep := new(resilient.Report)
		req, _ := http.NewRequestWithContext(resilient.ContextWithReport(t.Context(), rep), http.MethodPut, "http://api.test/v1/x", strings.NewReader("{}"))
		req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, time.Second, time.Since(start))
		assert.Len(t, s.Attempts(), 1)
		assert.Len(t, rep.Attempts, 1)
		assert.Zero(t, rep.Winner)
		assert.Zero(t, rep.Hedges, "no hedge left")
	})
}

// Over real sockets, with the slow copy's handler still running when the
// hedge answers: the slow copy's request is cancelled and nothing of it
// outlives the request (goleak), its connection included.
func TestHedgeOverLoopbackLeavesNothingBehind(t *testing.T) {
	defer goleak.VerifyNone(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Retry-Attempt") == "" { // the first copy
			select {
			case <-r.Context().Done(): // the client cancelled the losing copy
			case <-release:
			}
			return
		}
		io.WriteString(w, "fast")
	}))
	defer srv.Close()
	defer close(release)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr := resilient.NewTransport(base, resilient.WithHedging(resilient.HedgingConfig{Delay: 10 * time.Millisecond}))
	rep := new(resilient.Report)
	req, _ := http.NewRequestWithContext(resilient.ContextWithReport(t.Context(), rep), http.MethodGet, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "fast", string(b))
	assert.True(t, rep.HedgeWon)
}

// TestHedgeRefusedByPushbackLeavesTheFirstCopy: a hedge is a retry to the
// server, the first to be shed; its pushback answer does not win over the
// copy the server is still serving.
func TestHedgeRefusedByPushbackLeavesTheFirstCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var live atomic.Int32
		s := stubtest.New(timed(time.Second, 200, &live), stubtest.Reply(503, "Retry-After: 2", "X-Should-Retry: false"))
		tr := resilient.NewTransport(s, resilient.WithHedging(resilient.HedgingConfig{Delay: 50 * time.Millisecond}))
		start := time.Now()
		resp, rep, err := hedgeDo(t, tr, http.MethodGet, nil)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode, "the first copy's answer")
		assert.Equal(t, time.Second, time.Since(start))
		assert.Zero(t, rep.Winner)
		assert.False(t, rep.HedgeWon)
		require.Len(t, rep.Attempts, 2)
		assert.True(t, rep.Attempts[0].Hedge, "the hedge's answer came first")
		assert.True(t, rep.Attempts[0].Pushback)
		assert.Equal(t, 200, rep.Attempts[1].StatusCode)
		assert.Equal(t, s.Opened.Load(), s.Closed.Load(), "every body closed")

		// The pushback holds the host's retries and hedges from now on.
		_, rep, err = hedgeDo(t, tr, http.MethodGet, nil)
		require.NoError(t, err)
		assert.Zero(t, rep.Hedges)
	})
}

// TestHedgeNotSentIsNotCountedWhicheverAnswersFirst: a hedge whose body
// cannot be rewound, ready at the instant the first copy wins, gives back
// its budget and is not counted as a hedge (the round reads the two results
// in either order; 50 rounds see both).
func TestHedgeNotSentIsNotCountedWhicheverAnswersFirst(t *testing.T) {
	for range 50 {
		synctest.Test(t, func(t *testing.T) {
			var live atomic.Int32
			b := &countingBudget{allow: 10}
			s := stubtest.New(timed(50*time.Millisecond, 200, &live))
			tr := resilient.NewTransport(s, resilient.WithHedging(resilient.HedgingConfig{Delay: 50 * time.Millisecond}),
				resilient.WithRetryControl(resilient.RetryTokens{}, resilient.SharedBudget(func(string) resilient.Budget { return b })))
			rep := new(resilient.Report)
			req, err := http.NewRequestWithContext(resilient.ContextWithReport(t.Context(), rep), http.MethodPut, "http://api.test/v1/x", strings.NewReader("{}"))
			require.NoError(t, err)
			req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 200, resp.StatusCode)
			assert.Len(t, s.Attempts(), 1)
			assert.Zero(t, rep.Hedges, "no hedge left")
			assert.Equal(t, b.withdraws, b.refunds, "what an unsent hedge took is given back")
		})
	}
}

type trackedBody struct {
	r      io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errors.New("read after close")
	}
	return b.r.Read(p)
}

func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

// lateReader answers at once and reads the body afterwards, as net/http's
// write loop may (RoundTrip may return before the body is written).
type lateReader struct {
	wg  sync.WaitGroup
	err atomic.Value
}

func (l *lateReader) RoundTrip(req *http.Request) (*http.Response, error) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		time.Sleep(50 * time.Millisecond)
		_, err := io.ReadAll(req.Body)
		if err != nil {
			l.err.Store(err)
		}
		req.Body.Close()
	}()
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
}

// Regression: with hedging on, the first attempt's body (the caller's,
// with GetBody) belongs to the base transport; the Transport must not close
// it when the call ends (hedged() had stopped clearing c.op.body.first:
// only the copy's was cleared).
func TestHedgedFirstBodyIsTheBaseTransports(t *testing.T) {
	base := &lateReader{}
	tr := resilient.NewTransport(base, resilient.WithHedging(resilient.HedgingConfig{Delay: time.Hour}))
	body := &trackedBody{r: bytes.NewReader([]byte("payload"))}
	req, _ := http.NewRequest(http.MethodPut, "http://example.test/x", body)
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader([]byte("payload"))), nil }
	resp, err := tr.RoundTrip(req)
	assert.NoError(t, err)
	resp.Body.Close()
	base.wg.Wait()
	assert.Nil(t, base.err.Load(), "the Transport closed the body the base transport was still sending")
}

// TestHedgeHeldByTheServersDelay: a copy's answer that names a delay holds
// the call's next hedges until then, on a host whose first attempts are
// healthy (no host pause): no copy leaves before the time the server named.
func TestHedgeHeldByTheServersDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var live atomic.Int32
		steps := make([]stubtest.Step, 0, 23)
		for range 20 {
			steps = append(steps, stubtest.Reply(200)) // the host's first attempts are healthy
		}
		steps = append(steps, timed(time.Second, 200, &live), stubtest.Reply(503, "Retry-After: 2"), stubtest.Reply(200))
		s := stubtest.New(steps...)
		tr := resilient.NewTransport(s, resilient.WithHedging(resilient.HedgingConfig{Delay: 50 * time.Millisecond, MaxHedges: 2}))
		for range 20 {
			resp, _, err := hedgeDo(t, tr, http.MethodGet, nil)
			require.NoError(t, err)
			resp.Body.Close()
		}
		start := time.Now()
		resp, rep, err := hedgeDo(t, tr, http.MethodGet, nil)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, time.Second, time.Since(start), "the first copy's answer")
		assert.Len(t, s.Attempts(), 22, "no second hedge before the server's 2 s")
		assert.Equal(t, 1, rep.Hedges)
	})
}
