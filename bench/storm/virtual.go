package storm

import (
	"context"
	"runtime"
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
// program through testing.Main (as cmd/storm does). Runs are independent
// bubbles, run in parallel subtests (as many at once as -test.parallel,
// GOMAXPROCS by default); the results come in Run's order.
func RunVirtual(t *testing.T, cfg Config) []Result {
	t.Helper()
	cfg.Virtual = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return runVirtualPlan(t, newPlan(cfg, cfg.strategies()))
}

// runVirtualPlan runs every group and strategy of plan in simulated time.
func runVirtualPlan(t *testing.T, plan *plan) []Result {
	t.Helper()
	prog := startProgress(plan.cfg.Progress, plan.totalOps())
	defer prog.stop()
	groups := plan.groups()
	n := len(plan.strategies)
	out := make([]Result, len(groups)*n)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	t.Run("virtual", func(t *testing.T) {
		for gi, g := range groups {
			for si, st := range plan.strategies {
				t.Run(g.String()+"/"+st.Name, func(t *testing.T) {
					prog.setLabel(g.String() + " " + st.Name + " (virtual)")
					synctest.Test(t, func(*testing.T) {
						// The context must belong to the bubble: a goroutine
						// waiting on a channel from outside it would keep
						// the fake clock from moving.
						out[gi*n+si] = runOne(context.Background(), plan.run(g, st, prog))
					})
				})
			}
		}
	})
	return Compare(out)
}
