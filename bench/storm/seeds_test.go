package storm

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// OverSeeds pairs each seed's result with none's of the same seed: harm is
// success below none's by more than twice the standard error of the
// per-seed differences, or mean goodput below none's by more than 0.5 %.
func TestOverSeedsMeasuresHarm(t *testing.T) {
	seed := func(none, a, b float64, goodA float64) []Result {
		return []Result{
			{Strategy: "none", Scenario: ScenarioSteady, Scale: ScalePerClient, P: 0.5, Ops: 1000, SuccessRate: none, Amplification: 1, GoodputPerS: 100},
			{Strategy: "a", Scenario: ScenarioSteady, Scale: ScalePerClient, P: 0.5, Ops: 1000, SuccessRate: a, Amplification: 1.5, GoodputPerS: goodA},
			{Strategy: "b", Scenario: ScenarioSteady, Scale: ScalePerClient, P: 0.5, Ops: 1000, SuccessRate: b, Amplification: 1.2, GoodputPerS: 100},
		}
	}
	tests := []struct {
		name  string
		runs  [][]Result
		harmA bool
		harmB bool
	}{
		// a: 0.1 points below none in every seed (SE 0): harm; b: noise
		// around none (differences -1, +1, -1, +1, 0): no harm.
		{"consistent small loss, noise", [][]Result{
			seed(0.500, 0.499, 0.490, 100), seed(0.600, 0.599, 0.610, 100), seed(0.550, 0.549, 0.540, 100),
			seed(0.520, 0.519, 0.530, 100), seed(0.530, 0.529, 0.530, 100)}, true, false},
		{"same success, less goodput", [][]Result{
			seed(0.5, 0.5, 0.5, 99.4), seed(0.5, 0.5, 0.5, 99.4), seed(0.5, 0.5, 0.5, 99.4), seed(0.5, 0.5, 0.5, 99.4), seed(0.5, 0.5, 0.5, 99.4)}, true, false},
		{"more success, less goodput: never harm", [][]Result{
			seed(0.5, 0.7, 0.5, 90), seed(0.5, 0.7, 0.5, 90), seed(0.5, 0.71, 0.5, 90), seed(0.5, 0.7, 0.5, 90), seed(0.5, 0.7, 0.5, 90)}, false, false},
		{"goodput within 0.5 %", [][]Result{
			seed(0.5, 0.5, 0.5, 99.6), seed(0.5, 0.5, 0.5, 99.6), seed(0.5, 0.5, 0.5, 99.6), seed(0.5, 0.5, 0.5, 99.6), seed(0.5, 0.5, 0.5, 99.6)}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := OverSeeds(tt.runs)
			require.Len(t, st, 3)
			assert.Equal(t, "none", st[0].Strategy)
			assert.False(t, st[0].Harmful)
			assert.Equal(t, 5, st[1].Seeds)
			assert.Equal(t, tt.harmA, st[1].Harmful, "a: %+v", st[1])
			assert.Equal(t, tt.harmB, st[2].Harmful, "b: %+v", st[2])
		})
	}
	st := OverSeeds(tests[0].runs)
	assert.InDelta(t, -0.1, st[1].Diff, 1e-9)
	assert.InDelta(t, 0, st[1].DiffSE, 1e-9)
	assert.InDelta(t, 0, st[2].Diff, 1e-9)
	assert.InDelta(t, 1/math.Sqrt(5), st[2].DiffSE, 1e-9) // differences -1, 1, -1, 1, 0 points: SD 1
	var b bytes.Buffer
	require.NoError(t, WriteSeedsMarkdown(&b, st))
	assert.Contains(t, b.String(), "| 0.5 | 0 | a | 5 | 53.9 ± 3.8 | 1.50 ± 0.00 | 100 ± 0 | -0.10 ± 0.00 | 0.0 | HARM |")
}

// An invalid seed of a strategy or of none leaves that seed out.
func TestOverSeedsLeavesInvalidSeedsOut(t *testing.T) {
	r := func(s string, succ float64, invalid bool) Result {
		return Result{Strategy: s, Scenario: ScenarioSteady, Scale: ScaleShared, SuccessRate: succ, Amplification: 1, Invalid: invalid}
	}
	st := OverSeeds([][]Result{{r("none", 0.5, false), r("x", 0.6, false)}, {r("none", 0.5, true), r("x", 0.1, false)}})
	require.Len(t, st, 2)
	assert.Equal(t, 1, st[1].Seeds)
	assert.InDelta(t, 0.6, st[1].Success, 1e-9)
}
