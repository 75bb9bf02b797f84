package storm

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// SeedStat is what one strategy did in one scenario at one scale over
// several seeds (OverSeeds): the mean and the spread of its figures, and
// whether it does harm by a measurement over the seeds, not one run.
type SeedStat struct {
	Strategy string  `json:"strategy"`
	Scenario string  `json:"scenario"`
	Scale    string  `json:"scale"`
	P        float64 `json:"p"`
	Factor   float64 `json:"factor,omitempty"`
	// Seeds is the number of seeds with a valid result of the strategy
	// and of none.
	Seeds int `json:"seeds"`
	// Success, Load and Goodput are means over the seeds, each with its
	// standard deviation (…SD). Success is a fraction, Load the headline's
	// (server requests ÷ operations; in the outage, during it), Goodput in
	// operations per second during the load.
	Success   float64 `json:"success"`
	SuccessSD float64 `json:"success_sd"`
	Load      float64 `json:"load"`
	LoadSD    float64 `json:"load_sd"`
	Goodput   float64 `json:"goodput_per_s"`
	GoodputSD float64 `json:"goodput_sd"`
	// NoneGoodput is none's mean goodput over the same seeds.
	NoneGoodput float64 `json:"none_goodput_per_s"`
	// Diff is the mean of the per-seed differences of success with none's
	// (same seed: same arrivals, same fates), in points; DiffSE the
	// standard error of that mean (the differences' standard deviation ÷
	// √Seeds).
	Diff   float64 `json:"diff_points"`
	DiffSE float64 `json:"diff_se_points"`
	// HarmOps is the mean count of operations none completed and this
	// strategy failed: for information, not the measure of harm.
	HarmOps float64 `json:"harm_ops"`
	// Harmful: success below none's by more than twice DiffSE, or mean
	// goodput below none's by more than harmShare (0.5 %); never when
	// success is above none's by more than twice DiffSE.
	Harmful bool `json:"harmful"`
}

// harmfulOverSeeds is the measure of harm over seeds: the mean paired
// difference of success with none's (points) below zero by more than twice
// its standard error, or the mean goodput below none's by more than
// harmShare; never on a strategy that succeeded more (the difference above
// zero by more than twice its standard error). A difference under 1e-9
// points is none (float noise).
func harmfulOverSeeds(diff, se, goodput, noneGoodput float64) bool {
	if diff > 1e-9 && diff > 2*se {
		return false
	}
	return (diff < -1e-9 && -diff > 2*se) || goodput < (1-harmShare)*noneGoodput
}

// OverSeeds aggregates runs, the results of one configuration run with
// different seeds, into one SeedStat per strategy, scenario and scale (in
// the order of the first run). A seed counts for a strategy when its result
// and none's are valid.
func OverSeeds(runs [][]Result) []SeedStat {
	type key struct {
		strategy, scenario, scale string
		p, factor                 float64
	}
	keyOf := func(r Result) key { return key{r.Strategy, r.Scenario, r.Scale, r.P, r.Factor} }
	var order []key
	seen := map[key]bool{}
	byKey := make([]map[key]Result, len(runs))
	for i, run := range runs {
		byKey[i] = map[key]Result{}
		for _, r := range run {
			k := keyOf(r)
			byKey[i][k] = r
			if !seen[k] {
				seen[k] = true
				order = append(order, k)
			}
		}
	}
	var out []SeedStat
	for _, k := range order {
		nk := k
		nk.strategy = "none"
		var succ, load, good, noneGood, diff, harm []float64
		for i := range runs {
			r, ok := byKey[i][k]
			n, okN := byKey[i][nk]
			if !ok || !okN || r.Invalid || n.Invalid {
				continue
			}
			succ = append(succ, r.SuccessRate)
			load = append(load, headlineLoad(r))
			good = append(good, r.GoodputPerS)
			noneGood = append(noneGood, n.GoodputPerS)
			diff = append(diff, 100*(r.SuccessRate-n.SuccessRate))
			if r.Harm != nil {
				harm = append(harm, float64(*r.Harm))
			}
		}
		if len(succ) == 0 {
			continue
		}
		s := SeedStat{Strategy: k.strategy, Scenario: k.scenario, Scale: k.scale, P: k.p, Factor: k.factor, Seeds: len(succ)}
		s.Success, s.SuccessSD = meanSD(succ)
		s.Load, s.LoadSD = meanSD(load)
		s.Goodput, s.GoodputSD = meanSD(good)
		s.NoneGoodput, _ = meanSD(noneGood)
		var sd float64
		s.Diff, sd = meanSD(diff)
		s.DiffSE = sd / math.Sqrt(float64(len(diff)))
		s.HarmOps, _ = meanSD(harm)
		s.Harmful = k.strategy != "none" && harmfulOverSeeds(s.Diff, s.DiffSE, s.Goodput, s.NoneGoodput)
		out = append(out, s)
	}
	return out
}

// meanSD returns the mean of xs and their sample standard deviation (0
// for fewer than two).
func meanSD(xs []float64) (mean, sd float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// WriteSeedsMarkdown writes stats as one Markdown table per scale and
// scenario kind: mean ± standard deviation of success, load and goodput,
// the paired difference with none ± its standard error, the mean harm
// count (information) and HARM by the measure over seeds.
func WriteSeedsMarkdown(w io.Writer, stats []SeedStat) error {
	var b strings.Builder
	fmt.Fprintf(&b, "HARM: success below none's by more than twice the standard error of the paired per-seed differences, "+
		"or mean goodput below none's by more than %.1f %%; never on a strategy that succeeded more (by more than twice the standard error). harm ops: mean operations none completed and the strategy failed (information).\n\n", 100*harmShare)
	var scales []string
	for _, s := range stats {
		if !slices.Contains(scales, s.Scale) {
			scales = append(scales, s.Scale)
		}
	}
	for _, scale := range scales {
		for _, kind := range []string{ScenarioOutage, ScenarioSteady, ScenarioOverload} {
			var rows []SeedStat
			for _, s := range stats {
				if s.Scale == scale && s.Scenario == kind {
					rows = append(rows, s)
				}
			}
			if len(rows) == 0 {
				continue
			}
			fmt.Fprintf(&b, "#### %s, %s, over seeds\n\n", kind, scaleTitle(scale))
			b.WriteString("| p | × capacity | strategy | seeds | success % | load | goodput /s | vs none, points (± SE) | harm ops | flags |\n")
			b.WriteString("|---:|---:|---|---:|---:|---:|---:|---:|---:|---|\n")
			for _, s := range rows {
				flag := ""
				if s.Harmful {
					flag = "HARM"
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %d | %.1f ± %.1f | %.2f ± %.2f | %.0f ± %.0f | %+.2f ± %.2f | %.1f | %s |\n",
					fmtG(s.P), fmtG(s.Factor), s.Strategy, s.Seeds, 100*s.Success, 100*s.SuccessSD, s.Load, s.LoadSD,
					s.Goodput, s.GoodputSD, s.Diff, s.DiffSE, s.HarmOps, flag)
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ReadResults reads the results of a storm run from r: the command's
// -format json object ({"results": […]}) or storm.json (an array).
func ReadResults(r io.Reader) ([]Result, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var results []Result
	if strings.HasPrefix(strings.TrimSpace(string(raw)), "[") {
		err = json.Unmarshal(raw, &results)
	} else {
		var obj struct {
			Results []Result `json:"results"`
		}
		err = json.Unmarshal(raw, &obj)
		results = obj.Results
	}
	if err != nil {
		return nil, fmt.Errorf("storm: reading results: %w", err)
	}
	return results, nil
}
