package e2e

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
)

// retrying is the client configuration of the fault rows: short jittered
// backoff, six attempts, and no budget or breaker, so that every fault is
// retried as far as the attempts allow.
func retrying(extra ...resilient.Option) []resilient.Option {
	return append([]resilient.Option{
		resilient.WithBackoff(resilient.FullJitter(2*time.Millisecond, 40*time.Millisecond)),
		resilient.WithMaxAttempts(6),
		// The fake server dedupes by key; the tests declare it.
		resilient.WithDedupingServer("127.0.0.1"),
	}, extra...)
}

// guarded is the client configuration of the overload rows: the default
// budget and a breaker that reopens quickly, so that the load tests the
// refusals too.
func guarded(extra ...resilient.Option) []resilient.Option {
	return append([]resilient.Option{
		resilient.WithBackoff(resilient.FullJitter(5*time.Millisecond, 100*time.Millisecond)),
		resilient.WithRetryControl(resilient.RetryTokens{}, resilient.CircuitBreaker{Window: time.Second, OpenTimeout: 200 * time.Millisecond}),
	}, extra...)
}

// faultCase is one row of a fault matrix.
type faultCase struct {
	name     string
	scenario fakeserver.Scenario
	wrap     func(http.Handler) http.Handler
	// hits counts the faults that wrap injected.
	hits *atomic.Int64
	load load
	// deadline is the caller's deadline per operation when the row is run
	// with the SDK's defaults (TestNeverWorseThanBareClient), for rows whose
	// fault is a delay that load.options turn into a failure with an
	// attempt timeout; 0 for the default.
	deadline time.Duration
}

// TestFaultMatrix runs thousands of keyed operations from concurrent clients,
// over loopback, against the fake server under each fault in turn, and holds
// every operation to the oracle of the package doc.
func TestFaultMatrix(t *testing.T) {
	rows := runMatrix(t, faultRows(), func(t *testing.T, c *faultCase) (*fakeserver.Server, string) {
		return startAPI(t, c.scenario, c.wrap)
	})
	t.Log(table("fault matrix: fake server on 127.0.0.1", rows))
}

// faultRows are the rows of TestFaultMatrix, each with its own counter of
// injected faults where the fault is a middleware's.
func faultRows() []faultCase {
	resets := new(atomic.Int64)
	return []faultCase{
		{
			name:     "lost response after commit",
			scenario: chargesRoute(fakeserver.Fault{Kind: fakeserver.FaultLostResponse, Probability: 0.3}),
			load:     load{ops: 1500, concurrency: 32, options: retrying()},
		},
		{
			name:     "reset before the effect",
			scenario: chargesRoute(fakeserver.Fault{Kind: fakeserver.FaultReset, Probability: 0.3}),
			load:     load{ops: 1500, concurrency: 32, options: retrying()},
		},
		{
			name: "reset after the effect",
			wrap: resetAfterEffect(0.3, 8, resets),
			hits: resets,
			load: load{ops: 1500, concurrency: 32, options: retrying()},
		},
		{
			name:     "hang past the attempt timeout",
			scenario: chargesRoute(fakeserver.Fault{Kind: fakeserver.FaultHang, Probability: 0.15}),
			load:     load{ops: 1000, concurrency: 64, options: retrying(resilient.WithAttemptTimeout(100 * time.Millisecond))},
			deadline: 300 * time.Millisecond,
		},
		{
			// Two attempts of one operation in flight at once: one executes,
			// the other gets 409 in progress (Retry-After: 1), then the replay.
			name:     "409 in progress (twin attempts)",
			scenario: chargesRoute(fakeserver.Fault{Kind: fakeserver.FaultLatency, Latency: fakeserver.Duration(20 * time.Millisecond), Probability: 1}),
			load:     load{ops: 300, concurrency: 75, twins: true, options: retrying()},
		},
		{
			// Mostly Retry-After: 0; the script first answers one 429 with
			// Retry-After: 1 and one 503 with a date one second ahead, which
			// pause the whole host for a second.
			name: "429/503 with Retry-After",
			scenario: fakeserver.Scenario{Seed: 8, Routes: []fakeserver.Route{{
				Match: "POST /v1/charges",
				Script: []fakeserver.Fault{
					{Kind: fakeserver.FaultStatus, Status: 429, RetryAfter: fakeserver.Duration(time.Second)},
					{Kind: fakeserver.FaultStatus, Status: 503, RetryAfter: fakeserver.Duration(time.Second), RetryAfterDate: true},
				},
				Mix: []fakeserver.Fault{
					{Kind: fakeserver.FaultStatus, Status: 429, Headers: map[string]string{"Retry-After": "0"}, Probability: 0.2},
					{Kind: fakeserver.FaultStatus, Status: 503, Headers: map[string]string{"Retry-After": "0"}, Probability: 0.1},
				},
			}}},
			load: load{ops: 1500, concurrency: 32, options: retrying()},
		},
		{
			// Slow bodies: most finish within the attempt timeout, some do not
			// (the caller gets the 201 and a body that fails to read).
			name: "slow body",
			scenario: chargesRoute(
				fakeserver.Fault{Kind: fakeserver.FaultSlowBody, BodyDuration: fakeserver.Duration(30 * time.Millisecond), Probability: 0.3},
				fakeserver.Fault{Kind: fakeserver.FaultSlowBody, BodyDuration: fakeserver.Duration(500 * time.Millisecond), Probability: 0.05},
			),
			load:     load{ops: 1000, concurrency: 64, options: retrying(resilient.WithAttemptTimeout(250 * time.Millisecond))},
			deadline: 250 * time.Millisecond,
		},
		{
			name: "truncated and malformed bodies",
			scenario: chargesRoute(
				fakeserver.Fault{Kind: fakeserver.FaultTruncatedBody, Probability: 0.2},
				fakeserver.Fault{Kind: fakeserver.FaultMalformedBody, Probability: 0.1},
			),
			load: load{ops: 1500, concurrency: 32, options: retrying()},
		},
		{
			name:     "outage window",
			scenario: fakeserver.Scenario{Outages: []fakeserver.Outage{{Start: fakeserver.Duration(100 * time.Millisecond), End: fakeserver.Duration(1100 * time.Millisecond)}}},
			load:     load{ops: 1500, concurrency: 32, pace: 50 * time.Millisecond, options: guarded()},
		},
		{
			name: "capacity storm",
			scenario: fakeserver.Scenario{Capacity: &fakeserver.Capacity{
				MaxConcurrent: 8, ServiceTime: fakeserver.Duration(5 * time.Millisecond),
				Queue: 16, QueueTimeout: fakeserver.Duration(30 * time.Millisecond),
			}},
			load: load{ops: 1500, concurrency: 96, pace: 40 * time.Millisecond, options: guarded()},
		},
		{
			name: "all faults at once",
			scenario: chargesRoute(
				fakeserver.Fault{Kind: fakeserver.FaultLostResponse, Probability: 0.08},
				fakeserver.Fault{Kind: fakeserver.FaultReset, Probability: 0.08},
				fakeserver.Fault{Kind: fakeserver.FaultHang, Probability: 0.03},
				fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: 429, Headers: map[string]string{"Retry-After": "0"}, Probability: 0.1},
				fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: 503, Headers: map[string]string{"Retry-After": "0"}, Probability: 0.05},
				fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: 500, Probability: 0.05},
				fakeserver.Fault{Kind: fakeserver.FaultTruncatedBody, Probability: 0.05},
				fakeserver.Fault{Kind: fakeserver.FaultSlowBody, BodyDuration: fakeserver.Duration(20 * time.Millisecond), Probability: 0.05},
			),
			load:     load{ops: 1500, concurrency: 32, options: retrying(resilient.WithMaxAttempts(4), resilient.WithAttemptTimeout(150*time.Millisecond))},
			deadline: 300 * time.Millisecond,
		},
	}
}

// runMatrix runs each case as a subtest against the API that start gives it
// (start may also set the case's load.during) and returns the tallies.
func runMatrix(t *testing.T, cases []faultCase, start func(*testing.T, *faultCase) (*fakeserver.Server, string)) []tally {
	var rows []tally
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, url := start(t, &c)
			l := c.load
			l.url = url
			l.ops = scaled(l.ops)
			if l.maxTime == 0 {
				l.maxTime = 5 * time.Second
			}
			results, elapsed := l.run(t)
			tl := check(t, c.name, results, srv, elapsed)
			if c.hits != nil {
				tl.injected += c.hits.Load()
			}
			rows = append(rows, tl)
		})
	}
	return rows
}
