package storm

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// genTable builds a random scenario's results as the storm would give
// them, Compare applied: none and some of the peers, resilient and an own
// policy, with the edges a sentence can get wrong — successes one
// operation apart (tied or not at 0.1 %), loads tied at 0.01, goodputs
// within 0.5 % of none's or equal once rounded to 1/s, nothing succeeding,
// invalid rows, every scenario kind and -target shapes (no ledger, a
// burst). ops is the operations per run.
func genTable(rng *rand.Rand) []Result {
	kinds := []struct {
		scenario string
		noLedger bool
	}{{ScenarioOutage, false}, {ScenarioSteady, false}, {ScenarioOverload, false}, {ScenarioTarget, true}, {ScenarioOverload, true}, {ScenarioSteady, true}}
	k := kinds[rng.IntN(len(kinds))]
	ops := []int{40, 160, 2000, 3000, 20000}[rng.IntN(5)]
	pickLoad := func() float64 {
		return []float64{1, 1.004, 1.006, 1.05, 1.104, 1.106, 1.11, 1.114, 2.146, 2.15, 2.154}[rng.IntN(11)]
	}
	noneK := rng.IntN(ops + 1)
	if rng.IntN(8) == 0 {
		noneK = 0
	}
	noneGood := []float64{9.2, 9.4, 150, 356, 355.6}[rng.IntN(5)]
	names := []string{"none"}
	for _, n := range []string{"retryablehttp", "failsafe", "resilient", "mine"} {
		if rng.IntN(4) != 0 || n == "resilient" && rng.IntN(5) != 0 {
			names = append(names, n)
		}
	}
	var rows []Result
	for i, name := range names {
		succ := noneK
		good := noneGood
		load := 1.0
		if i > 0 {
			d := []int{0, 0, 1, -1, 2, -2, 5, -5, 15, -15, ops / 4, -ops / 4}[rng.IntN(12)]
			if noneK == 0 && rng.IntN(2) == 0 {
				d = 0
			}
			succ = min(ops, max(0, noneK+d))
			good = noneGood * []float64{1, 0.9951, 0.9949, 0.99, 0.95, 1.01, 0.83}[rng.IntN(7)]
			load = pickLoad()
		} else if rng.IntN(4) == 0 {
			load = 1.05 // net/http's own re-sends
		}
		if succ == 0 {
			good = 0
		}
		r := Result{Strategy: name, Scenario: k.scenario, Ops: ops, SuccessRate: float64(succ) / float64(ops),
			Amplification: load, GoodputPerS: good, NoLedger: k.noLedger, Keyed: name != "none",
			Invalid: i > 0 && rng.IntN(25) == 0, ok: make([]bool, ops)}
		shift := 0
		if i > 0 {
			shift = rng.IntN(ops/10 + 1)
		}
		for j := range ops {
			r.ok[j] = (j+shift)%ops < succ
		}
		if k.scenario == ScenarioOutage {
			l := load
			r.OutageLoad = &l
		}
		if k.scenario == ScenarioOverload {
			r.Factor = 2
		}
		rows = append(rows, r)
	}
	return Compare(rows)
}

// propertyProblems checks a scenario's block, as WriteHeadline prints it,
// against its table beyond claimProblems: a comparison holds at the
// precision printed; ties are named as ties (an equal success, every
// strategy of the most load); HARM keeps one meaning per scenario and is
// never on a strategy that succeeded more than none; a strategy that
// succeeded more than resilient is named.
func propertyProblems(rows []Result, block []string) []string {
	s := strings.TrimPrefix(block[len(block)-1], "  → ")
	probs := claimProblems(rows, s)
	var valid []Result
	var none, res *Result
	for i, r := range rows {
		if r.Invalid {
			continue
		}
		valid = append(valid, r)
		switch r.Strategy {
		case "none":
			none = &rows[i]
		case "resilient":
			res = &rows[i]
		}
	}
	if none == nil || len(valid) == 0 {
		return probs
	}
	succ := func(r Result) float64 { return printed(100*r.SuccessRate, 1) }
	// Comparisons at the precision printed.
	for _, m := range regexp.MustCompile(`(\d+)/s below none's (\d+)/s`).FindAllStringSubmatch(s, -1) {
		if a, _ := strconv.Atoi(m[1]); a >= func() int { b, _ := strconv.Atoi(m[2]); return b }() {
			probs = append(probs, "not below at the precision printed: "+m[0])
		}
	}
	for _, m := range regexp.MustCompile(`([\d.]+) % below none's ([\d.]+) %`).FindAllStringSubmatch(s, -1) {
		a, _ := strconv.ParseFloat(m[1], 64)
		b, _ := strconv.ParseFloat(m[2], 64)
		if a >= b {
			probs = append(probs, "not below at the precision printed: "+m[0])
		}
	}
	// Ties: an equal success is a tie; every strategy at the most load.
	if res != nil && succ(*res) == succ(*none) && strings.Contains(s, "resilient ") && strings.Contains(s, " vs none's ") {
		probs = append(probs, "resilient and none print the same success and the sentence does not call it a tie: "+s)
	}
	if m := regexp.MustCompile(`most load: ([\w-]+(?:, [\w-]+)*) \(([\d.]+)\)`).FindStringSubmatch(s); m != nil {
		top := slices.MaxFunc(valid, func(a, b Result) int { return cmpF(headlineLoad(a), headlineLoad(b)) })
		var tied []string
		for _, r := range valid {
			if printed(headlineLoad(r), 2) == printed(headlineLoad(top), 2) {
				tied = append(tied, r.Strategy)
			}
		}
		if named := strings.Split(m[1], ", "); !slices.Equal(named, tied) {
			probs = append(probs, fmt.Sprintf("%s: the strategies at %.2f are %v", m[0], printed(headlineLoad(top), 2), tied))
		}
	}
	// HARM: never on a strategy that succeeded more; one meaning.
	measures := map[string]bool{}
	for _, r := range valid {
		if !r.Harmful {
			continue
		}
		if succ(r) > succ(*none) {
			probs = append(probs, fmt.Sprintf("%s flagged HARM with %.1f %% against none's %.1f %%", r.Strategy, succ(r), succ(*none)))
		}
	}
	if i := strings.Index(s, "harm: "); i >= 0 {
		for _, m := range regexp.MustCompile(`\((success|goodput|failed)`).FindAllStringSubmatch(s[i:], -1) {
			measures[m[1]] = true
		}
	}
	if len(measures) > 1 {
		probs = append(probs, fmt.Sprintf("HARM has %d meanings in one scenario: %s", len(measures), s))
	}
	// The best: the strategies that succeeded more than resilient are
	// named, all of them when tied, with their success.
	best := slices.MaxFunc(valid, func(a, b Result) int { return cmpF(succ(a), succ(b)) })
	var tops []string
	for _, r := range valid {
		if succ(r) == succ(best) {
			tops = append(tops, r.Strategy)
		}
	}
	m := regexp.MustCompile(`best success ([\w-]+(?:, [\w-]+)*) ([\d.]+) %`).FindStringSubmatch(s)
	switch {
	case m != nil && (m[1] != strings.Join(tops, ", ") || m[2] != strconv.FormatFloat(succ(best), 'f', 1, 64)):
		probs = append(probs, fmt.Sprintf("%s: the best are %v at %.1f %%", m[0], tops, succ(best)))
	case m == nil && res != nil && succ(best) > succ(*res):
		probs = append(probs, fmt.Sprintf("%v succeeded more (%.1f %%) than resilient (%.1f %%), unnamed: %s", tops, succ(best), succ(*res), s))
	}
	return probs
}

// TestHeadlineSentencesOverGeneratedTables builds the block of many
// generated tables and checks every sentence against its table; and that
// a none row printing a load above 1.00 is explained in the legend.
func TestHeadlineSentencesOverGeneratedTables(t *testing.T) {
	rng := rand.New(rand.NewPCG(48, 1))
	failed := 0
	for i := range 4000 {
		rows := genTable(rng)
		s := Summary{Engine: EngineVirtual, Config: DefaultConfig(), Results: rows}
		if slices.ContainsFunc(rows, func(r Result) bool { return r.Strategy == "mine" }) {
			s.Own = []string{"mine"} // a -policy strategy
		}
		block := s.block(rows)
		probs := propertyProblems(rows, block)
		var b strings.Builder
		if err := WriteHeadline(&b, s); err != nil {
			t.Fatal(err)
		}
		if rows[0].Strategy == "none" && !rows[0].Invalid && printed(headlineLoad(rows[0]), 2) > 1 &&
			!strings.Contains(b.String(), "none's load above 1.00") {
			probs = append(probs, "none's load "+strconv.FormatFloat(headlineLoad(rows[0]), 'f', 2, 64)+" is not explained")
		}
		if len(probs) > 0 {
			failed++
			if failed <= 8 {
				t.Errorf("table %d:\n%s\n%s", i, strings.Join(block, "\n"), strings.Join(probs, "\n"))
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of 4000 generated tables have a sentence their table contradicts", failed)
	}
}

// The -target note counts each run's operations from its own schedule: a
// burst that sends four times as many is not said to send as many as the
// others.
func TestOpsNoteCountsEveryRun(t *testing.T) {
	same := opsNote([]string{"outage", "steady"}, []int{40, 40})
	if same != "40 operations per run: one operation is 2.5 points; late starts include waits for a -target-concurrency slot." {
		t.Errorf("same counts: %q", same)
	}
	burst := opsNote([]string{"outage", "steady", "steady", "overload"}, []int{40, 40, 40, 160})
	want := "operations per run: 40 (outage, steady: one is 2.5 points), 160 (overload: one is 0.6 points); late starts include waits for a -target-concurrency slot."
	if burst != want {
		t.Errorf("with a burst: %q, want %q", burst, want)
	}
}
