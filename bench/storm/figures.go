package storm

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Published figures that -reproduce knows.
const (
	// FigureBrooker2015 is "Exponential Backoff and Jitter" (AWS
	// Architecture Blog, 2015): work and completion time of OCC clients per
	// backoff (SimulateOCC).
	FigureBrooker2015 = "brooker2015"
	// FigureBrooker2022 is "Fixing retries with token buckets and circuit
	// breakers" (2022): success rate and load against the failure rate
	// (RetryModel).
	FigureBrooker2022 = "brooker2022"
)

// WriteOCCMarkdown writes the OCC results as two Markdown tables, calls and
// completion time, a row per number of clients and a column per backoff.
func WriteOCCMarkdown(w io.Writer, res []OCCResult) error {
	var names []string
	var clients []int
	for _, r := range res {
		if !slices.Contains(names, r.Backoff) {
			names = append(names, r.Backoff)
		}
		if !slices.Contains(clients, r.Clients) {
			clients = append(clients, r.Clients)
		}
	}
	var b strings.Builder
	for _, table := range []struct {
		title string
		value func(OCCResult) float64
	}{
		{"write calls until every client succeeded (mean)", func(r OCCResult) float64 { return r.Calls }},
		{"time until every client succeeded, ms (mean)", func(r OCCResult) float64 { return r.TimeMs }},
	} {
		fmt.Fprintf(&b, "%s:\n\n| clients | %s |\n|---:|%s\n", table.title, strings.Join(names, " | "), strings.Repeat("---:|", len(names)))
		for _, n := range clients {
			fmt.Fprintf(&b, "| %d |", n)
			for _, name := range names {
				for _, r := range res {
					if r.Clients == n && r.Backoff == name {
						fmt.Fprintf(&b, " %.0f |", table.value(r))
					}
				}
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// PlotOCC writes brooker2015.png and .svg into dir: calls and completion time
// against the number of clients, a line per backoff.
func PlotOCC(dir string, res []OCCResult) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var names []string
	for _, r := range res {
		if !slices.Contains(names, r.Backoff) {
			names = append(names, r.Backoff)
		}
	}
	calls, tm := plot.New(), plot.New()
	calls.Title.Text = "work: write calls"
	calls.Y.Label.Text = "calls until every client succeeded"
	tm.Title.Text = "completion time"
	tm.Y.Label.Text = "ms until every client succeeded"
	tm.Title.Text = "completion time (log scale)"
	tm.Y.Scale = plot.LogScale{}
	tm.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	for _, p := range []*plot.Plot{calls, tm} {
		p.X.Label.Text = "contending clients"
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.TextStyle.Font.Size = vg.Points(8)
		p.Add(plotter.NewGrid())
	}
	calls.Y.Min = 0
	for i, name := range names {
		var c, t plotter.XYs
		for _, r := range res {
			if r.Backoff == name {
				c = append(c, plotter.XY{X: float64(r.Clients), Y: r.Calls})
				t = append(t, plotter.XY{X: float64(r.Clients), Y: r.TimeMs})
			}
		}
		for j, xys := range []plotter.XYs{c, t} {
			l, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, err
			}
			l.Color, pts.Color = colorAt(i), colorAt(i)
			l.Dashes = dashes[i%len(dashes)]
			l.Width = vg.Points(1.5)
			pts.Radius = vg.Points(2)
			p := []*plot.Plot{calls, tm}[j]
			p.Add(l, pts)
			p.Legend.Add(name, l, pts)
		}
	}
	return saveGrid(filepath.Join(dir, FigureBrooker2015), [][]*plot.Plot{{calls, tm}}, 26*vg.Centimeter, 11*vg.Centimeter)
}

// WriteRetryModelMarkdown writes the retry-model results as a Markdown table:
// a row per p, the success rate and the load of each strategy, and the
// closed-form expectation where there is one.
func WriteRetryModelMarkdown(w io.Writer, res []Result) error {
	var names []string
	var ps []float64
	for _, r := range res {
		if !slices.Contains(names, r.Strategy) {
			names = append(names, r.Strategy)
		}
		if !slices.Contains(ps, r.P) {
			ps = append(ps, r.P)
		}
	}
	var b strings.Builder
	b.WriteString("success rate % and load (requests ÷ operations) per strategy; in brackets, the closed form\n\n| p |")
	for _, n := range names {
		fmt.Fprintf(&b, " %s: success | %s: load |", n, n)
	}
	fmt.Fprintf(&b, "\n|---:|%s\n", strings.Repeat("---:|", 2*len(names)))
	for _, p := range ps {
		fmt.Fprintf(&b, "| %g |", p)
		for _, n := range names {
			for _, r := range res {
				if r.P != p || r.Strategy != n {
					continue
				}
				s, l := fmt.Sprintf("%.1f", 100*r.SuccessRate), fmt.Sprintf("%.2f", r.Amplification)
				if es, el, ok := RetryModelExpected(n, p); ok {
					s += fmt.Sprintf(" (%.1f)", 100*es)
					l += fmt.Sprintf(" (%.2f)", el)
				}
				fmt.Fprintf(&b, " %s | %s |", s, l)
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// PlotRetryModel writes brooker2022.png and .svg into dir: success rate and
// load against p, a line per strategy, and the closed forms of no retries and
// 3 retries as thin dotted lines.
func PlotRetryModel(dir string, res []Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	panels := sweepPlots(res, func(r Result) *float64 { return &r.Amplification })[0]
	success, load, legend := panels[0], panels[1], panels[2]
	success.Title.Text = "success rate"
	load.Title.Text = "load on the service"
	load.Y.Label.Text = "calls ÷ operations"
	for _, name := range []string{"no retries", "3 retries"} {
		var s, l plotter.XYs
		for i := 0; i <= 100; i++ {
			p := float64(i) / 100
			es, el, _ := RetryModelExpected(name, p)
			s = append(s, plotter.XY{X: p, Y: 100 * es})
			l = append(l, plotter.XY{X: p, Y: el})
		}
		for j, xys := range []plotter.XYs{s, l} {
			line, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			line.Color = color.RGBA{0, 0, 0, 255}
			line.Width = vg.Points(0.5)
			line.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
			[]*plot.Plot{success, load}[j].Add(line)
			if j == 1 && name == "3 retries" {
				legend.Legend.Add("closed forms", line)
			}
		}
	}
	return saveGrid(filepath.Join(dir, FigureBrooker2022), [][]*plot.Plot{{success, load, legend}}, 36*vg.Centimeter, 11*vg.Centimeter)
}
