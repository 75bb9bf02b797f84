package resilient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/resilienthttp/resilient/internal/wire"

	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A breaker-open refusal reaches observers with RetryAt set, and breaker
// transitions carry the host only, not the identity of the request that
// happened to observe them.
func TestObserverSeesRetryAtAndAnonymousTransitions(t *testing.T) {
	var mu sync.Mutex
	var events []Event
	obs := func(_ context.Context, e Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	tr := NewTransport(stubtest.New(stubtest.Deduping([]int{503})...), WithObserver(obs), WithMaxAttempts(1),
		WithRetryControl(RetryTokens{}, CircuitBreaker{MinRequests: 2, FailureRatio: 1, OpenTimeout: time.Hour}))
	for range 2 {
		resp, err := tr.RoundTrip(stubtest.Post(context.Background(), "{}"))
		require.NoError(t, err)
		resp.Body.Close()
	}
	_, err := tr.RoundTrip(stubtest.Post(context.Background(), "{}"))
	var re *Error
	require.ErrorAs(t, err, &re)
	require.ErrorIs(t, err, ErrCircuitOpen)
	assert.False(t, re.RetryAt.IsZero())

	var transitions, refusals int
	for _, e := range events {
		switch {
		case e.Kind == EventBreaker:
			transitions++
			assert.Equal(t, "api.test", e.Host)
			assert.Empty(t, e.Key, "a transition belongs to no request")
			assert.Empty(t, e.Method)
		case e.Kind == EventOutcome && e.Outcome == OutcomeCircuitOpen:
			refusals++
			var ee *Error
			require.ErrorAs(t, e.Err, &ee)
			assert.Equal(t, re.RetryAt, ee.RetryAt, "the observer's event carries RetryAt")
		}
	}
	assert.Equal(t, 1, transitions)
	assert.Equal(t, 1, refusals)
}

// Answers that say nothing about the host's health do not open a classic
// breaker: 64 goroutines posting one operation get 409 "in progress", a
// rate limiter answers 429 with Retry-After, callers give up.
func TestOnlyUnhealthyOutcomesCountAgainstTheHost(t *testing.T) {
	tests := []struct {
		name    string
		codes   []int
		headers []string
	}{
		{"409 in progress", []int{409}, []string{"Content-Type: application/problem+json", "Retry-After: 0"}},
		{"429 with Retry-After", []int{429}, []string{"Retry-After: 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTransport(stubtest.New(stubtest.Deduping(tt.codes, tt.headers...)...), WithBackoff(nil), WithMaxAttempts(2),
				WithRetryControl(RetryTokens{}, CircuitBreaker{MinRequests: 5, FailureRatio: 0.5, OpenTimeout: time.Hour}))
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					ctx := ContextWithKey(context.Background(), "popular-operation")
					resp, err := tr.RoundTrip(stubtest.Post(ctx, "{}"))
					if err == nil {
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			h, _ := tr.hosts.M.Load("api.test")
			assert.Equal(t, BreakerClosed, fromGobreaker(h.(*host.State).Breaker.State()))
			assert.Zero(t, h.(*host.State).Breaker.Counts().TotalFailures)
		})
	}
}

// A 503's Retry-After holds back retries to the host, never first attempts:
// a new operation is sent at once. A 429's holds back first attempts too,
// when it fits their deadline; when it does not, they go out as a bare
// client's would.
func TestServerPauses(t *testing.T) {
	tests := []struct {
		name      string
		code      int
		deadline  time.Duration
		wantDelay bool
	}{
		{"503 does not hold first attempts", 503, time.Hour, false},
		{"429 holds first attempts", 429, time.Hour, true},
		{"429 does not hold a first attempt past its deadline", 429, 5 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := stubtest.New(stubtest.Deduping([]int{tt.code, 201}, "Retry-After: 10")...)
				tr := NewTransport(s, WithMaxAttempts(1))
				resp, err := tr.RoundTrip(stubtest.Post(context.Background(), "{}"))
				require.NoError(t, err)
				resp.Body.Close()
				ctx, cancel := context.WithTimeout(context.Background(), tt.deadline)
				defer cancel()
				start := time.Now()
				resp, err = tr.RoundTrip(stubtest.Post(ctx, "{}"))
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, 201, resp.StatusCode)
				assert.Equal(t, tt.wantDelay, time.Since(start) >= 10*time.Second, "held back for the pause")
			})
		})
	}
}

// A retry whose wait fits before the deadline but whose attempt, at the
// host's usual latency, would not, is not started: the caller gets the
// real answer at once.
func TestRetryNotStartedWhenTheAttemptCannotFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			time.Sleep(2 * time.Second)
			return stubtest.New(stubtest.Deduping([]int{503})...).RoundTrip(req)
		})
		tr := NewTransport(slow, WithBackoff(Exponential(100*time.Millisecond, 100*time.Millisecond)))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		rep := new(Report)
		resp, err := tr.RoundTrip(stubtest.Post(ContextWithReport(ctx, rep), "{}"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 503, resp.StatusCode)
		assert.Len(t, rep.Attempts, 1)
		assert.ErrorIs(t, rep.Stopped, ErrDelayTooLong)
	})
}

// RoundTripFunc adapts a function to http.RoundTripper, for tests.
type RoundTripFunc func(*http.Request) (*http.Response, error)

func (f RoundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A redirect hop continues an operation: it is not a new first attempt.
func TestRedirectHopIsNotAFirstAttempt(t *testing.T) {
	tr := NewTransport(stubtest.New(stubtest.Deduping([]int{201})...))
	first := stubtest.Post(context.Background(), "{}")
	resp, err := tr.RoundTrip(first)
	require.NoError(t, err)
	hop := stubtest.Post(context.Background(), "{}")
	hop.Response = resp
	resp2, err := tr.RoundTrip(hop)
	require.NoError(t, err)
	resp2.Body.Close()
	h, _ := tr.hosts.M.Load("api.test")
	firsts := h.(*host.State).Tokens.Firsts(time.Now())
	assert.Equal(t, int64(1), firsts)
}

// stalledBody yields some bytes, then blocks until closed.
type stalledBody struct {
	sent   bool
	closed chan struct{}
	once   sync.Once
}

func (b *stalledBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, "partial"), nil
	}
	<-b.closed
	return 0, errors.New("read on closed body")
}

func (b *stalledBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// endlessBody never ends, and counts what is read of it.
type endlessBody struct{ read atomic.Int64 }

func (b *endlessBody) Read(p []byte) (int, error) {
	b.read.Add(int64(len(p)))
	return len(p), nil
}
func (b *endlessBody) Close() error { return nil }

// Regression: a retryable answer whose retry is then not sent reaches the
// caller whole, as a bare client's would: a body over the drain limit, and
// one that stalls before its end, were cut (the caller got an *Error).
func TestKeptAnswerIsWholeWhenTheRetryIsNotSent(t *testing.T) {
	big := strings.Repeat("x", 3*wire.DrainLimit+17)
	tests := []struct {
		name string
		body func() io.ReadCloser
		want string
	}{
		{"short", func() io.ReadCloser { return io.NopCloser(strings.NewReader("busy")) }, "busy"},
		{"over the drain limit", func() io.ReadCloser { return io.NopCloser(strings.NewReader(big)) }, big},
		{"stalls, then ends", func() io.ReadCloser { return &slowBody{parts: []string{"par", "tial"}, gap: time.Second} }, "partial"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := RoundTripFunc(func(req *http.Request) (*http.Response, error) {
					return &http.Response{StatusCode: 503, Header: http.Header{}, Body: tt.body(), Request: req}, nil
				})
				tr := NewTransport(base, WithBackoff(nil), WithDedupingServer("api.test"))
				req := stubtest.Post(context.Background(), "{}")
				calls := 0
				req.GetBody = func() (io.ReadCloser, error) {
					calls++
					return nil, errors.New("gone") // the retry cannot be sent
				}
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err, "the last answer stands")
				defer resp.Body.Close()
				assert.Equal(t, 503, resp.StatusCode)
				got, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				assert.Equal(t, tt.want, string(got))
				assert.Equal(t, 1, calls, "the retry was tried")
			})
		})
	}
}

// slowBody returns parts one at a time, gap apart.
type slowBody struct {
	parts []string
	gap   time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	if len(b.parts) == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.gap)
	n := copy(p, b.parts[0])
	b.parts = b.parts[1:]
	return n, nil
}
func (b *slowBody) Close() error { return nil }

// A discarded body is drained bounded in bytes and in time: a body that
// stalls mid-way does not hold the retry loop, an endless one is not read
// to its end.
func TestDiscardIsBounded(t *testing.T) {
	t.Run("stalled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			n := 0
			base := RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				n++
				if n == 1 {
					return &http.Response{StatusCode: 503, Header: http.Header{}, Body: &stalledBody{closed: make(chan struct{})}, Request: req}, nil
				}
				return &http.Response{StatusCode: 201, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
			})
			tr := NewTransport(base, WithBackoff(nil), WithDedupingServer("api.test"))
			start := time.Now()
			resp, err := tr.RoundTrip(stubtest.Post(context.Background(), "{}"))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 201, resp.StatusCode)
			assert.Zero(t, time.Since(start), "the drain runs beside the backoff: a stalled body holds nothing")
		})
	})
	t.Run("endless", func(t *testing.T) {
		body := &endlessBody{}
		wire.Discard(&http.Response{Body: body})
		assert.LessOrEqual(t, body.read.Load(), int64(wire.DrainLimit))
	})
}
