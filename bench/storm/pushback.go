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
		ServerOptions: []fakeserver.Option{fakeserver.WithPushback(pushback.Config{})},
	})
}

// serverOptions returns the options of the fake server of one run: the
// scenario, the strategy's own options, and the pushback middleware when
// the whole storm asks for it (Config.Pushback).
func (rp runParams) serverOptions() []fakeserver.Option {
	opts := []fakeserver.Option{fakeserver.WithScenario(rp.serverScenario(rp.sc.p, false))}
	opts = append(opts, rp.strategy.ServerOptions...)
	if rp.cfg.Pushback {
		opts = append(opts, fakeserver.WithPushback(pushback.Config{}))
	}
	return opts
}
