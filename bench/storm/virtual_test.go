package storm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVirtualTiny runs the tiny storm in simulated time, at both scales.
// Without sockets there is no net/http re-send and no scheduling noise, so
// the timing and rate properties are exact.
func TestVirtualTiny(t *testing.T) {
	cfg := tinyConfig()
	cfg.Scales = []string{ScalePerClient, ScaleShared}
	res := RunVirtual(t, cfg)
	checkInvariants(t, cfg, res)
	for _, r := range res {
		assert.False(t, r.Disturbed, "%s: disturbed in simulated time", describe(r))
		assert.Zero(t, r.MaxLagMs, "%s: the load generator lagged in simulated time", describe(r))
		if r.Strategy == "none" {
			assert.Equal(t, 1.0, r.Amplification, "%s: exactly one attempt in process", describe(r))
			assert.Zero(t, r.Unsent, describe(r))
		}
		if r.Strategy == "naive" && r.Scenario == ScenarioSteady && r.P == 1 {
			assert.Equal(t, 4.0, r.Amplification, "%s: 4 attempts each", describe(r))
		}
		if r.Scenario == ScenarioSteady && r.P == 0 && r.Strategy != "naive-nokey" {
			assert.GreaterOrEqual(t, r.SuccessRate, 0.85, "%s: a healthy server (10 %% lost responses)", describe(r))
		}
	}
	nokey := find(res, ScenarioSteady, 0, "naive-nokey")
	require.NotNil(t, nokey)
	assert.Positive(t, nokey.Duplicates, "naive-nokey at p=0 with 10 %% lost responses: is the ledger oracle blind?")
}

// TestHarmIsExact checks the instrument: with the same fate for every
// strategy's k-th attempt of an operation and no capacity limit, a strategy
// that always sends the first attempt cannot fail an operation that one
// attempt completes, so its harm is exactly 0; one that refuses first
// attempts (the classic breaker) shows harm.
func TestHarmIsExact(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Capacity = Capacity{}
	cfg.NoOutage, cfg.Ps, cfg.Ops = true, []float64{0.3, 0.7}, 800
	cfg.Scales = []string{ScalePerClient, ScaleShared}
	cfg.Strategies = []string{"none", "naive", "resilient-fulljitter", "anchor-aws", "resilient"}
	res := RunVirtual(t, cfg)
	require.Len(t, res, 2*2*len(cfg.Strategies))
	tests := []struct {
		strategy string
		harmless bool
	}{
		{"none", true}, {"naive", true}, {"resilient-fulljitter", true}, {"anchor-aws", true},
	}
	for _, tt := range tests {
		for _, r := range res {
			if r.Strategy != tt.strategy {
				continue
			}
			require.NotNil(t, r.Harm, describe(r))
			assert.Zero(t, *r.Harm, "%s: failed operations that one attempt completed", describe(r))
			assert.GreaterOrEqual(t, *r.VsNone, 0.0, describe(r))
			assert.False(t, r.Harmful, describe(r))
		}
	}
	// The classic breaker refuses first attempts once it opens: at p = 0.7
	// with one shared Transport it fails operations none completes.
	var shared *Result
	for i, r := range res {
		if r.Strategy == "resilient" && r.Scale == ScaleShared && r.P == 0.7 {
			shared = &res[i]
		}
	}
	require.NotNil(t, shared)
	if assert.NotNil(t, shared.Harm) {
		assert.Positive(t, *shared.Harm, "a breaker that refuses first attempts must show harm (or the defaults changed)")
	}
}

// TestOverloadWastedWork checks the work accounting on a tiny overload in
// simulated time: one slot of 10 ms (100 requests/s) offered twice that,
// shedding at half a request's cost, no failures and no lost responses.
func TestOverloadWastedWork(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Clients, cfg.Rate = 1, 10
	cfg.Capacity = Capacity{MaxConcurrent: 1, ServiceTime: 10 * time.Millisecond}
	cfg.NoOutage, cfg.Ps, cfg.Overload, cfg.Ops = true, nil, []float64{2}, 400
	cfg.ShedCost, cfg.Lost = 0.5, 0
	cfg.Strategies = []string{"none", "naive"}
	res := RunVirtual(t, cfg)
	require.Len(t, res, 2)
	for _, r := range res {
		assert.Equal(t, 2.0, r.Factor)
		assert.InDelta(t, float64(r.Admitted)+0.5*float64(r.Shed), r.Work, 1e-9, describe(r))
		succeeded := r.SuccessRate * float64(r.Ops)
		assert.InDelta(t, r.Work-succeeded, r.WastedWork, 1e-6, describe(r))
		assert.Positive(t, r.Shed, "%s: offered twice the capacity, nothing shed", describe(r))
		assert.LessOrEqual(t, r.GoodputPerS, 1.0/0.010, "%s: goodput above the server's capacity", describe(r))
	}
	none := find(res, ScenarioOverload, 0, "none")
	require.NotNil(t, none)
	// One attempt, no failure: every admitted request is a success, so the
	// only waste is the shedding.
	assert.EqualValues(t, none.Admitted, int64(none.SuccessRate*float64(none.Ops)+0.5))
	assert.InDelta(t, 0.5*float64(none.Shed), none.WastedWork, 1e-6)
	assert.InDelta(t, 200, float64(none.Ops)/none.DurationS, 1, "offered: twice the capacity of 100 requests/s")
}

// TestRetryModelTiny checks the Brooker 2022 model against its closed forms
// on a small population.
func TestRetryModelTiny(t *testing.T) {
	c := RetryModelConfig{Clients: 10, Rate: 10, Duration: 2 * time.Second, Ps: []float64{0, 0.5, 1}, Seed: 3}
	res := RetryModel(t, c)
	require.Len(t, res, 3*len(retryModelStrategies()))
	for _, r := range res {
		s, l, ok := RetryModelExpected(r.Strategy, r.P)
		if !ok || r.P == 0.5 { // p = 0.5 is random: only the extremes are exact
			continue
		}
		assert.Equal(t, s, r.SuccessRate, "%s p=%g success", r.Strategy, r.P)
		assert.Equal(t, l, r.Amplification, "%s p=%g load", r.Strategy, r.P)
	}
}
