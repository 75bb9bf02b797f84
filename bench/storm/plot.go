package storm

import (
	"cmp"
	"image/color"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// palette gives each strategy (or series) a colour that stays apart from
// its neighbours; it cycles after ten.
var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255}, {148, 103, 189, 255},
	{140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255}, {188, 189, 34, 255}, {23, 190, 207, 255},
}

func colorAt(i int) color.RGBA { return palette[i%len(palette)] }

// dashes gives lines a second distinguishing mark when colours are close.
var dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(2)}, {vg.Points(2), vg.Points(2)}, {vg.Points(8), vg.Points(2), vg.Points(2), vg.Points(2)}}

// WritePlots writes the plots of results into dir (created if needed), each
// as PNG and SVG: load.* (server load and goodput over time per strategy, in
// the outage scenario) and sweep.* (success rate and amplification against
// p, in the steady scenarios). A plot whose scenario is missing is skipped.
// It returns the files written.
func WritePlots(dir string, cfg Config, results []Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	var outage, steady []Result
	for _, r := range results {
		switch r.Scenario {
		case ScenarioOutage:
			outage = append(outage, r)
		case ScenarioSteady:
			steady = append(steady, r)
		}
	}
	if len(outage) > 0 {
		grid, w, h := loadPlots(cfg, outage)
		f, err := saveGrid(filepath.Join(dir, "load"), grid, w, h)
		if err != nil {
			return files, err
		}
		files = append(files, f...)
	}
	if len(steady) > 0 {
		grid := [][]*plot.Plot{sweepPlots(steady)}
		f, err := saveGrid(filepath.Join(dir, "sweep"), grid, 26*vg.Centimeter, 11*vg.Centimeter)
		if err != nil {
			return files, err
		}
		files = append(files, f...)
	}
	return files, nil
}

// saveGrid draws plots, a grid of rows, on one canvas of w × h and writes it
// to base.png and base.svg.
func saveGrid(base string, plots [][]*plot.Plot, w, h vg.Length) ([]string, error) {
	var files []string
	for _, format := range []string{"png", "svg"} {
		c, err := draw.NewFormattedCanvas(w, h, format)
		if err != nil {
			return files, err
		}
		dc := draw.New(c)
		t := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
			PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
		for i := range plots {
			for j := range plots[i] {
				if plots[i][j] != nil {
					plots[i][j].Draw(t.At(dc, j, i))
				}
			}
		}
		name := base + "." + format
		f, err := os.Create(name)
		if err != nil {
			return files, err
		}
		_, err = c.WriteTo(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, err
		}
		files = append(files, name)
	}
	return files, nil
}

// plotBin is the width of the bins drawn in the load plots, in bins of the
// series: the series' 100 ms bins are noisy at a few hundred requests per
// second.
const plotBin = 2

// rateXYs turns per-bin counts into (seconds, per second) points, summing
// plotBin bins at a time.
func rateXYs(counts []int, binS float64, upTo int) plotter.XYs {
	var xys plotter.XYs
	for i := 0; i < upTo; i += plotBin {
		s := 0
		for j := i; j < i+plotBin && j < len(counts); j++ {
			s += counts[j]
		}
		xys = append(xys, plotter.XY{X: (float64(i) + plotBin/2.0) * binS, Y: float64(s) / (plotBin * binS)})
	}
	return xys
}

// loadPlots returns one panel per strategy: requests the server saw per
// second and operations per second that succeeded (by start time), the
// outage shaded and the server's capacity dashed.
func loadPlots(cfg Config, results []Result) ([][]*plot.Plot, vg.Length, vg.Length) {
	cols := 3
	rows := (len(results) + cols - 1) / cols
	ymax := cfg.Capacity.PerSecond()
	if cfg.Capacity.MaxConcurrent == 0 {
		ymax = 0
	}
	upTo := 0
	for _, r := range results {
		upTo = max(upTo, int(cfg.Duration.Seconds()/r.BinS)+int(cfg.OpTimeout.Seconds()/r.BinS))
		for _, xy := range rateXYs(r.Load, r.BinS, len(r.Load)) {
			ymax = max(ymax, xy.Y)
		}
	}
	ymax *= 1.08
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for k, r := range results {
		p := plot.New()
		p.Title.Text = r.Strategy
		p.X.Label.Text = "time (s)"
		p.Y.Label.Text = "per second"
		p.X.Min, p.X.Max = 0, float64(upTo)*r.BinS
		p.Y.Min, p.Y.Max = 0, ymax
		shade, _ := plotter.NewPolygon(plotter.XYs{
			{X: cfg.OutageStart.Seconds(), Y: 0}, {X: cfg.OutageEnd.Seconds(), Y: 0},
			{X: cfg.OutageEnd.Seconds(), Y: ymax}, {X: cfg.OutageStart.Seconds(), Y: ymax}})
		shade.Color = color.RGBA{255, 220, 220, 255}
		shade.LineStyle.Width = 0
		p.Add(shade)
		if c := cfg.Capacity; c.MaxConcurrent > 0 {
			capLine, _ := plotter.NewLine(plotter.XYs{{X: 0, Y: c.PerSecond()}, {X: p.X.Max, Y: c.PerSecond()}})
			capLine.Color = color.RGBA{120, 120, 120, 255}
			capLine.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(capLine)
			if k == 0 {
				p.Legend.Add("server capacity", capLine)
			}
		}
		good, _ := plotter.NewLine(rateXYs(r.Goodput, r.BinS, upTo))
		good.Color = colorAt(2)
		good.Width = vg.Points(2.5)
		load, _ := plotter.NewLine(rateXYs(r.Load, r.BinS, upTo))
		load.Color = colorAt(0)
		load.Width = vg.Points(1.2)
		p.Add(good, load)
		if k == 0 {
			p.Legend.Add("requests at the server", load)
			p.Legend.Add("successful ops (by start)", good)
			p.Legend.Add("outage", shade)
			p.Legend.Top = true
			p.Legend.TextStyle.Font.Size = vg.Points(8)
		}
		grid[k/cols][k%cols] = p
	}
	return grid, 30 * vg.Centimeter, vg.Length(rows) * 8 * vg.Centimeter
}

// sweepPlots returns two panels, success rate and amplification against p,
// with a line per strategy.
func sweepPlots(results []Result) []*plot.Plot {
	var names []string
	for _, r := range results {
		if !slices.Contains(names, r.Strategy) {
			names = append(names, r.Strategy)
		}
	}
	success, amp := plot.New(), plot.New()
	success.Title.Text = "success rate"
	success.Y.Label.Text = "operations that succeeded (%)"
	success.Y.Min, success.Y.Max = 0, 100
	amp.Title.Text = "amplification"
	amp.Y.Label.Text = "requests at the server ÷ operations"
	amp.Y.Min = 0
	for _, p := range []*plot.Plot{success, amp} {
		p.X.Label.Text = "independent failure rate p"
		p.X.Min, p.X.Max = 0, 1
		p.Legend.Top = true
		p.Legend.Left = p == amp
		p.Legend.TextStyle.Font.Size = vg.Points(7)
		p.Add(plotter.NewGrid())
	}
	for i, name := range names {
		var s, a plotter.XYs
		for _, r := range results {
			if r.Strategy == name {
				s = append(s, plotter.XY{X: r.P, Y: 100 * r.SuccessRate})
				a = append(a, plotter.XY{X: r.P, Y: r.Amplification})
			}
		}
		slices.SortFunc(s, func(x, y plotter.XY) int { return cmp.Compare(x.X, y.X) })
		slices.SortFunc(a, func(x, y plotter.XY) int { return cmp.Compare(x.X, y.X) })
		for j, xys := range []plotter.XYs{s, a} {
			l, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				continue
			}
			l.Color, pts.Color = colorAt(i), colorAt(i)
			l.Dashes = dashes[i%len(dashes)]
			l.Width = vg.Points(1.5)
			pts.Radius = vg.Points(2)
			[]*plot.Plot{success, amp}[j].Add(l, pts)
			if j == 1 {
				amp.Legend.Add(name, l, pts)
			}
		}
	}
	return []*plot.Plot{success, amp}
}
