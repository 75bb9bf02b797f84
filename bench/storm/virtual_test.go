package storm

import (
	"testing"
	"time"
)

// TestVirtualTiny runs the same tiny storm in simulated time. Without
// sockets there is no net/http re-send and no scheduling noise, so the
// bounds are exact.
func TestVirtualTiny(t *testing.T) {
	cfg := tinyConfig()
	start := time.Now()
	res := RunVirtual(t, cfg)
	checkStorm(t, cfg, res, 4)
	for _, r := range res {
		if r.Strategy == "none" && r.Amplification != 1 {
			t.Errorf("%s: amplification %v, want exactly 1 in process", describe(r), r.Amplification)
		}
		if r.MaxLagMs > 1 {
			t.Errorf("%s: the load generator lagged %v ms in simulated time", describe(r), r.MaxLagMs)
		}
	}
	// 4.5 simulated seconds of load per strategy, plus drains: far less in
	// real time.
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("virtual run took %v of real time", took)
	}
}

// TestVirtualDefaults checks, at the default load in simulated time, the
// figures bench/README.md reports from the real-socket run: at p = 1
// resilient's defaults amplify at most 1.3 times and naive retries at least
// 3.5 times; at p = 0.1 resilient's defaults succeed 99 % of the time.
func TestVirtualDefaults(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NoOutage, cfg.Ps, cfg.Strategies = true, []float64{0.1, 1}, []string{"naive", "resilient"}
	res := RunVirtual(t, cfg)
	checks := []struct {
		p        float64
		strategy string
		ok       func(Result) bool
		want     string
	}{
		{1, "resilient", func(r Result) bool { return r.Amplification <= 1.3 }, "amplification ≤ 1.3"},
		{1, "naive", func(r Result) bool { return r.Amplification >= 3.5 }, "amplification ≥ 3.5"},
		{0.1, "resilient", func(r Result) bool { return r.SuccessRate >= 0.99 }, "success ≥ 99 %"},
	}
	for _, c := range checks {
		if r := find(res, ScenarioSteady, c.p, c.strategy); r == nil || !c.ok(*r) {
			t.Errorf("%s at p=%g: want %s, got %+v", c.strategy, c.p, c.want, r)
		}
	}
}

// TestRetryModelTiny checks the Brooker 2022 model against its closed forms
// on a small population.
func TestRetryModelTiny(t *testing.T) {
	c := RetryModelConfig{Clients: 10, Rate: 10, Duration: 2 * time.Second, Ps: []float64{0, 0.5, 1}, Seed: 3}
	res := RetryModel(t, c)
	if len(res) != 3*len(retryModelStrategies()) {
		t.Fatalf("%d results", len(res))
	}
	for _, r := range res {
		s, l, ok := RetryModelExpected(r.Strategy, r.P)
		if !ok || r.P == 0.5 { // p = 0.5 is random: only the extremes are exact
			continue
		}
		if r.SuccessRate != s || r.Amplification != l {
			t.Errorf("%s p=%g: success %.3f load %.3f, want %.3f and %.3f", r.Strategy, r.P, r.SuccessRate, r.Amplification, s, l)
		}
	}
}
