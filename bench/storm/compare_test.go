package storm

import (
	"bytes"
	"testing"

	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// okOf builds per-operation outcomes from a string: '1' succeeded.
func okOf(s string) []bool {
	out := make([]bool, len(s))
	for i, c := range s {
		out[i] = c == '1'
	}
	return out
}

// result builds a hand-made Result with per-operation outcomes.
func result(strategy, scale string, p float64, ok string) Result {
	r := Result{Strategy: strategy, Scenario: ScenarioSteady, Scale: scale, P: p, Ops: len(ok), ok: okOf(ok), DurationS: 1}
	n := 0
	for _, o := range r.ok {
		if o {
			n++
		}
	}
	r.SuccessRate = float64(n) / float64(r.Ops)
	r.GoodputPerS = float64(n)
	return r
}

func TestCompareComputesHarmAgainstNone(t *testing.T) {
	const n = "1111111111111111111100000000000000000000" // none: 20 of 40
	tests := []struct {
		name     string
		ok       string
		vsNone   float64
		harm     int
		harmful  bool
		invalid  bool
		noneGone bool
	}{
		{"the same operations", n, 0, 0, false, false, false},
		{"more, and every one none did", "1111111111111111111111111100000000000000", 15, 0, false, false, false},
		// Same success rate, but two of none's operations lost and two
		// others won: counted (Harm), for information; not HARM, whose
		// one meaning here is success below none's.
		{"as many, but not the same", "0011111111111111111111000000000000000000", 0, 2, false, false, false},
		{"one fewer: 2.5 points below", "0111111111111111111100000000000000000000", -2.5, 1, true, false, false},
		// Never HARM on a strategy that succeeded more.
		{"more overall, one of none's lost (2.5 % of ops)", "0111111111111111111111111111111111111111", 47.5, 1, false, false, false},
		{"invalid run: no comparison", n, 0, 0, false, true, false},
		{"no none in the scenario", n, 0, 0, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			none := result("none", ScalePerClient, 0.5, n)
			r := result("x", ScalePerClient, 0.5, tt.ok)
			r.Invalid = tt.invalid
			other := result("none", ScaleShared, 0.5, "0000000000000000000000000000000000000000") // another scale: ignored
			res := []Result{none, r, other}
			if tt.noneGone {
				res = []Result{r, other}
			}
			res = Compare(res)
			got := res[1]
			if tt.noneGone {
				got = res[0]
			}
			if tt.invalid || tt.noneGone {
				assert.Nil(t, got.VsNone)
				assert.Nil(t, got.Harm)
				assert.False(t, got.Harmful)
				return
			}
			require.NotNil(t, got.VsNone)
			require.NotNil(t, got.Harm)
			assert.InDelta(t, tt.vsNone, *got.VsNone, 1e-9)
			assert.Equal(t, tt.harm, *got.Harm)
			assert.Equal(t, tt.harmful, got.Harmful)
			assert.Equal(t, 20.0, got.NoneGoodputPerS)
		})
	}
}

func TestDisturbedRowsAreMarked(t *testing.T) {
	cfg := DefaultConfig()
	tests := []struct {
		name      string
		late      int
		accept    int64
		overran   bool
		disturbed bool
		invalid   bool
	}{
		{"clean", 0, 0, false, false, false},
		{"a few late operations: disturbed, still valid", 5, 0, false, true, false},
		{"late beyond 1 %: invalid", 11, 0, false, true, true},
		{"an accept error: invalid", 0, 1, false, true, true},
		{"overran: invalid", 0, 0, true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := result("none", ScalePerClient, 0, "1111111111")
			r.Ops, r.ok = 1000, make([]bool, 1000)
			r.LateOps, r.AcceptErrors, r.Overran = tt.late, tt.accept, tt.overran
			rp := runParams{cfg: cfg, sc: scenario{name: ScenarioSteady, duration: 4e9}}
			r.summarize(rp, make([]opResult, 1000), statsOf(0), newProbe(rp))
			assert.Equal(t, tt.disturbed, r.Disturbed)
			assert.Equal(t, tt.invalid, r.Invalid)

			var md bytes.Buffer
			require.NoError(t, WriteMarkdown(&md, []Result{r}))
			switch {
			case tt.invalid:
				assert.Contains(t, md.String(), "**invalid** [1]")
				assert.Contains(t, md.String(), "| invalid |", "numbers withheld")
				assert.Contains(t, md.String(), "| – | – | 0 | invalid |", "duplicates shown: they do not depend on timing")
				assert.Contains(t, md.String(), "1. per-client steady p=0 none: ")
			case tt.disturbed:
				assert.Contains(t, md.String(), "disturbed [1]")
				assert.NotContains(t, md.String(), "| invalid |")
			default:
				assert.NotContains(t, md.String(), "Disturbed runs")
			}
		})
	}
}

// statsOf returns fake server counters with n requests.
func statsOf(n int64) fakeserver.Stats { return fakeserver.Stats{Requests: n} }

// TestCompareOverloadFlagsGoodput: under overload which requests are shed
// depends on timing, so swapped operations are not harm; lower goodput is,
// at the precision printed, unless the strategy succeeded more.
func TestCompareOverloadFlagsGoodput(t *testing.T) {
	tests := []struct {
		name    string
		ok      string
		goodput float64
		harmful bool
	}{
		{"swapped operations, same goodput", "0011111111111111111111000000000000000000", 20, false},
		{"same operations, lower goodput (completed later)", "1111111111111111111100000000000000000000", 19, true},
		{"fewer successes", "0111111111111111111100000000000000000000", 19, true},
		// Below by more than 0.5 %, but equal at the 1/s printed: a
		// comparison is made at the precision printed.
		{"lower goodput, equal as printed", "0111111111111111111100000000000000000000", 19.6, false},
		// Never HARM on a strategy that succeeded more.
		{"more successes, lower goodput", "1111111111111111111111111100000000000000", 19, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			none := result("none", ScalePerClient, 0, "1111111111111111111100000000000000000000")
			r := result("x", ScalePerClient, 0, tt.ok)
			none.Scenario, r.Scenario = ScenarioOverload, ScenarioOverload
			none.Factor, r.Factor = 2, 2
			r.GoodputPerS = tt.goodput
			res := Compare([]Result{none, r})
			assert.Equal(t, tt.harmful, res[1].Harmful)
		})
	}
}
