package resilient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/retrycontrol"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBudgetCapsRetriesAgainstAFailingServer(t *testing.T) {
	tests := []struct {
		name      string
		budget    resilient.Option
		maxSent   int
		exactSent int
	}{
		{"budget ratio 0.1, no floor", resilient.WithRetryControl(resilient.RetryBudget{Ratio: 0.1, MinPerSecond: -1, Window: time.Minute}), 1100, 0},
		{"budget and tokens off", resilient.WithRetryControl(), 0, 4000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := stubtest.New(stubtest.ReplyDeduping(503))
			rep := new(resilient.Report)
			tr := resilient.NewTransport(s, resilient.WithBackoff(nil), resilient.WithMaxAttempts(4), tc.budget)
			stoppedByBudget := 0
			for i := range 1000 {
				*rep = resilient.Report{}
				// Each operation its own body: the same one sent again
				// would be a loop's re-send (loopsite.go).
				resp, err := do(t, tr, stubtest.Post(resilient.ContextWithReport(context.Background(), rep), fmt.Sprintf(`{"i":%d}`, i)))
				require.NoError(t, err)
				require.Equal(t, 503, resp.StatusCode, "the last response is returned, not swallowed")
				if errors.Is(rep.Stopped, resilient.ErrBudgetExhausted) {
					stoppedByBudget++
				}
			}
			n := len(s.Attempts())
			if tc.exactSent > 0 {
				assert.Equal(t, tc.exactSent, n)
				assert.Zero(t, stoppedByBudget)
				return
			}
			assert.LessOrEqual(t, n, tc.maxSent)
			assert.GreaterOrEqual(t, n, 1000)
			assert.Greater(t, stoppedByBudget, 900, "the Report says the budget stopped the retries")
			t.Logf("1000 operations, max 4 attempts, ratio 0.1: %d requests", n)
		})
	}
}

func TestBudgetIsPerHostAndShareable(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(503))
	cfg := resilient.RetryBudget{Ratio: -1, MinPerSecond: 0.1, Window: 10 * time.Second} // exactly 1 retry per window
	send := func(tr http.RoundTripper, host string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+host+"/v1/x", strings.NewReader("{}"))
		_, err := do(t, tr, req)
		require.NoError(t, err)
	}
	perHost := resilient.NewTransport(s, resilient.WithBackoff(nil), resilient.WithMaxAttempts(2), resilient.WithRetryControl(resilient.RetryTokens{}, cfg))
	send(perHost, "a.test")
	send(perHost, "b.test")
	send(perHost, "a.test")
	assert.Len(t, s.Attempts(), 2+2+1, "each host has its own budget: one retry each")

	s2 := stubtest.New(stubtest.ReplyDeduping(503))
	shared := retrycontrol.NewBudget(retrycontrol.BudgetConfig(cfg))
	sharedBudget := resilient.SharedBudget(func(string) resilient.Budget { return shared })
	t1 := resilient.NewTransport(s2, resilient.WithBackoff(nil), resilient.WithMaxAttempts(2), resilient.WithRetryControl(resilient.RetryTokens{}, sharedBudget))
	t2 := resilient.NewTransport(s2, resilient.WithBackoff(nil), resilient.WithMaxAttempts(2), resilient.WithRetryControl(resilient.RetryTokens{}, sharedBudget))
	send(t1, "a.test")
	send(t2, "b.test")
	assert.Len(t, s2.Attempts(), 2+1, "one shared budget: one retry in all")
}

func breakerTransport(s http.RoundTripper, extra ...resilient.Option) *resilient.Transport {
	return resilient.NewTransport(s, append([]resilient.Option{
		resilient.WithBackoff(nil), resilient.WithMaxAttempts(1),
		resilient.WithRetryControl(resilient.RetryTokens{}, resilient.CircuitBreaker{MinRequests: 10, FailureRatio: 0.5, OpenTimeout: 5 * time.Second, HalfOpenProbes: 2}),
	}, extra...)...)
}

func TestBreakerOpensFailsFastAndCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		up := false
		s := stubtest.New(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			if up {
				return stubtest.Reply(200)(req)
			}
			return stubtest.Reply(503)(req)
		})
		var events []resilient.Event
		tr := breakerTransport(s, resilient.WithObserver(func(_ context.Context, e resilient.Event) {
			if e.Kind == resilient.EventBreaker {
				events = append(events, e)
			}
		}))
		for range 10 {
			resp, err := do(t, tr, stubtest.Post(context.Background(), "{}"))
			require.NoError(t, err)
			require.Equal(t, 503, resp.StatusCode)
		}
		require.Len(t, s.Attempts(), 10)

		// Open: fail fast, nothing sent.
		for range 50 {
			_, err := do(t, tr, stubtest.Post(context.Background(), "{}"))
			require.ErrorIs(t, err, resilient.ErrCircuitOpen)
			var re *resilient.Error
			require.ErrorAs(t, err, &re)
			assert.Zero(t, re.Attempts)
			assert.False(t, re.Unknown, "nothing was sent")
			assert.Equal(t, time.Now().Add(5*time.Second).Round(time.Second), re.RetryAt.Round(time.Second))
		}
		assert.Len(t, s.Attempts(), 10, "the server sees none of the refused requests")

		// After the open timeout, probes go through and close it.
		time.Sleep(5*time.Second + time.Millisecond)
		mu.Lock()
		up = true
		mu.Unlock()
		for range 2 {
			resp, err := do(t, tr, stubtest.Post(context.Background(), "{}"))
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
		}
		for range 20 {
			_, err := do(t, tr, stubtest.Post(context.Background(), "{}"))
			require.NoError(t, err)
		}
		assert.Len(t, s.Attempts(), 10+2+20)
		require.Len(t, events, 3)
		assert.Equal(t, []resilient.BreakerState{resilient.BreakerOpen, resilient.BreakerHalfOpen, resilient.BreakerClosed},
			[]resilient.BreakerState{events[0].To, events[1].To, events[2].To})
	})
}

func TestBreakerIgnores4xx(t *testing.T) {
	s := stubtest.New(stubtest.Reply(400), stubtest.Reply(404), stubtest.Reply(422), stubtest.Reply(409))
	tr := breakerTransport(s)
	for range 200 {
		_, err := do(t, tr, stubtest.Post(context.Background(), "{}"))
		require.NoError(t, err)
	}
	assert.Len(t, s.Attempts(), 200, "4xx answers never open the breaker")
}

func TestBreakerIsPerHost(t *testing.T) {
	s := stubtest.New(stubtest.Reply(503))
	tr := breakerTransport(s)
	for range 10 {
		do(t, tr, stubtest.Post(context.Background(), "{}"))
	}
	_, err := do(t, tr, stubtest.Post(context.Background(), "{}"))
	require.ErrorIs(t, err, resilient.ErrCircuitOpen)
	req, _ := http.NewRequest(http.MethodGet, "http://other.test/", nil)
	resp, err := do(t, tr, req)
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
}

func TestRetryAfterPausesTheHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		first := true
		s := stubtest.New(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			if first && req.URL.Host == "a.test" {
				first = false
				return stubtest.Reply(429, "Retry-After: 1")(req)
			}
			return stubtest.Reply(200)(req)
		})
		tr := resilient.NewTransport(s, resilient.WithBackoff(nil))
		get := func(host string) time.Duration {
			start := time.Now()
			req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
			resp, err := do(t, tr, req)
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode)
			return time.Since(start)
		}
		var wg sync.WaitGroup
		var first429, sameHost, otherHost time.Duration
		wg.Go(func() { first429 = get("a.test") })
		synctest.Wait() // the first request got its 429 and is waiting
		wg.Go(func() { sameHost = get("a.test") })
		wg.Go(func() { otherHost = get("b.test") })
		wg.Wait()
		assert.Equal(t, time.Second, first429)
		assert.Equal(t, time.Second, sameHost, "a concurrent request to the same host waits for the pause")
		assert.Zero(t, otherHost, "another host is not paused")
	})
}

func TestRateLimitPacesPerHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := stubtest.New(stubtest.Reply(200))
		tr := resilient.NewTransport(s, resilient.WithRetryControl(resilient.RetryTokens{}, resilient.RateLimit{Rate: 10, Burst: 1}))
		start := time.Now()
		for range 11 {
			req, _ := http.NewRequest(http.MethodGet, "http://a.test/", nil)
			_, err := do(t, tr, req)
			require.NoError(t, err)
		}
		assert.Equal(t, time.Second, time.Since(start), "11 requests at 10/s with burst 1 take 1 s")

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://a.test/", nil)
		_, err := do(t, tr, req)
		require.ErrorIs(t, err, resilient.ErrRateLimited, "a wait past the deadline is refused at once")
	})
}

func TestBreakerRetriesOnlyStillSendsFirstAttempts(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(503))
	tr := resilient.NewTransport(s, resilient.WithBackoff(nil), resilient.WithMaxAttempts(3),
		resilient.WithRetryControl(resilient.CircuitBreaker{MinRequests: 10, FailureRatio: 0.5, OpenTimeout: time.Hour, RetriesOnly: true}))
	for i := range 4 { // 12 failed attempts: the breaker opens during the fourth operation
		_, err := do(t, tr, stubtest.Post(context.Background(), fmt.Sprintf(`{"op":%d}`, i)))
		require.NoError(t, err)
	}
	before := len(s.Attempts())
	require.Less(t, before, 12)
	rep := new(resilient.Report)
	for i := range 50 {
		*rep = resilient.Report{}
		resp, err := do(t, tr, stubtest.Post(resilient.ContextWithReport(context.Background(), rep), fmt.Sprintf(`{"i":%d}`, i))) // distinct operations
		require.NoError(t, err, "the first attempt is sent and its answer returned")
		assert.Equal(t, 503, resp.StatusCode)
		assert.ErrorIs(t, rep.Stopped, resilient.ErrCircuitOpen, "no retry while the breaker is open")
	}
	assert.Len(t, s.Attempts(), before+50, "one attempt per operation while open")
}
