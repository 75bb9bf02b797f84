package resilient_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultClassifierPushback(t *testing.T) {
	tests := []struct {
		name     string
		code     int
		headers  []string
		pushback bool
		delay    time.Duration
	}{
		{"503 Retry-After do-not-retry", 503, []string{"Retry-After: 5", "X-Should-Retry: false"}, true, 5 * time.Second},
		{"429 Retry-After do-not-retry", 429, []string{"Retry-After: 2", "X-Should-Retry: false"}, true, 2 * time.Second},
		{"500 Retry-After Stripe do-not-retry", 500, []string{"Retry-After: 3", "Stripe-Should-Retry: false"}, true, 3 * time.Second},
		{"502 Retry-After do-not-retry", 502, []string{"Retry-After: 4", "X-Should-Retry: false"}, true, 4 * time.Second},
		{"429 RateLimit r=0 do-not-retry", 429, []string{`RateLimit: "default";r=0;t=6`, "X-Should-Retry: false"}, true, 6 * time.Second},
		{"503 do-not-retry without a delay", 503, []string{"X-Should-Retry: false"}, false, 0},
		{"503 Retry-After without a hint", 503, []string{"Retry-After: 5"}, false, 5 * time.Second},
		{"503 Retry-After hint true", 503, []string{"Retry-After: 5", "X-Should-Retry: true"}, false, 5 * time.Second},
		{"400 Retry-After do-not-retry", 400, []string{"Retry-After: 5", "X-Should-Retry: false"}, false, 0},
		{"503 garbage Retry-After do-not-retry", 503, []string{"Retry-After: soon", "X-Should-Retry: false"}, false, 0},
		{"200 Retry-After do-not-retry", 200, []string{"Retry-After: 5", "X-Should-Retry: false"}, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := resilient.DefaultClassifier(outcome(http.MethodGet, false, response(tc.code, "", tc.headers...), nil))
			assert.Equal(t, tc.pushback, d.Pushback)
			assert.Equal(t, tc.delay, d.Delay)
			if tc.pushback {
				assert.Equal(t, resilient.Terminal, d.Action, "pushback is not retried")
			}
		})
	}
}

// byPath is a base RoundTripper that answers each path with its own script.
type byPath map[string]*stubtest.Stub

func (b byPath) RoundTrip(req *http.Request) (*http.Response, error) {
	return b[req.URL.Path].RoundTrip(req)
}

func get(ctx context.Context, t *testing.T, tr http.RoundTripper, path string) (*http.Response, *resilient.Report, error) {
	t.Helper()
	rep := new(resilient.Report)
	req, err := http.NewRequestWithContext(resilient.ContextWithReport(ctx, rep), http.MethodGet, "http://api.test"+path, nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		resp.Body.Close()
	}
	return resp, rep, err
}

// TestPushbackHoldsEveryRetryToTheHost: one pushback answer stops the
// retries of every operation to the host for its Retry-After, first
// attempts still go out, and retries resume once it has passed.
func TestPushbackHoldsEveryRetryToTheHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := byPath{
			"/pushback": stubtest.New(stubtest.Reply(503, "Retry-After: 5", "X-Should-Retry: false")),
			"/failing":  stubtest.New(stubtest.Reply(503)),
			"/reset":    stubtest.New(stubtest.Fail(readErr())),
			"/other":    stubtest.New(stubtest.Reply(503), stubtest.Reply(200)),
		}
		var mu sync.Mutex
		var events []resilient.Event
		tr := resilient.NewTransport(base, resilient.WithObserver(func(_ context.Context, e resilient.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}))
		ctx := context.Background()
		start := time.Now()

		resp, rep, err := get(ctx, t, tr, "/pushback")
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode, "the pushback answer is returned as it is")
		require.Len(t, rep.Attempts, 1)
		assert.True(t, rep.Attempts[0].Pushback)
		mu.Lock()
		require.NotEmpty(t, events)
		assert.True(t, events[0].Attempt.Pushback, "the attempt's Event says pushback")
		assert.Equal(t, 5*time.Second, events[0].Delay)
		mu.Unlock()

		resp, rep, err = get(ctx, t, tr, "/failing")
		require.NoError(t, err, "the last answer is returned")
		assert.Equal(t, 503, resp.StatusCode)
		assert.Len(t, rep.Attempts, 1, "a first attempt goes out; its retry does not")
		assert.ErrorIs(t, rep.Stopped, resilient.ErrPushback)

		_, _, err = get(ctx, t, tr, "/reset")
		var re *resilient.Error
		require.ErrorAs(t, err, &re)
		assert.ErrorIs(t, err, resilient.ErrPushback)
		assert.Equal(t, 1, re.Attempts)
		assert.Equal(t, start.Add(5*time.Second), re.RetryAt, "RetryAt says when pushback ends")

		time.Sleep(5 * time.Second)
		resp, rep, err = get(ctx, t, tr, "/other")
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode, "retries resume once the pushback has passed")
		assert.Len(t, rep.Attempts, 2)
	})
}

// TestPushbackDropsARetryWaitingItsBackoff: a retry already waiting when
// the pushback arrives is not sent.
func TestPushbackDropsARetryWaitingItsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := byPath{
			"/failing":  stubtest.New(stubtest.Reply(503)),
			"/pushback": stubtest.New(stubtest.Reply(503, "Retry-After: 10", "X-Should-Retry: false")),
		}
		tr := resilient.NewTransport(base, resilient.WithBackoff(resilient.Exponential(time.Second, time.Second)))
		ctx := context.Background()
		var rep *resilient.Report
		var wg sync.WaitGroup
		wg.Go(func() { _, rep, _ = get(ctx, t, tr, "/failing") })
		time.Sleep(500 * time.Millisecond) // the first attempt failed; its retry waits 1 s
		_, _, err := get(ctx, t, tr, "/pushback")
		require.NoError(t, err)
		wg.Wait()
		assert.Len(t, rep.Attempts, 1)
		assert.ErrorIs(t, rep.Stopped, resilient.ErrPushback)
	})
}

// TestPushbackIsCappedByTheRetryAfterMaximum: a server cannot stop retries
// for longer than WithRetryAfterMax.
func TestPushbackIsCappedByTheRetryAfterMaximum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := byPath{
			"/pushback": stubtest.New(stubtest.Reply(503, "Retry-After: 86400", "X-Should-Retry: false")),
			"/other":    stubtest.New(stubtest.Reply(503), stubtest.Reply(200)),
		}
		tr := resilient.NewTransport(base, resilient.WithRetryAfterMax(10*time.Second))
		ctx := context.Background()
		_, _, err := get(ctx, t, tr, "/pushback")
		require.NoError(t, err)
		time.Sleep(10 * time.Second)
		resp, rep, err := get(ctx, t, tr, "/other")
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Len(t, rep.Attempts, 2)
	})
}

// TestPushbackNeverHoldsAnOuterLoopsCall: a call that repeats the
// application's key (an outer SDK's retry) is never refused, pushback or
// not, as a bare client's call would not be.
func TestPushbackNeverHoldsAnOuterLoopsCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := stubtest.New(stubtest.Reply(503, "Retry-After: 5", "X-Should-Retry: false"))
		tr := resilient.NewTransport(s)
		for range 3 {
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://api.test/v1/charges", nil)
			require.NoError(t, err)
			req.Header.Set("Idempotency-Key", "order-42")
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		assert.Len(t, s.Attempts(), 3, "each outer call sends its attempt")
	})
}
