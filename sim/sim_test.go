package sim

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// envInt reads a positive integer from the environment, def if unset.
func envInt(t testing.TB, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, s)
	}
	return n
}

// defaultSchedules is the count the test command runs: ≥ 1,000 under
// -race in 15 to 35 s on this 2-core VM (see README.md).
const defaultSchedules = 5000

// runPlan runs p once in a bubble of its own and returns the invariants
// it broke (or why it could not run).
func runPlan(t *testing.T, p *Plan, dir string) ([]string, *Result) {
	defer func() {
		// A goroutine left blocked in the bubble (synctest's deadlock
		// panic), or a panic in the code under test: name the schedule.
		if r := recover(); r != nil {
			panic(fmt.Sprintf("schedule %d: %v\nplan: %s\nreplay: %s", p.Seed, r, p.JSON(), replayCommand(p.Seed)))
		}
	}()
	var (
		res *Result
		err error
	)
	synctest.Test(t, func(*testing.T) { res, err = Run(p, dir) })
	if err != nil {
		return []string{"run: " + err.Error()}, nil
	}
	return Check(res), res
}

// replayCommand is the one-line command that replays seed.
func replayCommand(seed uint64) string {
	return fmt.Sprintf("cd sim && GOMAXPROCS=1 SIM_SEED=%d go test -run 'TestReplay$' -v .", seed)
}

// sweep runs the schedules of seeds first..first+n-1 on GOMAXPROCS
// workers until one fails (if stopAtFirst) and returns the failures by
// seed, and how many schedules ran.
func sweep(t *testing.T, first uint64, n int, stopAtFirst bool, cov *Coverage) (map[uint64][]string, int64) {
	var (
		next    atomic.Int64
		ran     atomic.Int64
		stop    atomic.Bool
		mu      sync.Mutex
		failing = map[uint64][]string{}
	)
	workers := runtime.GOMAXPROCS(0)
	t.Run("sweep", func(t *testing.T) {
		for w := range workers {
			t.Run(strconv.Itoa(w), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				for !stop.Load() {
					i := next.Add(1) - 1
					if i >= int64(n) {
						return
					}
					seed := first + uint64(i)
					bad, res := runPlan(t, NewPlan(seed), dir)
					ran.Add(1)
					if cov != nil && res != nil {
						cov.Add(res)
					}
					if len(bad) > 0 {
						mu.Lock()
						failing[seed] = bad
						mu.Unlock()
						if stopAtFirst || len(failing) >= 5 {
							stop.Store(true)
						}
					}
				}
			})
		}
	})
	return failing, ran.Load()
}

// TestSimulate runs SIM_SCHEDULES schedules (default 1,000) from seed
// SIM_FIRST (default 1) and checks every invariant after each. A failing
// schedule is reported with its seed, the command that replays it, and its
// plan shrunk to the fewest faults that still fail.
func TestSimulate(t *testing.T) {
	n := envInt(t, "SIM_SCHEDULES", defaultSchedules)
	first := uint64(envInt(t, "SIM_FIRST", 1))
	start := time.Now()
	var cov Coverage
	failing, ran := sweep(t, first, n, false, &cov)
	el := time.Since(start)
	t.Logf("%d schedules in %v: %.0f schedules/s (GOMAXPROCS=%d)", ran, el.Round(time.Millisecond), float64(ran)/el.Seconds(), runtime.GOMAXPROCS(0))
	if testing.Verbose() {
		t.Logf("coverage:\n%s", cov.String())
	}
	for seed, bad := range failing {
		report(t, seed, bad)
	}
}

// report fails t with a failing seed's violations, its replay command and
// its shrunk plan.
func report(t *testing.T, seed uint64, bad []string) {
	t.Errorf("schedule %d fails:\n  %s\nreplay: %s", seed, strings.Join(bad, "\n  "), replayCommand(seed))
	if os.Getenv("SIM_NOSHRINK") != "" {
		return
	}
	dir := t.TempDir()
	small := Shrink(NewPlan(seed), func(p *Plan) bool {
		for range 3 {
			if bad, _ := runPlan(t, p, dir); len(bad) > 0 {
				return true
			}
		}
		return false
	})
	bad, res := runPlan(t, small, dir)
	desc := ""
	if res != nil {
		desc = Describe(res)
	}
	t.Errorf("schedule %d shrunk to:\n  %s\n%s  %s\nreplay: cd sim && GOMAXPROCS=1 SIM_PLAN='%s' go test -run 'TestReplay$' -v .",
		seed, small.JSON(), desc, strings.Join(bad, "\n  "), small.JSON())
}

// TestReplay replays one schedule several times (SIM_RUNS, default 5),
// the seed SIM_SEED or the plan SIM_PLAN (JSON, as a failure prints it),
// and reports how many runs reproduce a failure; run it with GOMAXPROCS=1.
// Without either it replays seed 1, which must pass every run.
func TestReplay(t *testing.T) {
	p := NewPlan(1)
	want := false
	switch {
	case os.Getenv("SIM_PLAN") != "":
		var err error
		if p, err = ParsePlan(os.Getenv("SIM_PLAN")); err != nil {
			t.Fatal(err)
		}
		want = true
	case os.Getenv("SIM_SEED") != "":
		p = NewPlan(uint64(envInt(t, "SIM_SEED", 0)))
		want = true
	}
	runs := envInt(t, "SIM_RUNS", 5)
	t.Logf("plan: %s", p.JSON())
	failed := 0
	dir := t.TempDir()
	for i := range runs {
		bad, res := runPlan(t, p, dir)
		if len(bad) > 0 {
			failed++
			t.Logf("run %d: %d violation(s):\n  %s\n%s", i+1, len(bad), strings.Join(bad, "\n  "), Describe(res))
		} else if testing.Verbose() && res != nil {
			t.Logf("run %d: ok\n%s", i+1, Describe(res))
		}
	}
	t.Logf("%d of %d runs reproduce a failure (GOMAXPROCS=%d)", failed, runs, runtime.GOMAXPROCS(0))
	if !want && failed > 0 {
		t.Errorf("seed 1 must pass")
	}
	if want && failed > 0 {
		t.Errorf("the schedule fails in %d of %d runs", failed, runs)
	}
}

// TestPlanIsAFunctionOfTheSeed: the same seed gives the same plan, and a
// plan survives its JSON.
func TestPlanIsAFunctionOfTheSeed(t *testing.T) {
	for seed := range uint64(200) {
		a, b := NewPlan(seed), NewPlan(seed)
		if a.JSON() != b.JSON() {
			t.Fatalf("seed %d: two plans differ:\n%s\n%s", seed, a.JSON(), b.JSON())
		}
		c, err := ParsePlan(a.JSON())
		if err != nil || c.JSON() != a.JSON() {
			t.Fatalf("seed %d: plan does not survive JSON: %v", seed, err)
		}
	}
	if NewPlan(1).JSON() == NewPlan(2).JSON() {
		t.Fatal("seeds 1 and 2 give the same plan")
	}
}
