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

// glyphs give each strategy's points a third distinguishing mark.
var glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.RingGlyph{},
	draw.BoxGlyph{}, draw.PyramidGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}}

// lineStyle returns the colour, dashes and glyph of the i-th strategy: no
// two of the first 40 share all three.
func lineStyle(i int) (color.RGBA, []vg.Length, draw.GlyphDrawer) {
	return colorAt(i), dashes[(i/len(palette)+i)%len(dashes)], glyphs[i%len(glyphs)]
}

// WritePlots writes the plots of results into dir (created if needed), each
// as PNG and SVG: load.* (server load and goodput over time per strategy in
// the outage scenario, a Transport per client; load-shared.* for the shared
// scale), with the outage and the intervals the harness was disturbed
// shaded; sweep.* (success rate and load against p in the steady scenarios,
// a line per strategy, a row per scale, and a legend panel). A plot whose
// scenario is missing is skipped. It returns the files written.
func WritePlots(dir string, cfg Config, results []Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	var steady []Result
	for _, r := range results {
		if r.Scenario == ScenarioSteady {
			steady = append(steady, r)
		}
	}
	for _, scale := range scalesOf(results) {
		var outage []Result
		for _, r := range results {
			if r.Scenario == ScenarioOutage && r.Scale == scale {
				outage = append(outage, r)
			}
		}
		if len(outage) == 0 {
			continue
		}
		name := "load"
		if scale != ScalePerClient {
			name += "-" + scale
		}
		grid, w, h := loadPlots(cfg, outage)
		f, err := saveGrid(filepath.Join(dir, name), grid, w, h)
		if err != nil {
			return files, err
		}
		files = append(files, f...)
	}
	if len(steady) > 0 {
		grid := sweepPlots(steady, func(r Result) *float64 { return r.WarmLoad })
		f, err := saveGrid(filepath.Join(dir, "sweep"), grid, 36*vg.Centimeter, vg.Length(len(grid))*11*vg.Centimeter)
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
		p.Title.Text = r.Strategy + " (" + r.Scale + ")"
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
		var disturbed *plotter.Polygon
		for i, n := range r.LateBins {
			if n == 0 {
				continue
			}
			x0, x1 := float64(i)*r.BinS, float64(i+1)*r.BinS
			d, _ := plotter.NewPolygon(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}, {X: x1, Y: ymax}, {X: x0, Y: ymax}})
			d.Color = color.RGBA{200, 200, 200, 255}
			d.LineStyle.Width = 0
			p.Add(d)
			disturbed = d
		}
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
		// Every panel carries its legend, small, so that any panel read
		// alone says what its lines are.
		if k > 0 && cfg.Capacity.MaxConcurrent > 0 {
			capLine, _ := plotter.NewLine(plotter.XYs{})
			capLine.Color = color.RGBA{120, 120, 120, 255}
			capLine.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Legend.Add("server capacity", capLine)
		}
		p.Legend.Add("requests at the server /s", load)
		p.Legend.Add("successful ops /s (by start)", good)
		p.Legend.Add("outage", shade)
		if disturbed != nil {
			p.Legend.Add("harness disturbed", disturbed)
		}
		p.Legend.Top = true
		p.Legend.TextStyle.Font.Size = vg.Points(6.5)
		grid[k/cols][k%cols] = p
	}
	return grid, 30 * vg.Centimeter, vg.Length(rows) * 8 * vg.Centimeter
}

// sweepPlots returns a row per scale of three panels: success rate and load
// (server requests per operation, warmed up) against p, a line per
// strategy, and a panel with the legend alone (15 strategies do not fit in a
// data panel).
func sweepPlots(results []Result, loadOf func(Result) *float64) [][]*plot.Plot {
	var names []string
	for _, r := range results {
		if !slices.Contains(names, r.Strategy) {
			names = append(names, r.Strategy)
		}
	}
	var rows [][]*plot.Plot
	for _, scale := range scalesOf(results) {
		success, load, legend := plot.New(), plot.New(), plot.New()
		success.Title.Text = "success rate, " + scaleLabel(scale)
		success.Y.Label.Text = "operations that succeeded (%)"
		success.Y.Min, success.Y.Max = 0, 100
		load.Title.Text = "load, " + scaleLabel(scale)
		load.Y.Label.Text = "server requests ÷ operations (warm)"
		load.Y.Min = 0
		for _, p := range []*plot.Plot{success, load} {
			p.X.Label.Text = "independent failure rate p"
			p.X.Min, p.X.Max = 0, 1
			p.Add(plotter.NewGrid())
		}
		legend.HideAxes()
		legend.Title.Text = "strategies"
		legend.Legend.Top, legend.Legend.Left = true, true
		legend.Legend.TextStyle.Font.Size = vg.Points(8)
		for i, name := range names {
			var s, l plotter.XYs
			for _, r := range results {
				if r.Strategy == name && r.Scale == scale && !r.Invalid {
					s = append(s, plotter.XY{X: r.P, Y: 100 * r.SuccessRate})
					if v := loadOf(r); v != nil {
						l = append(l, plotter.XY{X: r.P, Y: *v})
					}
				}
			}
			slices.SortFunc(s, func(x, y plotter.XY) int { return cmp.Compare(x.X, y.X) })
			slices.SortFunc(l, func(x, y plotter.XY) int { return cmp.Compare(x.X, y.X) })
			c, d, g := lineStyle(i)
			var entry []plot.Thumbnailer
			for j, xys := range []plotter.XYs{s, l} {
				if len(xys) == 0 {
					continue
				}
				ln, pts, err := plotter.NewLinePoints(xys)
				if err != nil {
					continue
				}
				ln.Color, pts.Color = c, c
				ln.Dashes = d
				ln.Width = vg.Points(1.3)
				pts.Shape = g
				pts.Radius = vg.Points(2.2)
				[]*plot.Plot{success, load}[j].Add(ln, pts)
				entry = []plot.Thumbnailer{ln, pts}
			}
			if entry != nil {
				legend.Legend.Add(name, entry...)
			}
		}
		rows = append(rows, []*plot.Plot{success, load, legend})
	}
	return rows
}

func scaleLabel(scale string) string {
	if scale == ScaleShared {
		return "one shared Transport"
	}
	return "a Transport per client"
}
