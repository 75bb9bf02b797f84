package storm

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// WriteMarkdown writes results as Markdown: for each scale, a table per kind
// of scenario (steady, outage, overload), a row per scenario and strategy in
// the order given, then a footnote for every disturbed or invalid row. An
// invalid row prints "invalid" instead of its numbers, except its
// duplicates: the ledger's count does not depend on timing.
func WriteMarkdown(w io.Writer, results []Result) error {
	var b strings.Builder
	var notes []string
	note := func(r Result) string {
		if !r.Disturbed {
			return ""
		}
		notes = append(notes, fmt.Sprintf("%s %s %s %s: %s", r.Scale, r.Scenario, scenarioParam(r), r.Strategy, disturbance(r)))
		if r.Invalid {
			return fmt.Sprintf("**invalid** [%d]", len(notes))
		}
		return fmt.Sprintf("disturbed [%d]", len(notes))
	}
	for _, scale := range scalesOf(results) {
		for _, kind := range []string{ScenarioSteady, ScenarioOutage, ScenarioOverload} {
			var rows []Result
			for _, r := range results {
				if r.Scale == scale && r.Scenario == kind {
					rows = append(rows, r)
				}
			}
			if len(rows) == 0 {
				continue
			}
			fmt.Fprintf(&b, "#### %s, %s\n\n", kind, scaleTitle(scale))
			switch kind {
			case ScenarioSteady:
				b.WriteString("| p | strategy | keyed | ops | amplification | load | success | vs none | harm | duplicates | p50 ms | p99 ms | flags |\n")
				b.WriteString("|---:|---|:---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
				for _, r := range rows {
					fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
						fmtG(r.P), r.Strategy, yesNo(r.Keyed), r.Ops, num(r, r.Amplification, 2), numPtr(r, r.WarmLoad, 2),
						pct(r, r.SuccessRate), vsNone(r), harm(r), strconv.Itoa(r.Duplicates), num(r, r.P50Ms, 0), num(r, r.P99Ms, 0),
						flags(r, note(r)))
				}
			case ScenarioOutage:
				b.WriteString("| p | strategy | keyed | ops | amplification | load in outage | success | vs none | harm | duplicates | p99 ms | recovery s | last Retry-After s | recovered in time | flags |\n")
				b.WriteString("|---:|---|:---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|---|\n")
				for _, r := range rows {
					fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
						fmtG(r.P), r.Strategy, yesNo(r.Keyed), r.Ops, num(r, r.Amplification, 2), numPtr(r, r.OutageLoad, 2),
						pct(r, r.SuccessRate), vsNone(r), harm(r), strconv.Itoa(r.Duplicates), num(r, r.P99Ms, 0),
						recoveryText(r), retryAfterText(r), inTime(r), flags(r, note(r)))
				}
			case ScenarioOverload:
				b.WriteString("| offered | strategy | ops | amplification | load | success | vs none | swaps | goodput ops/s | none's goodput | work/s | wasted | shed | p99 ms | flags |\n")
				b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
				for _, r := range rows {
					work, wasted := "invalid", "invalid"
					if !r.Invalid && r.DurationS > 0 {
						work = strconv.FormatFloat(r.Work/r.DurationS, 'f', 0, 64)
						wasted = "0.0 %"
						if r.Work > 0 {
							wasted = strconv.FormatFloat(100*r.WastedWork/r.Work, 'f', 1, 64) + " %"
						}
					}
					fmt.Fprintf(&b, "| %s× | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
						fmtG(r.Factor), r.Strategy, r.Ops, num(r, r.Amplification, 2), numPtr(r, r.WarmLoad, 2),
						pct(r, r.SuccessRate), vsNone(r), harm(r), num(r, r.GoodputPerS, 0),
						strconv.FormatFloat(r.NoneGoodputPerS, 'f', 0, 64), work, wasted, strconv.FormatInt(r.Shed, 10),
						num(r, r.P99Ms, 0), flags(r, note(r)))
				}
			}
			b.WriteString("\n")
		}
	}
	if len(notes) > 0 {
		b.WriteString("Disturbed runs (the machine, not the strategy, shaped part of them; invalid beyond the threshold):\n\n")
		for i, n := range notes {
			fmt.Fprintf(&b, "%d. %s\n", i+1, n)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// scalesOf returns the scales of results in order of appearance.
func scalesOf(results []Result) []string {
	var out []string
	for _, r := range results {
		if !slices.Contains(out, r.Scale) {
			out = append(out, r.Scale)
		}
	}
	return out
}

func scaleTitle(scale string) string {
	if scale == ScaleShared {
		return "one Transport shared by all clients (`-scales shared`)"
	}
	return "a Transport per client (`-scales per-client`)"
}

func scenarioParam(r Result) string {
	if r.Scenario == ScenarioOverload {
		return fmtG(r.Factor) + "×"
	}
	return "p=" + fmtG(r.P)
}

// disturbance says what disturbed r.
func disturbance(r Result) string {
	var parts []string
	if r.LateOps > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d operations (%.1f %%) started more than %v late (at worst %.0f ms)",
			r.LateOps, r.Ops, 100*float64(r.LateOps)/float64(max(r.Ops, 1)), LateThreshold, r.MaxLagMs))
	}
	if r.AcceptErrors > 0 {
		parts = append(parts, fmt.Sprintf("%d accept errors at the server", r.AcceptErrors))
	}
	if r.Overran {
		parts = append(parts, "the run overran its bound and was stopped")
	}
	return strings.Join(parts, "; ")
}

func fmtG(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func num(r Result, v float64, prec int) string {
	if r.Invalid {
		return "invalid"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func numPtr(r Result, v *float64, prec int) string {
	if v == nil {
		return "–"
	}
	return num(r, *v, prec)
}

func pct(r Result, v float64) string {
	if r.Invalid {
		return "invalid"
	}
	return strconv.FormatFloat(100*v, 'f', 1, 64) + " %"
}

func vsNone(r Result) string {
	if r.VsNone == nil {
		return "–"
	}
	return fmt.Sprintf("%+.1f", *r.VsNone)
}

func harm(r Result) string {
	if r.Harm == nil {
		return "–"
	}
	return strconv.Itoa(*r.Harm)
}

func flags(r Result, note string) string {
	var f []string
	if r.Harmful {
		f = append(f, "**HARM**")
	}
	if note != "" {
		f = append(f, note)
	}
	return strings.Join(f, " ")
}

// recoveryText renders Result.RecoveryS for a table.
func recoveryText(r Result) string {
	switch {
	case r.RecoveryS == nil:
		return "–"
	case r.Invalid:
		return "invalid"
	case *r.RecoveryS < 0:
		return "not in run"
	}
	return strconv.FormatFloat(*r.RecoveryS, 'f', 1, 64)
}

func retryAfterText(r Result) string {
	switch {
	case r.LastRetryAfterS == nil:
		return "–"
	case r.Invalid:
		return "invalid"
	case *r.LastRetryAfterS < 0:
		return "none"
	}
	return strconv.FormatFloat(*r.LastRetryAfterS, 'f', 0, 64)
}

func inTime(r Result) string {
	switch {
	case r.RecoveredInTime == nil:
		return "–"
	case r.Invalid:
		return "invalid"
	case *r.RecoveredInTime:
		return "yes"
	}
	return "**no**"
}

// WriteJSON writes results as a JSON array, one object per scale, scenario
// and strategy, with the fields of Result. The per-bin series are included
// only if series is true.
func WriteJSON(w io.Writer, results []Result, series bool) error {
	out := results
	if !series {
		out = make([]Result, len(results))
		for i, r := range results {
			r.Load, r.Goodput, r.LateBins = nil, nil, nil
			out[i] = r
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
