package storm

import (
	"net/http"

	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/pushback"
)

// PushbackStrategy is the name of the strategy that runs the SDK's defaults
// against a server behind the pushback middleware (package pushback, its
// defaults): the server half of the retry contract, which at fleet scale is
// the only place that sees the aggregate.
const PushbackStrategy = "resilient-pushback"

func init() {
	strategies = append(strategies, Strategy{
		Name:        PushbackStrategy,
		Description: "resilient defaults; the server mounts the pushback middleware (server-side retry budget, defaults)",
		Keyed:       true,
		NewClient: func(base http.RoundTripper) *http.Client {
			return resilientClient(base)
		},
		Pushback: &pushback.Config{},
	})
}

// serverOptions returns the options of the fake server of one run: the
// scenario, the strategy's own options, and the pushback middleware if the
// run has one (pushbackConfig) and the driver does not run it in front of
// its capacity model (driverCapacity).
func (rp runParams) serverOptions() []fakeserver.Option {
	opts := []fakeserver.Option{fakeserver.WithScenario(rp.serverScenario(rp.sc.p, false))}
	opts = append(opts, rp.strategy.ServerOptions...)
	if c := rp.pushbackConfig(); c != nil && !rp.driverCapacity() {
		opts = append(opts, fakeserver.WithPushback(*c))
	}
	return opts
}

// pushbackConfig returns the configuration of the run's pushback
// middleware, nil for none: the strategy's (Strategy.Pushback), else the
// defaults when the whole storm asks for it (Config.Pushback). A Seed of 0
// is derived from the storm's seed: the middleware's hash of keys and its
// Retry-After draws are then the same in every run of a seed.
func (rp runParams) pushbackConfig() *pushback.Config {
	var c pushback.Config
	switch {
	case rp.strategy.Pushback != nil:
		c = *rp.strategy.Pushback
	case !rp.cfg.Pushback:
		return nil
	}
	if c.Seed == 0 {
		c.Seed = mix(rp.cfg.Seed, 0x9b5bac, 0) | 1 // never 0, which means random
	}
	return &c
}
