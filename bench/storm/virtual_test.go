package storm

import (
	"errors"
	"net/http"
	"strconv"
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
// attempt completes, so its harm is exactly 0; and a client that refuses
// every tenth operation locally is charged exactly the ones of those that
// none completed.
func TestHarmIsExact(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Capacity = Capacity{}
	cfg.Virtual = true
	cfg.NoOutage, cfg.Ps, cfg.Ops = true, []float64{0.3, 0.7}, 800
	cfg.Scales = []string{ScalePerClient, ScaleShared}
	cfg.Strategies = []string{"none", "naive", "resilient-fulljitter", "anchor-aws", "anchor-finagle"}
	refuser := Strategy{Name: "refuse-every-tenth", Keyed: true, SetsKey: true, NewClient: func(base http.RoundTripper) *http.Client {
		return &http.Client{Transport: refuseEveryTenth{base}}
	}}
	res := runVirtualPlan(t, newPlan(cfg, append(cfg.strategies(), refuser)))
	require.Len(t, res, 2*2*(len(cfg.Strategies)+1))
	for _, r := range res {
		require.NotNil(t, r.Harm, describe(r))
		if r.Strategy != refuser.Name {
			assert.Zero(t, *r.Harm, "%s: failed operations that one attempt completed", describe(r))
			assert.GreaterOrEqual(t, *r.VsNone, 0.0, describe(r))
			assert.False(t, r.Harmful, describe(r))
			continue
		}
		var none *Result
		for i := range res {
			if res[i].Strategy == "none" && res[i].Scale == r.Scale && res[i].P == r.P {
				none = &res[i]
			}
		}
		require.NotNil(t, none, describe(r))
		want := 0
		for i, ok := range none.ok {
			if ok && i%10 == 0 {
				want++
			}
		}
		assert.Equal(t, want, *r.Harm, describe(r))
		assert.Positive(t, want)
		assert.True(t, r.Harmful, describe(r))
	}
}

// refuseEveryTenth fails every tenth operation (by X-Storm-Op) without
// sending it, and sends the others once.
type refuseEveryTenth struct{ base http.RoundTripper }

func (t refuseEveryTenth) RoundTrip(req *http.Request) (*http.Response, error) {
	if n, err := strconv.Atoi(req.Header.Get(OperationHeader)); err == nil && n%10 == 0 {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errors.New("refused locally")
	}
	return t.base.RoundTrip(req)
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
