package docs_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seedStat is a row of `storm -seeds-from … -format json`.
type seedStat struct {
	Strategy string  `json:"strategy"`
	Scenario string  `json:"scenario"`
	Scale    string  `json:"scale"`
	P        float64 `json:"p"`
	Factor   float64 `json:"factor"`
	Success  float64 `json:"success"`
	Load     float64 `json:"load"`
	Goodput  float64 `json:"goodput_per_s"`
	Diff     float64 `json:"diff_points"`
	DiffSE   float64 `json:"diff_se_points"`
	Harmful  bool    `json:"harmful"`
}

// TestSeedsTable: every cell of docs/storm.md's table "Harm over five
// seeds" is the row of bench/results/seeds/ (before-RUN.json, now-RUN.json)
// that its run, scenario, scale and strategy name, as the table prints it,
// HARM included; "–" where that file has no such row.
func TestSeedsTable(t *testing.T) {
	rows := table(t, read(t, "docs/storm.md"), "| run | scenario | scale | strategy |")
	require.GreaterOrEqual(t, len(rows), 10)
	files := map[string][]seedStat{}
	stats := func(name string) []seedStat {
		if s, ok := files[name]; ok {
			return s
		}
		var s []seedStat
		b, err := os.ReadFile(filepath.Join(root, "bench/results/seeds", name+".json"))
		if err == nil {
			require.NoError(t, json.Unmarshal(b, &s), name)
		}
		files[name] = s
		return s
	}
	for _, r := range rows {
		require.Len(t, r, 6)
		scenario, p, factor := scenarioOf(t, r[1])
		for i, side := range []string{"before", "now"} {
			want := "–"
			for _, s := range stats(side + "-" + r[0]) {
				if s.Strategy == r[3] && s.Scenario == scenario && s.Scale == r[2] && math.Abs(s.P-p) < 1e-9 && math.Abs(s.Factor-factor) < 1e-9 {
					want = fmt.Sprintf("%.1f %% / %.2f / %.0f/s, %+.2f ± %.2f", 100*s.Success, s.Load, s.Goodput, s.Diff, s.DiffSE)
					if s.Harmful {
						want += " HARM"
					}
				}
			}
			assert.Equal(t, want, r[4+i], "%s %s %s %s, %s", r[0], r[1], r[2], r[3], side)
		}
	}
}

// scenarioOf reads a scenario cell of the seeds table: its kind, p and
// overload factor.
func scenarioOf(t *testing.T, c string) (string, float64, float64) {
	t.Helper()
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		require.NoError(t, err, c)
		return v
	}
	switch {
	case strings.HasPrefix(c, "outage"):
		_, p, _ := strings.Cut(c, "p = ")
		return "outage", num(p), 0
	case strings.Contains(c, "overload") || strings.HasPrefix(c, "uniform shedding"):
		x := strings.Index(c, "×")
		return "overload", 0, num(c[strings.LastIndex(c[:x], " ")+1 : x])
	case strings.Contains(c, "1 bad backend of 10"):
		return "steady", 0.1, 0
	case strings.Contains(c, "1 bad backend of 3"):
		return "steady", 0.333, 0
	}
	_, p, ok := strings.Cut(c, "p = ")
	require.True(t, ok, c)
	return "steady", num(p), 0
}
