//go:build simbugs

package sim

import (
	"os"
	"testing"
)

// bugs are the known bugs that -tags simbugs can inject into the root
// package (see simbugs_on.go there), one at a time.
var bugs = []string{"newkey", "redirectdone", "unsaferesend", "nofinish", "sleeppast"}

// TestMutants runs the simulator once per known bug, injected through
// RESILIENT_SIMBUG, and fails if any bug survives the test command's
// schedule count (SIM_SCHEDULES, default 1,000):
//
//	cd sim && go test -tags simbugs -run TestMutants -v .
func TestMutants(t *testing.T) {
	n := envInt(t, "SIM_SCHEDULES", defaultSchedules)
	for _, bug := range bugs {
		os.Setenv("RESILIENT_SIMBUG", bug)
		failing, ran := sweep(t, 1, n, true, nil)
		first := uint64(0)
		for seed := range failing {
			if first == 0 || seed < first {
				first = seed
			}
		}
		if first == 0 {
			t.Errorf("bug %s not caught in %d schedules", bug, ran)
			continue
		}
		t.Logf("bug %s caught after %d schedules (seed %d: %s)", bug, first, first, failing[first][0])
	}
	os.Unsetenv("RESILIENT_SIMBUG")
}
