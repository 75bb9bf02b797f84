package storm

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
)

// RetryModelConfig is the model of Brooker's "Fixing retries with token
// buckets and circuit breakers" (2022): Clients clients each call a service
// Rate times a second; each call fails independently with probability p; the
// service has no capacity limit. What is measured, for p from 0 to 1, is the
// success rate the callers see and the load on the service (calls ÷
// operations).
type RetryModelConfig struct {
	Clients  int
	Rate     float64
	Duration time.Duration
	Ps       []float64
	Seed     uint64
	// Progress, if not nil, receives a progress bar.
	Progress io.Writer
}

// DefaultRetryModelConfig returns the post's setup: 100 clients × 10 calls/s,
// p = 0, 0.1, …, 1; 20 simulated seconds per point (two budget windows).
func DefaultRetryModelConfig() RetryModelConfig {
	ps := make([]float64, 11)
	for i := range ps {
		ps[i] = float64(i) / 10
	}
	return RetryModelConfig{Clients: 100, Rate: 10, Duration: 20 * time.Second, Ps: ps, Seed: 1}
}

// retryModelStrategies are the post's four players, each made of the SDK's
// real Transport with FullJitter(100ms, 2s) between attempts: no retries;
// 3 retries; the retry budget (resilient's Finagle budget: 20 % of first
// attempts + 10/s over 10 s); the circuit breaker (resilient's classic
// breaker: open at ≥ 50 % failures over ≥ 20 requests in 10 s, for 5 s).
// The budget and the breaker each come with 3 retries, as in the post. Then
// the breaker refusing retries only, the budget without its floor of 10
// retries/s (closest to the post's token bucket, which earns retries only
// from traffic), and resilient's defaults: retry tokens earned by healthy
// answers.
func retryModelStrategies() []Strategy {
	mk := func(name, desc string, opts ...resilient.Option) Strategy {
		return Strategy{Name: name, Description: desc, Keyed: true, NewClient: func(base http.RoundTripper) *http.Client {
			return resilientClient(base, opts...)
		}}
	}
	only := resilient.WithRetryControl // the controls given, not the tokens
	return []Strategy{
		mk("no retries", "1 attempt", resilient.WithMaxAttempts(1), only()),
		mk("3 retries", "4 attempts, no retry control", only()),
		mk("budget", "4 attempts + resilient's Finagle budget", only(resilient.RetryBudget{})),
		mk("breaker", "4 attempts + resilient's classic circuit breaker", only(resilient.CircuitBreaker{})),
		mk("retry breaker", "4 attempts + resilient's breaker refusing retries only",
			only(resilient.CircuitBreaker{RetriesOnly: true})),
		mk("budget, no floor", "4 attempts + a budget of 20 % of first attempts, no per-second floor",
			only(resilient.RetryBudget{Ratio: 0.2, MinPerSecond: -1, Window: 10 * time.Second})),
		mk("retry tokens", "4 attempts + resilient's defaults: retry tokens"),
	}
}

// RetryModel runs the model in simulated time (see RunVirtual) and returns
// one Result per strategy and p (Scenario "steady").
func RetryModel(t *testing.T, c RetryModelConfig) []Result {
	t.Helper()
	cfg := Config{
		Clients: c.Clients, Rate: c.Rate, SteadyDuration: c.Duration, Ps: c.Ps, NoOutage: true,
		OpTimeout: 5 * time.Second, Seed: c.Seed, Virtual: true, Bin: 100 * time.Millisecond, Progress: c.Progress,
		Fates: FatesStream, Scales: []string{ScalePerClient}, MaxDisturbed: 0.01,
	}
	if err := cfg.validateLoad(); err != nil {
		t.Fatal(err)
	}
	return runVirtualPlan(t, newPlan(cfg, retryModelStrategies()))
}

// RetryModelExpected returns, for the strategies whose outcome has a closed
// form, the expected success rate and load at failure rate p: no retries
// (1-p, 1) and n retries (1-p^(n+1), 1+p+…+p^n).
func RetryModelExpected(strategy string, p float64) (success, load float64, ok bool) {
	switch strategy {
	case "no retries":
		return 1 - p, 1, true
	case "3 retries":
		load = 1 + p + p*p + p*p*p
		return 1 - p*p*p*p, load, true
	}
	return 0, 0, false
}
