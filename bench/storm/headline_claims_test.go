package storm

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// claimProblems checks every claim of a scenario's sentence against the
// rows it sums up, and returns what does not hold: a figure that is not
// the table's, a strategy said to do harm without the figure that shows it
// (or not flagged HARM), a HARM row left out, a target that mostly failed
// without its statuses.
func claimProblems(rows []Result, s string) []string {
	var probs []string
	by := map[string]Result{}
	for _, r := range rows {
		by[r.Strategy] = r
	}
	none := by["none"]
	p1 := func(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) }
	if m := regexp.MustCompile(`resilient ([\d.]+) % vs none's ([\d.]+) % at ([\d.]+)× load`).FindStringSubmatch(s); m != nil {
		res := by["resilient"]
		if m[1] != p1(res.SuccessRate) || m[2] != p1(none.SuccessRate) || m[3] != fmt.Sprintf("%.2f", headlineLoad(res)) {
			probs = append(probs, "resilient against none: "+m[0]+" is not the table's")
		}
	}
	if m := regexp.MustCompile(`most load: ([\w-]+) \(([\d.]+)\)`).FindStringSubmatch(s); m != nil {
		for _, r := range rows {
			if !r.Invalid && headlineLoad(r) > headlineLoad(by[m[1]]) {
				probs = append(probs, m[0]+": "+r.Strategy+" loads more")
			}
		}
		if m[2] != fmt.Sprintf("%.2f", headlineLoad(by[m[1]])) {
			probs = append(probs, m[0]+": not the table's load")
		}
	}
	named := map[string]bool{}
	if m := regexp.MustCompile(`([\w-]+(?:, [\w-]+)*) did harm`).FindStringSubmatch(s); m != nil {
		probs = append(probs, m[0]+": no figure says by how much")
		for _, n := range strings.Split(m[1], ", ") {
			named[n] = true
		}
	}
	if i := strings.Index(s, "harm: "); i >= 0 {
		for _, m := range regexp.MustCompile(`([\w-]+) \(([^)]*)\)`).FindAllStringSubmatch(s[i:], -1) {
			r, ok := by[m[1]]
			named[m[1]] = true
			if !ok || !r.Harmful {
				probs = append(probs, m[1]+" said to do harm, not flagged HARM")
			}
			for _, why := range strings.Split(m[2], ", ") {
				if g := regexp.MustCompile(`goodput during the load (\d+)/s below none's (\d+)/s`).FindStringSubmatch(why); g != nil {
					a, b := fmt.Sprintf("%.0f", r.GoodputPerS), fmt.Sprintf("%.0f", none.GoodputPerS)
					if g[1] != a || g[2] != b || !(r.GoodputPerS < none.GoodputPerS) {
						probs = append(probs, m[1]+": "+why+" is not the table's ("+a+" and "+b+")")
					}
				} else if g := regexp.MustCompile(`success ([\d.]+) % below none's ([\d.]+) %`).FindStringSubmatch(why); g != nil {
					if g[1] != p1(r.SuccessRate) || g[2] != p1(none.SuccessRate) || !(r.SuccessRate < none.SuccessRate) {
						probs = append(probs, m[1]+": "+why+" is not the table's")
					}
				} else if g := regexp.MustCompile(`failed (\d+) operations none completed`).FindStringSubmatch(why); g != nil {
					if r.Harm == nil || g[1] != strconv.Itoa(*r.Harm) {
						probs = append(probs, m[1]+": "+why+" is not the table's")
					}
				} else {
					probs = append(probs, m[1]+": a harm without a figure: "+why)
				}
			}
		}
	}
	for _, r := range rows {
		if r.Harmful && !named[r.Strategy] {
			probs = append(probs, r.Strategy+" is flagged HARM and the sentence does not say so")
		}
	}
	if strings.Contains(s, "none of these does harm") && len(named) > 0 {
		probs = append(probs, "says no harm and names harm")
	}
	best := 0.0
	for _, r := range rows {
		best = max(best, r.SuccessRate)
	}
	if len(rows) > 0 && rows[0].NoLedger && best < 0.5 {
		for _, r := range rows {
			for st, n := range r.Statuses {
				if !strings.Contains(s, fmt.Sprintf("%s ×", st)) {
					probs = append(probs, fmt.Sprintf("mostly failed, and no word of status %s (%d operations)", st, n))
				}
			}
		}
	}
	return probs
}

// hedgeProblems checks the tail sentence's claim about hedging against
// its baseline, resilient without hedging.
func hedgeProblems(res, hedge TailResult, s string) []string {
	m := regexp.MustCompile(`(takes|cuts|raises) p99 from (\d+) to (\d+) ms`).FindStringSubmatch(s)
	if m == nil {
		if strings.Contains(s, fmt.Sprintf("leaves p99 at %.0f ms", hedge.P99Ms)) && fmt.Sprintf("%.0f", res.P99Ms) == fmt.Sprintf("%.0f", hedge.P99Ms) {
			return nil
		}
		return []string{"no claim about hedging against its baseline: " + s}
	}
	var probs []string
	if m[2] != fmt.Sprintf("%.0f", res.P99Ms) {
		probs = append(probs, m[0]+": the baseline is not resilient without hedging ("+fmt.Sprintf("%.0f", res.P99Ms)+" ms)")
	}
	if m[3] != fmt.Sprintf("%.0f", hedge.P99Ms) {
		probs = append(probs, m[0]+": not hedging's p99")
	}
	if (m[1] != "raises") != (hedge.P99Ms < res.P99Ms) {
		probs = append(probs, m[0]+": hedging's p99 "+fmt.Sprintf("%.0f", hedge.P99Ms)+" ms against "+fmt.Sprintf("%.0f", res.P99Ms)+" ms without")
	}
	return probs
}

func row(strategy, scenario string, success, load float64, harmN int, harmful bool) Result {
	h := harmN
	vs := 0.0
	return Result{Strategy: strategy, Scenario: scenario, Ops: 3000, SuccessRate: success, Amplification: load,
		Harm: &h, VsNone: &vs, Harmful: harmful}
}

// The tables the issue quotes, and the sentences the headline printed
// beside them, which its checks must catch; then the sentences the
// headline prints now, which must pass them.
func TestHeadlineSentencesMatchTheirTables(t *testing.T) {
	overload := []Result{
		row("none", ScenarioOverload, 0.462, 1.00, 0, false),
		row("retryablehttp", ScenarioOverload, 0.708, 2.20, 203, true),
		row("failsafe", ScenarioOverload, 0.709, 2.17, 196, true),
		row("resilient", ScenarioOverload, 0.458, 1.03, 420, true),
	}
	for i, g := range []float64{355, 296, 297, 352} {
		overload[i].GoodputPerS = g
		*overload[i].VsNone = 100 * (overload[i].SuccessRate - overload[0].SuccessRate)
	}
	steady := []Result{
		row("none", ScenarioSteady, 0.495, 1, 0, false),
		row("retryablehttp", ScenarioSteady, 0.90, 2.1, 0, false),
		row("failsafe", ScenarioSteady, 0.85, 2.5, 0, false),
		row("resilient", ScenarioSteady, 0.40, 1.2, 310, true),
	}
	*steady[3].VsNone = -9.5
	target := []Result{
		row("none", ScenarioTarget, 0, 1, 0, false),
		row("retryablehttp", ScenarioTarget, 0, 1, 0, false),
		row("resilient", ScenarioTarget, 0, 1, 0, false),
	}
	for i := range target {
		target[i].NoLedger, target[i].Harm, target[i].VsNone = true, nil, nil
		target[i].Statuses = map[string]int{"501": 200}
	}
	for _, tc := range []struct {
		name  string
		rows  []Result
		today string
	}{
		{"overload", overload, "resilient 45.8 % vs none's 46.2 % at 1.03× load; most load: retryablehttp (2.20); " +
			"retryablehttp, failsafe, resilient did harm: less goodput than none during the load (here harm counts swaps)."},
		{"steady", steady, "resilient 40.0 % vs none's 49.5 % at 1.20× load; most load: failsafe (2.50); resilient did harm."},
		{"target answering 501", target, "nothing can succeed, so only load differs: none 1.00, retryablehttp 1.00, resilient 1.00."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.NotEmpty(t, claimProblems(tc.rows, tc.today), "today's sentence passes the checks: %s", tc.today)
			now := sentence(tc.rows)
			assert.Empty(t, claimProblems(tc.rows, now), now)
		})
	}

	// The plain HTTP server of the issue: none's cold start gave it a
	// p99 of 41 ms; hedging made resilient's 5 ms into 6.
	none := TailResult{Strategy: "none", P99Ms: 41, Load: 1}
	res := TailResult{Strategy: "resilient", P99Ms: 5, Load: 1}
	hedge := TailResult{Strategy: "resilient-hedge-p95", P99Ms: 6, Load: 1.03}
	today := "hedging at the p95 takes p99 from 41 to 6 ms for 1.03× the requests; without hedging resilient's p99 is 5 ms."
	assert.NotEmpty(t, hedgeProblems(res, hedge, today), today)
	for _, h := range []float64{6, 5, 3} {
		hedge.P99Ms = h
		s := hedgeSentence(none, res, hedge)
		assert.Empty(t, hedgeProblems(res, hedge, s), s)
	}
}

// TestOverloadShowsLostNotSwaps checks the overload block: its column is
// the operations a strategy completed fewer than none, not the swaps of
// which requests the server shed.
func TestOverloadShowsLostNotSwaps(t *testing.T) {
	rows := []Result{row("none", ScenarioOverload, 0.5, 1, 0, false), row("resilient", ScenarioOverload, 0.49, 1.03, 400, false),
		row("retryablehttp", ScenarioOverload, 0.7, 2.2, 300, false)}
	lines := Summary{Config: DefaultConfig()}.block(rows)
	assert.Contains(t, lines[0], "lost")
	assert.NotContains(t, lines[0], "harm")
	assert.Regexp(t, `resilient \(its defaults\)\s+49\.0 %\s+1\.03\s+30\s`, strings.Join(lines, "\n"))
	assert.Regexp(t, `retryablehttp \(its defaults\)\s+70\.0 %\s+2\.20\s+0\s`, strings.Join(lines, "\n"))
}
