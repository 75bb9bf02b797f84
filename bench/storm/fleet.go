package storm

import (
	"context"
	"net/http"
	"sync"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/redisbudget"
)

// The fleet strategy: each client is a process of a fleet that shares one
// retry budget per host (redisbudget's algorithm: first attempts flushed in
// batches, retries served from leases of a shared rolling window, a local
// budget when the shared one cannot answer), on top of the SDK's defaults.
// In a virtual run the shared windows are a redisbudget.Memory in the
// bubble's simulated time; FleetRedisStrategy puts them in a real Redis for
// runs on sockets.

func init() {
	strategies = append(strategies, Strategy{
		Name: "resilient-fleet",
		Description: "resilient defaults + a retry budget shared by all clients (redisbudget on an in-memory backend): " +
			"the fleet's retries < 20 % of its first attempts + 10/s over 10 s",
		Keyed: true,
		NewRun: func() (func(http.RoundTripper) *http.Client, func()) {
			mem := redisbudget.NewMemory()
			return fleetRun(func(base http.RoundTripper) *redisbudget.Fleet {
				return redisbudget.NewWithBackend(inTurn(mem, base), redisbudget.Config{})
			})
		},
	})
}

// FleetRedisStrategy is the strategy resilient-fleet with its shared windows
// in the Redis that newFleet's Fleets use (redisbudget.New with one client,
// under a prefix of the run's own): for runs on sockets only — a virtual run
// cannot wait on a real server.
func FleetRedisStrategy(name string, newFleet func() *redisbudget.Fleet) Strategy {
	return Strategy{
		Name:        name,
		Description: "resilient defaults + a retry budget shared by all clients through a real redis-server",
		Keyed:       true,
		NewRun: func() (func(http.RoundTripper) *http.Client, func()) {
			return fleetRun(func(http.RoundTripper) *redisbudget.Fleet { return newFleet() })
		},
	}
}

// fleetRun returns the NewClient of one run of a fleet strategy: each client
// gets a Fleet of its own (a process: its own lease and flusher) from
// newFleet, given the client's base; done closes them all.
func fleetRun(newFleet func(base http.RoundTripper) *redisbudget.Fleet) (func(http.RoundTripper) *http.Client, func()) {
	var mu sync.Mutex
	var fleets []*redisbudget.Fleet
	newClient := func(base http.RoundTripper) *http.Client {
		f := newFleet(base)
		mu.Lock()
		fleets = append(fleets, f)
		mu.Unlock()
		return resilientClient(base, resilient.WithRetryControl(resilient.RetryTokens{}, resilient.SharedBudget(f.For)))
	}
	done := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range fleets {
			_ = f.Close()
		}
	}
	return newClient, done
}

// clients returns the NewClient of one run of s, and what to call when the
// run is over.
func (s Strategy) clients() (func(http.RoundTripper) *http.Client, func()) {
	if s.NewRun != nil {
		return s.NewRun()
	}
	return s.NewClient, func() {}
}

// inTurn returns b, the shared backend of a virtual run's fleets, as the
// fleet of the client whose base is base sees it: each flush waits for a
// turn of the driver (turns.waitFor), keyed by the client and its count
// of flushes. The clients' flushers wake on timers of their own, all at
// the same instants; without turns they met the shared windows in the
// runtime's order, and a lease went to whichever ran first. On sockets
// (no turns) it returns b.
func inTurn(b redisbudget.Backend, base http.RoundTripper) redisbudget.Backend {
	sb, ok := base.(seededBase)
	if !ok {
		return b
	}
	tt, ok := sb.RoundTripper.(turnTransport)
	if !ok || tt.turns == nil {
		return b
	}
	return turnBackend{b, tt.turns, sb.seed}
}

// turnBackend is a Backend whose flushes take the driver's turns (inTurn).
type turnBackend struct {
	redisbudget.Backend
	turns *turns
	id    uint64 // the client's (its base's seed)
}

func (b turnBackend) Flush(ctx context.Context, rule redisbudget.Rule, reqs []redisbudget.Request) ([]redisbudget.Reply, error) {
	b.turns.waitFor(b.id)
	return b.Backend.Flush(ctx, rule, reqs)
}
