package docs_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// table returns the cells of the rows of the first Markdown table from the
// first line of md that starts with heading (a header row or a heading
// above the table), header and separator rows left out.
func table(t *testing.T, md, heading string) [][]string {
	t.Helper()
	_, after, ok := strings.Cut("\n"+md, "\n"+heading)
	require.True(t, ok, "no %q", heading)
	var rows [][]string
	started := false
	for _, l := range strings.Split(after, "\n")[1:] {
		if !strings.HasPrefix(l, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		if strings.HasPrefix(l, "|---") || strings.HasPrefix(l, "|:--") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(strings.ReplaceAll(cells[i], "**", ""))
		}
		rows = append(rows, cells)
	}
	if !strings.HasPrefix(heading, "|") {
		rows = rows[1:] // the header row; a heading that starts with "|" is one
	}
	require.NotEmpty(t, rows, "the table after %q", heading)
	return rows
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	require.NoError(t, err)
	return string(b)
}

// TestStormDefaultsTable: docs/storm.md's table of resilient's defaults
// shows, for every steady p, the success and load of none and of resilient
// at both scales as bench/results/storm.md (the storm command's output that
// the page names) has them.
func TestStormDefaultsTable(t *testing.T) {
	results := read(t, "bench/results/storm.md")
	type key struct{ p, strategy string }
	scale := map[string]map[key]string{}
	for name, heading := range map[string]string{
		"per client": "#### steady, a Transport per client",
		"shared":     "#### steady, one Transport shared by all clients",
	} {
		scale[name] = map[key]string{}
		for _, r := range table(t, results, heading) {
			scale[name][key{r[0], r[1]}] = r[6] + " / " + r[5] // success / load
		}
	}
	rows := table(t, read(t, "docs/storm.md"), "| scenario | none |")
	checked := 0
	for _, r := range rows {
		p, ok := strings.CutPrefix(r[0], "p = ")
		if !ok {
			continue
		}
		checked++
		assert.Equal(t, scale["per client"][key{p, "none"}], r[1], "p = %s, none", p)
		assert.Equal(t, scale["per client"][key{p, "resilient"}], r[2], "p = %s, resilient per client", p)
		assert.Equal(t, scale["shared"][key{p, "resilient"}], r[3], "p = %s, resilient shared", p)
	}
	assert.Equal(t, 4, checked, "the steady rows of docs/storm.md")
}

// TestTailTable: docs/hedging.md's tail table shows each strategy's load,
// p50, p99, p99.9 and p99 gain at both scales as bench/results/tail/tail.md
// (the command the page names) has them.
func TestTailTable(t *testing.T) {
	results := read(t, "bench/results/tail/tail.md")
	want := map[string]map[string][]string{}
	for name, heading := range map[string]string{
		"per client": "#### tail (GETs; 2 % of requests 20× slower, median 10ms, σ 0.2), a Transport per client",
		"shared":     "#### tail (GETs; 2 % of requests 20× slower, median 10ms, σ 0.2), one Transport shared",
	} {
		want[name] = map[string][]string{}
		for _, r := range table(t, results, heading) {
			gain := strings.TrimSuffix(r[8], "×")
			if gain == "1.0" {
				gain = ""
			}
			want[name][r[0]] = []string{r[3], r[5], r[6], r[7], gain}
		}
	}
	cell := regexp.MustCompile(`^([\d.]+), ([\d.]+) / ([\d.]+) / ([\d.]+)(?:.*?([\d.]+)×)?`)
	name := regexp.MustCompile("^`([^`]+)`")
	rows := table(t, read(t, "docs/hedging.md"), "| strategy | Transport per client")
	require.Len(t, rows, 4)
	for _, r := range rows {
		s := name.FindStringSubmatch(r[0])
		require.NotNil(t, s, r[0])
		for i, sc := range []string{"per client", "shared"} {
			m := cell.FindStringSubmatch(r[1+i])
			require.NotNil(t, m, r[1+i])
			assert.Equal(t, want[sc][s[1]], m[1:], "%s, %s", s[1], sc)
		}
	}
}

// stormResult is one row of a storm.json, the fields the pages quote.
type stormResult struct {
	Strategy       string  `json:"strategy"`
	P              float64 `json:"p"`
	Ops            int     `json:"ops"`
	DurationS      int     `json:"duration_s"`
	ServerRequests int     `json:"server_requests"`
	Amplification  float64 `json:"amplification"` // the pages' "load"
	LoadOutage     float64 `json:"load_outage"`
	SuccessRate    float64 `json:"success_rate"`
	Harm           int     `json:"harm"`
}

// stormJSON reads a storm.json of one scale and scenario as results by
// strategy and p.
func stormJSON(t *testing.T, path string) map[string]map[float64]stormResult {
	t.Helper()
	var rows []stormResult
	require.NoError(t, json.Unmarshal([]byte(read(t, path)), &rows), path)
	m := map[string]map[float64]stormResult{}
	for _, r := range rows {
		if m[r.Strategy] == nil {
			m[r.Strategy] = map[float64]stormResult{}
		}
		_, dup := m[r.Strategy][r.P]
		require.False(t, dup, "%s: %s at p = %g twice", path, r.Strategy, r.P)
		m[r.Strategy][r.P] = r
	}
	return m
}

// span returns the least and the greatest of field over the strategies at
// p that keep keeps.
func span(m map[string]map[float64]stormResult, p float64, field func(stormResult) float64, keep func(string) bool) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for s, byP := range m {
		if r, ok := byP[p]; ok && keep(s) {
			lo, hi = math.Min(lo, field(r)), math.Max(hi, field(r))
		}
	}
	return lo, hi
}

// firstHarm returns the least p at which strategy harms, or -1.
func firstHarm(m map[string]map[float64]stormResult, strategy string) float64 {
	first := -1.0
	for p, r := range m[strategy] {
		if r.Harm > 0 && (first < 0 || p < first) {
			first = p
		}
	}
	return first
}

func num(x float64, decimals int) string { return strconv.FormatFloat(x, 'f', decimals, 64) }

// pct is a success rate as the pages write it: "0 %" when nothing succeeded.
func pct(rate float64, decimals int) string {
	if rate == 0 {
		return "0 %"
	}
	return num(100*rate, decimals) + " %"
}

// thousands writes n with a comma every three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func load(r stormResult) float64       { return r.Amplification }
func loadOutage(r stormResult) float64 { return r.LoadOutage }

// fleetRuns are the committed results of the 100,000-client storm, by
// strategy and p: the pushback command's steady run, its sweep and outage
// (bench/results/virtual-100k-pushback/), and bench/results/virtual-100k/.
type fleetRuns struct {
	steady, sweep, outage, o100k map[string]map[float64]stormResult
}

func readFleetRuns(t *testing.T) fleetRuns {
	t.Helper()
	const dir = "bench/results/virtual-100k-pushback/"
	return fleetRuns{
		steady: stormJSON(t, dir+"storm.json"),
		sweep:  stormJSON(t, dir+"sweep/storm.json"),
		outage: stormJSON(t, dir+"outage/storm.json"),
		o100k:  stormJSON(t, "bench/results/virtual-100k/storm.json"),
	}
}

// TestFleetStormSentences: the sentences of docs/fleets.md, pushback/README.md
// and bench/README.md that quote the 100,000-client storm hold its committed
// results, rounded as each sentence rounds them.
func TestFleetStormSentences(t *testing.T) {
	runs := readFleetRuns(t)
	res, pb, sw := runs.steady["resilient"], runs.steady["resilient-pushback"], runs.sweep["resilient"]
	o := func(s string) stormResult { return runs.o100k[s][0.01] }
	// "Per-client strategies but the retry-only breaker": not none, not the
	// breaker, not the fleet-wide ones. "Retry controls": not naive either.
	other := []string{"none", "anchor-retrybreaker", "resilient-fleet", "resilient-pushback"}
	perClient := func(s string) bool { return !slices.Contains(other, s) }
	control := func(s string) bool { return perClient(s) && !strings.HasPrefix(s, "naive") }
	allLo, allHi := span(runs.steady, 1, load, perClient)
	ctlLo, ctlHi := span(runs.steady, 1, load, control)
	resLo, resHi := span(runs.o100k, 0.01, loadOutage, func(s string) bool {
		return perClient(s) && strings.HasPrefix(s, "resilient-")
	})
	// Who is at either end, as the sentences name them.
	assert.Equal(t, num(ctlLo, 2), num(res[1].Amplification, 2), "the SDK's defaults are the least at p = 1")
	for _, s := range []string{"anchor-finagle", "anchor-grpc", "anchor-aws"} {
		assert.Equal(t, num(ctlHi, 2), num(runs.steady[s][1].Amplification, 2), "%s: the greatest at p = 1", s)
		assert.Equal(t, num(o("anchor-finagle").LoadOutage, 2), num(o(s).LoadOutage, 2), "%s in the outage", s)
	}
	for p, r := range runs.sweep["resilient-pushback"] {
		assert.Zero(t, r.Harm, "pushback never harms: p = %g", p)
	}
	assert.Equal(t, res[0.1].SuccessRate, pb[0.1].SuccessRate, "p = 0.1: the same success with the middleware")
	harmFrom := fmt.Sprint(firstHarm(runs.sweep, "resilient"))
	lost := num(100*(1-pb[0.1].SuccessRate), 1)

	for _, c := range []struct{ path, want string }{
		{"docs/fleets.md", fmt.Sprintf("every per-client strategy but the retry-only breaker puts %s–%s× the load on a server that fails everything (the SDK's defaults %s×), and the defaults alone overload a 1,600 requests/s server from p = %s (%s operations harmed at p = 0.4, %s at p = 0.5)",
			num(allLo, 2), num(allHi, 0), num(res[1].Amplification, 2), harmFrom, thousands(sw[0.4].Harm), thousands(sw[0.5].Harm))},
		{"pushback/README.md", fmt.Sprintf("the per-client retry controls but the retry-only breaker put **%s×** (the SDK's, which stop for a shed answer's `Retry-After`) to **%s×** (Finagle's, gRPC's and AWS's) the load on a server that fails everything, where naive retries put %s×",
			num(ctlLo, 2), num(ctlHi, 2), num(runs.steady["naive"][1].Amplification, 0))},
		{"pushback/README.md", fmt.Sprintf("the %s %% that fail are answers lost after the effect", lost)},
		{"pushback/README.md", fmt.Sprintf("the storm's %s is measured with it", num(pb[1].Amplification, 4))},
		{"pushback/README.md", fmt.Sprintf("at p = 1 the server sees its first attempts and %d retries in %d s, the floor", pb[1].ServerRequests-pb[1].Ops, pb[1].DurationS)},
		{"bench/README.md", fmt.Sprintf("during the outage to %s× (%s to %s for every `resilient-*` row with per-client controls, full jitter alone included; Finagle's, gRPC's and AWS's anchors: %s×)",
			num(o("resilient").LoadOutage, 2), num(resLo, 2), num(resHi, 2), num(o("anchor-finagle").LoadOutage, 2))},
		{"bench/README.md", fmt.Sprintf("It costs success: %s and %d operations that one attempt completed (harm %[2]d)", pct(o("resilient").SuccessRate, 1), o("resilient").Harm)},
		{"bench/README.md", fmt.Sprintf("`resilient-fleet`: %s× here", num(o("resilient-fleet").LoadOutage, 2))},
		{"bench/README.md", fmt.Sprintf("gives a load of **%s at p = 1** (every other per-client strategy but the retry-only breaker: %s to %s) and **%s success at p = 0.1**, the same as without it (the %s %% that fail",
			num(pb[1].Amplification, 4), num(allLo, 2), num(allHi, 2), pct(pb[0.1].SuccessRate, 3), lost)},
		{"bench/README.md", fmt.Sprintf("through the outage above, a load of %s instead of %s and harm %d instead of %d; across p = 0…1, never harm (the defaults alone do harm from p = %s)",
			num(o("resilient-pushback").LoadOutage, 2), num(o("resilient").LoadOutage, 2), o("resilient-pushback").Harm, o("resilient").Harm, harmFrom)},
	} {
		text := strings.Join(strings.Fields(read(t, c.path)), " ")
		assert.True(t, strings.Contains(text, c.want), "%s has not: %s", c.path, c.want)
	}
}

// TestFleetStormTables: the tables of docs/fleets.md, pushback/README.md and
// bench/README.md that quote the 100,000-client storm hold its committed
// results, rounded as each column rounds them.
func TestFleetStormTables(t *testing.T) {
	runs := readFleetRuns(t)
	st, sw := runs.steady, runs.sweep
	ls := func(r stormResult, l, s int) string { return num(r.Amplification, l) + " · " + pct(r.SuccessRate, s) }
	harmed := func(r stormResult) string { return ", " + thousands(r.Harm) + " harmed" }
	inIt := func(s string) string { r := runs.outage[s][0.01]; return num(r.LoadOutage, 2) + " in it" }
	pb1 := st["resilient-pushback"][1]
	rows := func(path, heading string, key func([]string) string) map[string][]string {
		m := map[string][]string{}
		for _, r := range table(t, read(t, path), heading) {
			m[key(r)] = r
		}
		return m
	}
	p := func(r []string) string { return r[0] }
	pStrategy := func(r []string) string { return r[0] + " " + r[1] }

	assert.Equal(t, map[string][]string{
		"0.1": {"0.1", ls(st["none"][0.1], 3, 2), ls(st["resilient"][0.1], 3, 3), ls(st["resilient-pushback"][0.1], 3, 3)},
		"0.5": {"0.5", ls(sw["none"][0.5], 3, 1), ls(sw["resilient"][0.5], 2, 1) + harmed(sw["resilient"][0.5]),
			ls(sw["resilient-pushback"][0.5], 2, 1) + harmed(sw["resilient-pushback"][0.5])},
		"1": {"1", ls(st["none"][1], 3, 0), ls(st["resilient"][1], 3, 0),
			ls(pb1, 3, 0) + fmt.Sprintf(" (%d retries in %d s)", pb1.ServerRequests-pb1.Ops, pb1.DurationS)},
		"10 s outage": {"10 s outage", inIt("none"), inIt("resilient") + harmed(runs.outage["resilient"][0.01]),
			inIt("resilient-pushback") + harmed(runs.outage["resilient-pushback"][0.01])},
	}, rows("docs/fleets.md", "| p | `none` load · success", p), "docs/fleets.md")

	want := map[string][]string{}
	for _, p := range []float64{0.1, 1} {
		for _, s := range []string{"none", "resilient", "resilient-pushback"} {
			want[fmt.Sprint(p)+" "+s] = []string{fmt.Sprint(p), s, num(st[s][p].Amplification, 4), pct(st[s][p].SuccessRate, 2)}
		}
	}
	assert.Equal(t, want, rows("pushback/README.md", "| p | strategy | load | success |", pStrategy), "pushback/README.md")

	// The Ratio table is TestPushbackRatioSweep's log, which is not kept.
	// Its "no middleware" and default (Ratio 0.5) columns are runs of the
	// same configuration as the sweep's resilient and resilient-pushback;
	// the other ratios have no committed source.
	ratio := rows("pushback/README.md", "| p | resilient (no middleware)", p)
	require.Len(t, ratio, 4)
	for ps, r := range ratio {
		p, err := strconv.ParseFloat(ps, 64)
		require.NoError(t, err)
		assert.Equal(t, []string{ls(sw["resilient"][p], 3, 2), ls(sw["resilient-pushback"][p], 3, 2)},
			[]string{r[1], r[4]}, "pushback/README.md's Ratio table, p = %s", ps)
	}

	assert.Equal(t, table(t, read(t, "bench/results/virtual-100k/storm.md"), "#### outage, a Transport per client"),
		table(t, read(t, "bench/README.md"), "### 100,000 clients in virtual time"), "bench/README.md")
}
