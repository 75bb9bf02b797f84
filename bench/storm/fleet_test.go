package storm

import (
	"context"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/internal/redistest"
	"github.com/resilienthttp/resilient/redisbudget"
)

// In virtual time, resilient-fleet holds the whole fleet to one budget: at
// p = 1 the server sees at most 20 % more than the first attempts, plus the
// fleet's floor of 10 retries per second — not a floor per client, as
// resilient-budget's per-client budgets allow — and it does no harm.
func TestFleetVirtual(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Ps, cfg.NoOutage = []float64{0.1, 1}, true
	cfg.Strategies = []string{"none", "resilient-budget", "resilient-fleet"}
	res := RunVirtual(t, cfg)
	checkInvariants(t, cfg, res)
	r := find(res, ScenarioSteady, 1, "resilient-fleet")
	require.NotNil(t, r)
	floor := 10 * cfg.SteadyDuration.Seconds() / float64(r.Ops)
	t.Logf("p=1: resilient-fleet amplification %.3f (rule ≤ %.3f), resilient-budget %.3f",
		r.Amplification, 1.2+floor, find(res, ScenarioSteady, 1, "resilient-budget").Amplification)
	assert.LessOrEqual(t, r.Amplification, 1.2+floor+0.01, describe(*r))
	for _, r := range res {
		if r.Strategy == "resilient-fleet" {
			assert.False(t, r.Harmful, describe(r))
		}
	}
}

// On loopback sockets, the same strategy with its windows in a real
// redis-server: every client a process of the fleet, each with its own
// Fleet on one go-redis client.
func TestFleetRedisSockets(t *testing.T) {
	addr := redistest.Start(t, redistest.Config{}).Addr
	c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	var mu sync.Mutex
	var fleets []*redisbudget.Fleet
	st := FleetRedisStrategy("resilient-fleet-redis", func() *redisbudget.Fleet {
		f := redisbudget.New(c, redisbudget.Config{})
		mu.Lock()
		fleets = append(fleets, f)
		mu.Unlock()
		return f
	})
	none, _ := lookupStrategy("none")
	cfg := tinyConfig()
	cfg.Strategies = []string{none.Name, st.Name}
	plan := newPlan(cfg, []Strategy{none, st})
	plan.maxConns = connLimit(cfg.MaxConns, 1)
	var res []Result
	for _, g := range plan.groups() {
		for _, s := range plan.strategies {
			res = append(res, runOne(context.Background(), plan.run(g, s, nil)))
		}
	}
	res = Compare(res)
	checkInvariants(t, cfg, res)
	var trips, flushes, errs, firsts, hits int64
	for _, f := range fleets {
		s := f.Stats()
		trips, flushes, errs, firsts, hits = trips+s.RoundTrips, flushes+s.Flushes, errs+s.FlushErrors,
			firsts+s.FirstAttempts, hits+s.LeaseHits
	}
	t.Logf("%d Fleets: %d round trips, %d flushes (%d failed), %d first attempts, %d retries from leases",
		len(fleets), trips, flushes, errs, firsts, hits)
	assert.Positive(t, flushes, "the windows are in Redis")
	keys, err := c.Keys(context.Background(), redisbudget.DefaultPrefix+"*").Result()
	require.NoError(t, err)
	assert.NotEmpty(t, keys)
	for _, r := range res {
		t.Logf("%s: amplification %.2f, success %.1f %%", describe(r), r.Amplification, 100*r.SuccessRate)
	}
}
