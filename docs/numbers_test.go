package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
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
