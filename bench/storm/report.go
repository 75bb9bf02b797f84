package storm

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// WriteMarkdown writes results as one Markdown table, a row per scenario and
// strategy, in the order given.
func WriteMarkdown(w io.Writer, results []Result) error {
	var b strings.Builder
	b.WriteString("| scenario | p | strategy | keyed | ops | server requests | amplification | success | duplicates | p50 ms | p99 ms | recovery s |\n")
	b.WriteString("|---|---:|---|:---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		keyed := "no"
		if r.Keyed {
			keyed = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %d | %.2f | %.1f %% | %d | %.0f | %.0f | %s |\n",
			r.Scenario, strconv.FormatFloat(r.P, 'g', -1, 64), r.Strategy, keyed, r.Ops, r.ServerRequests,
			r.Amplification, 100*r.SuccessRate, r.Duplicates, r.P50Ms, r.P99Ms, recoveryText(r.RecoveryS))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// recoveryText renders Result.RecoveryS for a table.
func recoveryText(r *float64) string {
	switch {
	case r == nil:
		return "–"
	case *r < 0:
		return "not in run"
	}
	return strconv.FormatFloat(*r, 'f', 1, 64)
}

// WriteJSON writes results as a JSON array, one object per scenario and
// strategy, with the fields of Result. The per-bin series are included only
// if series is true.
func WriteJSON(w io.Writer, results []Result, series bool) error {
	out := results
	if !series {
		out = make([]Result, len(results))
		for i, r := range results {
			r.Load, r.Goodput = nil, nil
			out[i] = r
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// Warnings returns a line for each run whose load generator fell behind by
// more than 50 ms: its numbers reflect a busy machine as much as the
// strategy.
func Warnings(results []Result) []string {
	var out []string
	for _, r := range results {
		if r.MaxLagMs > 50 {
			out = append(out, fmt.Sprintf("warning: %s p=%g %s: the load generator fell %.0f ms behind; the machine is too busy for this load",
				r.Scenario, r.P, r.Strategy, r.MaxLagMs))
		}
	}
	return out
}
