package storm

import (
	"context"
	"testing"
	"testing/synctest"
)

// RunVirtual is Run in simulated time: each run happens in a
// testing/synctest bubble, against the fake server's in-process transport (no
// socket), so time.Now, timers and sleeps — in the harness, the fake server,
// resilient's Transport, its Budget and Backoff, and the gobreaker breaker
// inside it — follow a fake clock that jumps ahead whenever every goroutine
// of the bubble is blocked. The code under test is the real SDK; only the
// clock and the network are simulated. 100,000 clients over 60 simulated
// seconds take seconds of real time.
//
// synctest needs a *testing.T: call RunVirtual from a test, or from a
// program through testing.Main (as cmd/storm does). Runs are sequential. It
// fails t (and returns what it has) if a run fails.
func RunVirtual(t *testing.T, cfg Config) []Result {
	t.Helper()
	cfg.Virtual = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return runVirtualPlan(t, newPlan(cfg, cfg.strategies()))
}

// runVirtualPlan runs every scenario and strategy of plan in simulated time.
func runVirtualPlan(t *testing.T, plan *plan) []Result {
	t.Helper()
	cfg := plan.cfg
	prog := startProgress(cfg.Progress, plan.totalOps())
	defer prog.stop()
	var out []Result
	for _, sc := range plan.scenarios {
		prog.setLabel(sc.String() + " (virtual)")
		for _, st := range plan.strategies {
			r, ok := runVirtual(t, plan.run(sc, st, prog))
			if !ok {
				return out
			}
			out = append(out, r)
		}
	}
	return out
}

// runVirtual runs one strategy in one scenario in a bubble of its own.
func runVirtual(t *testing.T, rp runParams) (Result, bool) {
	var (
		r   Result
		err error
	)
	synctest.Test(t, func(*testing.T) {
		// The context must belong to the bubble: a goroutine waiting on a
		// channel from outside it would keep the fake clock from moving.
		r, err = runOne(context.Background(), rp)
	})
	if err != nil {
		t.Error(err)
		return r, false
	}
	return r, !t.Failed()
}
