//go:build mutants

package sim

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestMutants applies each mutant to a copy of the root package's files
// (go build's -overlay: the working tree is not touched), runs the sweep
// against it in a subprocess from seed 1 until a schedule fails, and fails
// if a mutant survives SIM_SCHEDULES schedules (default 5,000) or does not
// apply:
//
//	cd sim && go test -tags mutants -run 'TestMutants$' -v .
//
// In the subprocess, SIM_MUTANT names the mutant built in, and the test is
// the sweep itself.
func TestMutants(t *testing.T) {
	if name := os.Getenv("SIM_MUTANT"); name != "" {
		mutantSweep(t, name)
		return
	}
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", rootPkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", rootPkg, err)
	}
	root := strings.TrimSpace(string(out))
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			overlay, err := applyMutant(root, m, t.TempDir())
			if err != nil {
				t.Fatalf("mutant %s does not apply: %v", m.name, err)
			}
			cmd := exec.Command("go", "test", "-tags", "mutants", "-count=1", "-v", "-overlay", overlay, "-run", "^TestMutants$", ".")
			cmd.Env = append(os.Environ(), "SIM_MUTANT="+m.name)
			out, err := cmd.CombinedOutput()
			caught := regexp.MustCompile(`mutant \S+ caught after \d+ schedules.*`).Find(out)
			if err != nil || caught == nil {
				t.Fatalf("mutant %s not caught (%v):\n%s", m.name, err, out)
			}
			t.Log(string(caught))
		})
	}
}

// mutantSweep is TestMutants in the subprocess built with mutant name: it
// sweeps from seed 1 until a schedule fails.
func mutantSweep(t *testing.T, name string) {
	n := envInt(t, "SIM_SCHEDULES", defaultSchedules)
	failing, ran := sweep(t, 1, n, true, nil)
	first := uint64(0)
	for seed := range failing {
		if first == 0 || seed < first {
			first = seed
		}
	}
	if first == 0 {
		t.Fatalf("mutant %s not caught in %d schedules", name, ran)
	}
	fmt.Printf("mutant %s caught after %d schedules (seed %d: %s)\n", name, first, first, failing[first][0])
}
