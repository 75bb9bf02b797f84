package storm

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// HeadlineLines is the most lines WriteHeadline prints: the first screen.
const HeadlineLines = 40

// Engine names, as in Summary.Engine and the -engine flag.
const (
	EngineVirtual = "virtual"
	EngineSockets = "sockets"
	EngineTarget  = "target"
)

// headlineStrategies are the strategies of the storm the headline shows, in
// order: no retries, the peers, resilient's defaults. A user's own policies
// (Summary.Own) follow them.
var headlineStrategies = []string{"none", "retryablehttp", "failsafe", "resilient"}

// HeadlineStrategies returns the strategies the headline shows before the
// user's own: none, the peers, resilient's defaults.
func HeadlineStrategies() []string { return slices.Clone(headlineStrategies) }

// headlineTail are the tail strategies the headline shows.
var headlineTail = []string{"none", "resilient", "resilient-hedge-p95"}

// Summary is what one run of the command produced, for the headline and
// the HTML report.
type Summary struct {
	// Engine is EngineVirtual, EngineSockets or EngineTarget.
	Engine string
	// Config is the run's configuration.
	Config Config
	// Results and Tail are the results of the storm and of the tail
	// scenario.
	Results []Result
	Tail    []TailResult
	// Own names the strategies of the user's policy file, shown in the
	// headline after resilient's defaults.
	Own []string
	// Target is the URL of a -target run, empty otherwise; Notes are lines
	// the headline prints after its preamble (what a -target run skipped,
	// that it was interrupted).
	Target string
	Notes  []string
}

// engineText says what the engine runs and what it leaves out, in two
// lines of at most ~115 characters.
func (s Summary) engineText() []string {
	seed := strconv.FormatUint(s.Config.Seed, 10)
	switch s.Engine {
	case EngineVirtual:
		return []string{
			"engine: virtual, seed " + seed + " — simulated time, one event at a time: -seed " + seed + " gives these bytes again. The real",
			"  clients against the fakeserver in-process, without net/http's pool, its re-sends or the network (-engine sockets).",
		}
	case EngineSockets:
		return []string{
			"engine: sockets, seed " + seed + " — real time on loopback sockets, net/http's pool and re-sends included; statistical:",
			"  a rerun differs. On a busy machine operations start late: marked disturbed, or invalid beyond -max-disturbed.",
		}
	}
	return []string{
		"engine: target — real time against " + s.Target + "; server load as the client sent it, and as the",
		"  server counted it where it can tell (the fakeserver's /_fake/ admin API).",
	}
}

// WriteHeadline writes the first screen of a run: what ran (the load, the
// engine and what it leaves out, how many results were disturbed), what
// each column means, then per scenario — as many as fit in HeadlineLines —
// none, the peers, resilient's defaults and the user's own policies
// (success, load, harm, p99) with one sentence saying what they mean.
// Only the first scale is shown; the full tables go to -out.
func WriteHeadline(w io.Writer, s Summary) error {
	var lines []string
	cfg := s.Config
	load := fmt.Sprintf("%d clients × %g ops/s = %g ops/s", cfg.Clients, cfg.Rate, float64(cfg.Clients)*cfg.Rate)
	if s.Engine == EngineTarget {
		load = fmt.Sprintf("%g ops/s from one client", cfg.Rate)
	} else if c := cfg.Capacity; c.MaxConcurrent > 0 {
		load += fmt.Sprintf(" to a server serving ≤ %.0f req/s", c.PerSecond())
	}
	lines = append(lines, "storm: what retries do to a struggling server — "+load)
	lines = append(lines, s.engineText()...)
	lines = append(lines, "success: ops that succeeded · load: server requests ÷ ops · harm: ops none completed and this one failed"+
		" (overload: lost, net) · p99: ms, retries incl.")
	disturbed, invalid := 0, 0
	for _, r := range s.Results {
		disturbed += b2i(r.Disturbed)
		invalid += b2i(r.Invalid)
	}
	for _, r := range s.Tail {
		disturbed += b2i(r.Disturbed)
		invalid += b2i(r.Invalid)
	}
	lines = append(lines, fmt.Sprintf("%d results: %d disturbed, %d invalid. Every table, plot and index.html: -out DIR; JSON: -format json.",
		len(s.Results)+len(s.Tail), disturbed, invalid))
	lines = append(lines, s.Notes...)
	if s.noneLoadAbove1() {
		lines = append(lines, "none's load above 1.00: none sends one request per operation; the rest are requests the server counted that"+
			" no caller sent one by one (net/http's own re-sends on a reused connection; against a -target, late requests of the run before).")
	}

	blocks := s.blocks()
	// A blank line before each block, unless more blocks fit without.
	// Room is kept for the last line.
	preamble := lines
	fit := func(gap int) (out []string, shown int) {
		out = slices.Clone(preamble)
		for _, b := range blocks {
			if len(out)+gap+len(b)+1 > HeadlineLines {
				break
			}
			if gap > 0 {
				out = append(out, "")
			}
			out = append(out, b...)
			shown++
		}
		return out, shown
	}
	lines, shown := fit(1)
	if tight, more := fit(0); more > shown {
		lines, shown = tight, more
	}
	if shown < len(blocks) {
		lines = append(lines, fmt.Sprintf("(%d more scenarios in -out DIR or -format markdown)", len(blocks)-shown))
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

// noneLoadAbove1 reports whether a none row of the first scale prints a
// load above 1.00: a surprise the headline explains.
func (s Summary) noneLoadAbove1() bool {
	for _, r := range s.Results {
		if r.Strategy == "none" && !r.Invalid && r.Scale == s.Results[0].Scale && printed(headlineLoad(r), 2) > 1 {
			return true
		}
	}
	return false
}

// blocks returns one block of lines per scenario of the first scale, in
// the order a reader wants them: the outage, the lowest and highest failure
// rates, the largest overload, the tail, then the rest.
func (s Summary) blocks() [][]string {
	scale := ""
	if len(s.Results) > 0 {
		scale = s.Results[0].Scale
	} else if len(s.Tail) > 0 {
		scale = s.Tail[0].Scale
	}
	type scen struct {
		kind    string
		p, f    float64
		results []Result
	}
	var scens []*scen
	for _, r := range s.Results {
		if r.Scale != scale {
			continue
		}
		i := slices.IndexFunc(scens, func(c *scen) bool { return c.kind == r.Scenario && c.p == r.P && c.f == r.Factor })
		if i < 0 {
			scens = append(scens, &scen{kind: r.Scenario, p: r.P, f: r.Factor})
			i = len(scens) - 1
		}
		scens[i].results = append(scens[i].results, r)
	}
	// Priority: lower first.
	prio := func(c *scen) int {
		var steadyPs, factors []float64
		for _, o := range scens {
			switch o.kind {
			case ScenarioSteady:
				steadyPs = append(steadyPs, o.p)
			case ScenarioOverload:
				factors = append(factors, o.f)
			}
		}
		switch {
		case c.kind == ScenarioOutage || c.kind == ScenarioTarget:
			return 0
		case c.kind == ScenarioSteady && c.p == lowestAbove0(steadyPs):
			return 1
		case c.kind == ScenarioSteady && c.p == slices.Max(steadyPs):
			return 2
		case c.kind == ScenarioOverload && c.f == slices.Max(factors):
			return 3
		}
		return 5
	}
	slices.SortStableFunc(scens, func(a, b *scen) int { return prio(a) - prio(b) })
	var out [][]string
	var tail []string
	if len(s.Tail) > 0 {
		tail = s.tailBlock(scale)
	}
	for _, c := range scens {
		if tail != nil && prio(c) > 3 {
			out = append(out, tail)
			tail = nil
		}
		out = append(out, s.block(c.results))
	}
	if tail != nil {
		out = append(out, tail)
	}
	return out
}

func lowestAbove0(ps []float64) float64 {
	low := math.Inf(1)
	for _, p := range ps {
		if p > 0 && p < low {
			low = p
		}
	}
	return low
}

// shownNames returns the strategies the headline shows, in order.
func (s Summary) shownNames() []string {
	return append(slices.Clone(headlineStrategies), s.Own...)
}

// block renders one scenario: a title line with the columns, a row per
// strategy shown, and its sentence.
func (s Summary) block(results []Result) []string {
	first := results[0]
	title := scenarioTitle(first, s.Config)
	harmHead, harmOf := "harm", harm
	if overloadLost(first) {
		// Which requests an overloaded server sheds moves with every extra
		// request: operation by operation, "harm" would count swaps. The
		// column says how many operations fewer than none's succeeded.
		harmHead, harmOf = "lost", func(r Result) string { return lost(r, results) }
	}
	lines := []string{fmt.Sprintf("%-44s %8s %6s %6s %7s", title, "success", "load", harmHead, "p99 ms")}
	var rows []Result
	for _, name := range s.shownNames() {
		if i := slices.IndexFunc(results, func(r Result) bool { return r.Strategy == name }); i >= 0 {
			rows = append(rows, results[i])
		}
	}
	for _, r := range rows {
		var flags []string
		if r.Harmful {
			flags = append(flags, "HARM")
		}
		if r.Duplicates > 0 {
			flags = append(flags, strconv.Itoa(r.Duplicates)+" duplicate effects")
		}
		if r.Invalid {
			flags = append(flags, "INVALID: "+disturbance(r))
		} else if r.Disturbed {
			flags = append(flags, "disturbed")
		}
		lines = append(lines, strings.TrimRight(fmt.Sprintf("  %-42s %8s %6s %6s %7s  %s", label(r.Strategy),
			pct(r, r.SuccessRate), num(r, headlineLoad(r), 2), harmOf(r), num(r, r.P99Ms, 0), strings.Join(flags, ", ")), " "))
	}
	return append(lines, "  → "+sentence(rows))
}

// headlineLoad is the headline's load: requests the server saw ÷
// operations, during the outage window in the outage scenario.
func headlineLoad(r Result) float64 {
	if r.OutageLoad != nil {
		return *r.OutageLoad
	}
	return r.Amplification
}

// label is a strategy's name with what it is, for the headline.
func label(name string) string {
	switch name {
	case "none":
		return "none (net/http, one attempt)"
	case "retryablehttp":
		return "retryablehttp (its defaults)"
	case "failsafe":
		return "failsafe (failsafe-go's defaults)"
	case "resilient":
		return "resilient (its defaults)"
	case "resilient-hedge-p95":
		return "resilient, hedging at the p95"
	}
	return name
}

func scenarioTitle(r Result, cfg Config) string {
	switch r.Scenario {
	case ScenarioOutage:
		return fmt.Sprintf("outage %v–%v of %v, p=%s", cfg.OutageStart, cfg.OutageEnd, time2(r.DurationS), fmtG(r.P))
	case ScenarioOverload:
		if r.NoLedger { // a -target without the admin API: its capacity is unknown
			return fmt.Sprintf("burst: %s× the offered rate", fmtG(r.Factor))
		}
		return fmt.Sprintf("overload: offered %s× the server's capacity", fmtG(r.Factor))
	case ScenarioTarget:
		return "the target as it is (its own failures)"
	}
	return fmt.Sprintf("steady, %s %% of requests fail", fmtG(math.Round(1000*r.P)/10))
}

func time2(s float64) string { return strconv.FormatFloat(s, 'g', 3, 64) + "s" }

// overloadLost reports whether r's scenario shows lost operations in place
// of harm: an overload scenario against a server that counts its effects.
func overloadLost(r Result) bool { return r.Scenario == ScenarioOverload && !r.NoLedger }

// succeeded is the number of r's operations that succeeded.
func succeeded(r Result) int { return int(math.Round(r.SuccessRate * float64(r.Ops))) }

// lost is how many operations fewer than none's r completed, among
// results of its scenario ("–" without none).
func lost(r Result, results []Result) string {
	i := slices.IndexFunc(results, func(o Result) bool { return o.Strategy == "none" })
	if i < 0 || r.Invalid || results[i].Invalid {
		return "–"
	}
	return strconv.Itoa(max(0, succeeded(results[i])-succeeded(r)))
}

// sentence says in one sentence what rows mean, from numbers it states
// at the precision the rows print them: the success resilient's defaults
// add or lose against none (a tie named a tie) and the load they cost, the
// strategies that succeeded most when one is not resilient, the strategies
// that load the server most (all of them when tied), and which do harm by
// the scenario's one measure (harmful) — success below none's, or in
// overload goodput during the load below none's; when nothing can
// succeed, only the load; a target that mostly fails, the statuses it
// answered.
func sentence(rows []Result) string {
	var none, res *Result
	var valid []Result
	for i := range rows {
		if rows[i].Invalid {
			continue
		}
		valid = append(valid, rows[i])
		switch rows[i].Strategy {
		case "none":
			none = &rows[i]
		case "resilient":
			res = &rows[i]
		}
	}
	if len(valid) == 0 || none == nil {
		return "no valid comparison with none here (see the notes above)."
	}
	succ := func(r Result) float64 { return printed(100*r.SuccessRate, 1) }
	harmText := harmSentence(valid, *none)
	bestNames, best := topBy(valid, succ)
	statuses := ""
	if best < 50 && valid[0].NoLedger {
		statuses = " Answers: " + statusText(valid) + "."
	}
	if best == 0 {
		var loads []string
		for _, r := range valid {
			loads = append(loads, fmt.Sprintf("%s %.2f", r.Strategy, headlineLoad(r)))
		}
		return "nothing succeeded, so only load differs: " + strings.Join(loads, ", ") + "." + statuses
	}
	mostNames, most := topBy(valid, func(r Result) float64 { return printed(headlineLoad(r), 2) })
	mostText := fmt.Sprintf("most load: %s (%.2f)", strings.Join(mostNames, ", "), most)
	if len(mostNames) == len(valid) {
		mostText = fmt.Sprintf("every strategy the same load (%.2f)", most)
	}
	bestText := fmt.Sprintf("best success %s %.1f %%", strings.Join(bestNames, ", "), best)
	if res == nil {
		return bestText + "; " + mostText + "; " + servedLess(valid, *none) + harmText + statuses
	}
	lead := fmt.Sprintf("resilient %s vs none's %s at %.2f× load", pct(*res, res.SuccessRate), pct(*none, none.SuccessRate), headlineLoad(*res))
	if succ(*res) == succ(*none) {
		lead = fmt.Sprintf("resilient ties none at %s, at %.2f× load", pct(*res, res.SuccessRate), headlineLoad(*res))
	}
	if best > succ(*res) {
		lead += "; " + bestText
	}
	return lead + "; " + mostText + "; " + servedLess(valid, *none) + harmText + statuses
}

// topBy returns the names of the rows with the largest value of f, in
// order, and that value: every one of them when tied.
func topBy(rows []Result, f func(Result) float64) ([]string, float64) {
	top := math.Inf(-1)
	for _, r := range rows {
		top = max(top, f(r))
	}
	var names []string
	for _, r := range rows {
		if f(r) == top {
			names = append(names, r.Strategy)
		}
	}
	return names, top
}

// servedLess names, in an overload scenario, the strategies that served
// less than none during the load (goodput, as printed, by more than
// harmShare) but are not flagged HARM, having succeeded more in all: their
// successes came after the load. Empty elsewhere, or when there are none.
func servedLess(valid []Result, none Result) string {
	if valid[0].Scenario != ScenarioOverload || valid[0].NoLedger {
		return ""
	}
	var names, rates []string
	for _, r := range valid {
		if !r.Harmful && r.GoodputPerS < (1-harmShare)*none.GoodputPerS && printed(r.GoodputPerS, 0) < printed(none.GoodputPerS, 0) {
			names = append(names, r.Strategy)
			rates = append(rates, fmt.Sprintf("%.0f/s", r.GoodputPerS))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("%s succeeded more in all but served less during the load (%s against none's %.0f/s); ",
		strings.Join(names, ", "), strings.Join(rates, ", "), none.GoodputPerS)
}

// harmSentence names the strategies flagged HARM with the figure that
// flags each, the scenario's one measure: success below none's, or, in
// overload, goodput during the load below none's.
func harmSentence(valid []Result, none Result) string {
	if valid[0].NoLedger {
		return "harm is not countable here."
	}
	var parts []string
	for _, r := range valid {
		if !r.Harmful {
			continue
		}
		why := fmt.Sprintf("success %s below none's %s", pct(r, r.SuccessRate), pct(none, none.SuccessRate))
		if r.Scenario == ScenarioOverload {
			why = fmt.Sprintf("goodput during the load %.0f/s below none's %.0f/s", r.GoodputPerS, none.GoodputPerS)
		}
		parts = append(parts, r.Strategy+" ("+why+")")
	}
	if len(parts) == 0 {
		return "none of these does harm."
	}
	text := "harm: " + strings.Join(parts, "; ") + "."
	if valid[0].Scenario == ScenarioOverload {
		text += " Successes after the load ended do not count in goodput."
	}
	return text
}

// statusText lists the statuses the rows' operations got, most frequent
// first, as "501 ×600, error ×3".
func statusText(rows []Result) string {
	n := map[string]int{}
	for _, r := range rows {
		for k, v := range r.Statuses {
			n[k] += v
		}
	}
	keys := slices.Sorted(maps.Keys(n))
	slices.SortStableFunc(keys, func(a, b string) int { return n[b] - n[a] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, n[k]))
	}
	if len(parts) == 0 {
		return "none recorded"
	}
	return strings.Join(parts, ", ")
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// tailBlock renders the tail scenario at scale.
func (s Summary) tailBlock(scale string) []string {
	tc := s.Config.Tail.resolved()
	title := fmt.Sprintf("tail: GETs, %g %% of answers %g× slower", 100*tc.SlowRate, tc.SlowFactor)
	if s.Engine == EngineTarget {
		title = "tail: GETs of the target, hedged or not"
	}
	lines := []string{fmt.Sprintf("%-44s %8s %6s %6s %7s", title, "success", "load", "harm", "p99 ms")}
	byName := map[string]TailResult{}
	for _, r := range s.Tail {
		if r.Scale == scale {
			byName[r.Strategy] = r
		}
	}
	var shown []TailResult
	for _, name := range append(slices.Clone(headlineTail), s.Own...) {
		r, ok := byName[name]
		if !ok {
			continue
		}
		shown = append(shown, r)
		if r.Invalid {
			lines = append(lines, fmt.Sprintf("  %-42s %8s", label(name), "invalid"))
			continue
		}
		lines = append(lines, fmt.Sprintf("  %-42s %6.1f %% %6.2f %6s %7.0f", label(name), 100*r.SuccessRate, r.Load, "–", r.P99Ms))
	}
	none, okN := byName["none"]
	hedge, okH := byName["resilient-hedge-p95"]
	res, okR := byName["resilient"]
	switch {
	case okN && okH && okR && !none.Invalid && !hedge.Invalid && !res.Invalid:
		lines = append(lines, "  → "+hedgeSentence(none, res, hedge))
	default:
		var parts []string
		for _, r := range shown {
			if !r.Invalid {
				parts = append(parts, fmt.Sprintf("%s p99 %.0f ms at %.2f×", r.Strategy, r.P99Ms, r.Load))
			}
		}
		lines = append(lines, "  → "+strings.Join(parts, "; ")+".")
	}
	return lines
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// hedgeSentence says what hedging changed against its baseline, resilient
// without hedging, at what cost in requests; none's p99 beside it.
func hedgeSentence(none, res, hedge TailResult) string {
	base, hedged := math.Round(res.P99Ms), math.Round(hedge.P99Ms)
	change := fmt.Sprintf("leaves p99 at %.0f ms", hedged)
	switch {
	case hedged < base:
		change = fmt.Sprintf("cuts p99 from %.0f to %.0f ms", base, hedged)
	case hedged > base:
		change = fmt.Sprintf("raises p99 from %.0f to %.0f ms", base, hedged)
	}
	return fmt.Sprintf("against resilient without hedging, hedging at the p95 %s for %.2f× the requests; none's p99 is %.0f ms.",
		change, hedge.Load, math.Round(none.P99Ms))
}
