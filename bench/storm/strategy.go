package storm

import (
	"net/http"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/bench"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/pushback"
)

// Strategy is a way for a client to call the server: a client library and
// its retry policy.
type Strategy struct {
	// Name identifies the strategy in flags, tables and plots.
	Name string
	// Description says what it is, in a few words.
	Description string
	// Keyed reports whether every attempt of an operation carries the same
	// Idempotency-Key. Keyed strategies must cause no duplicate effect.
	Keyed bool
	// SetsKey reports whether the harness sets the key header on each
	// operation's request (for clients that do not mint keys themselves);
	// false for resilient, which mints one per operation, and for the
	// unkeyed strategy.
	SetsKey bool
	// NewClient builds one client's *http.Client over base. It is called
	// once per client, so that per-client state (budgets, breakers) is not
	// shared between clients.
	NewClient func(base http.RoundTripper) *http.Client
	// MaxAttempts is the most requests one operation sends, for the
	// dry-run line of a -target run; 0 means the built-in strategies' own
	// (see attemptsOf).
	MaxAttempts int
	// ServerOptions are added to the options of the fake server of the
	// strategy's runs (after the scenario), for strategies that need the
	// server's help.
	ServerOptions []fakeserver.Option
	// Pushback, if not nil, mounts the pushback middleware in the fake
	// server of the strategy's runs, configured by it. A Seed of 0 is
	// derived from the storm's seed, so that virtual runs replay exactly.
	Pushback *pushback.Config

	// NewRun, if not nil, is called once per run instead of using
	// NewClient: it returns the run's NewClient, whose clients may share
	// state as the processes of a fleet share a Redis (see fleet.go), and a
	// function that releases that state when the run is over.
	NewRun func() (newClient func(base http.RoundTripper) *http.Client, done func())
}

// Naive retries: the loop an application writes by hand.
const (
	naiveAttempts = 4
	naiveDelay    = 100 * time.Millisecond
)

// strategies is the list of strategies, in the order of the tables.
var strategies = []Strategy{
	{
		Name:        "none",
		Description: "net/http, one attempt",
		Keyed:       true, SetsKey: true,
		NewClient: bench.NetHTTP,
	},
	{
		Name:        "naive",
		Description: "hand-written loop: 4 attempts, fixed 100 ms, no jitter, no budget",
		Keyed:       true, SetsKey: true,
		NewClient: func(base http.RoundTripper) *http.Client {
			return &http.Client{Transport: &naiveTransport{base: base, attempts: naiveAttempts, delay: naiveDelay}}
		},
	},
	{
		Name:        "naive-nokey",
		Description: "the same loop without an idempotency key",
		NewClient: func(base http.RoundTripper) *http.Client {
			return &http.Client{Transport: &naiveTransport{base: base, attempts: naiveAttempts, delay: naiveDelay}}
		},
	},
	{
		Name:        "retryablehttp",
		Description: "go-retryablehttp defaults: 5 attempts, 1 s·2ⁿ up to 30 s, no jitter",
		Keyed:       true, SetsKey: true,
		NewClient: bench.RetryableHTTP,
	},
	{
		Name:        "failsafe",
		Description: "failsafe-go failsafehttp defaults: 3 attempts, no delay",
		Keyed:       true, SetsKey: true,
		NewClient: bench.Failsafe,
	},
	{
		Name:        "resilient-fulljitter",
		Description: "resilient, FullJitter(100ms, 2s), 4 attempts, no retry control",
		Keyed:       true,
		NewClient: func(base http.RoundTripper) *http.Client {
			return resilientClient(base, resilient.WithRetryControl())
		},
	},
	{
		Name:        "resilient-decorrelated",
		Description: "resilient, DecorrelatedJitter(100ms, 2s), 4 attempts, no retry control",
		Keyed:       true,
		NewClient: func(base http.RoundTripper) *http.Client {
			return resilientClient(base, resilient.WithBackoff(jitter(base, resilient.DecorrelatedJitter(100*time.Millisecond, 2*time.Second))),
				resilient.WithRetryControl())
		},
	},
	{
		Name:        "resilient-budget",
		Description: "resilient with the Finagle budget (20 % + 10/s over 10 s) instead of retry tokens",
		Keyed:       true,
		NewClient: func(base http.RoundTripper) *http.Client {
			return resilientClient(base, resilient.WithRetryControl(resilient.RetryBudget{}))
		},
	},
	{
		Name:        "resilient-classic",
		Description: "resilient's former defaults: Finagle budget + classic breaker (refuses first attempts while open)",
		Keyed:       true,
		NewClient: func(base http.RoundTripper) *http.Client {
			return resilientClient(base, resilient.WithRetryControl(resilient.RetryBudget{}, resilient.CircuitBreaker{}))
		},
	},
	{
		Name:        "resilient-retrybreaker",
		Description: "resilient, Finagle budget + breaker refusing retries only (CircuitBreaker.RetriesOnly)",
		Keyed:       true,
		NewClient: func(base http.RoundTripper) *http.Client {
			return resilientClient(base, resilient.WithRetryControl(resilient.RetryBudget{}, resilient.CircuitBreaker{RetriesOnly: true}))
		},
	},
	{
		Name:        "resilient-tokens-refill0.25",
		Description: "resilient, retry tokens earning 0.25 per healthy answer (default 0.5)",
		Keyed:       true,
		NewClient: func(base http.RoundTripper) *http.Client {
			return resilientClient(base, resilient.WithRetryControl(resilient.RetryTokens{Refill: 0.25}))
		},
	},
	{
		Name:        "resilient-tokens-refill1",
		Description: "resilient, retry tokens earning 1 per healthy answer (default 0.5)",
		Keyed:       true,
		NewClient: func(base http.RoundTripper) *http.Client {
			return resilientClient(base, resilient.WithRetryControl(resilient.RetryTokens{Refill: 1}))
		},
	},
	{
		Name:        "resilient-tokens-cap0.1",
		Description: "resilient, retry tokens with a bucket of 10 % of recent first attempts (default 2 %)",
		Keyed:       true,
		NewClient: func(base http.RoundTripper) *http.Client {
			return resilientClient(base, resilient.WithRetryControl(resilient.RetryTokens{CapRatio: 0.1}))
		},
	},
	{
		Name:        "resilient",
		Description: "resilient defaults: FullJitter + retry tokens (first attempts never refused)",
		Keyed:       true,
		NewClient: func(base http.RoundTripper) *http.Client {
			return resilientClient(base)
		},
	},
}

func init() {
	strategies = append(strategies, anchorStrategies()...)
}

// Strategies returns the known strategies, in table order.
func Strategies() []Strategy {
	return append([]Strategy(nil), strategies...)
}

// CommandStrategies returns the strategies the command runs by default:
// none, the hand-written loop with and without a key, the peers and
// resilient's defaults — what the headline compares, and the duplicates a
// loop without a key makes. -strategies all runs every strategy.
func CommandStrategies() []string {
	return []string{"none", "naive", "naive-nokey", "retryablehttp", "failsafe", "resilient"}
}

// StrategyNames returns the names of the known strategies, in table order.
func StrategyNames() []string {
	names := make([]string, len(strategies))
	for i, s := range strategies {
		names[i] = s.Name
	}
	return names
}

func lookupStrategy(name string) (Strategy, bool) {
	for _, s := range strategies {
		if s.Name == name {
			return s, true
		}
	}
	return Strategy{}, false
}

// lookup finds a strategy by name among c.Own, then the built-in ones.
func (c Config) lookup(name string) (Strategy, bool) {
	for _, s := range c.Own {
		if s.Name == name {
			return s, true
		}
	}
	return lookupStrategy(name)
}

// strategies returns the strategies c names; unknown names are skipped
// (Validate reports them).
func (c Config) strategies() []Strategy {
	var out []Strategy
	for _, name := range c.Strategies {
		if st, ok := c.lookup(name); ok {
			out = append(out, st)
		}
	}
	return out
}
