package storm

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// registerTailFlags defines the flags of the tail scenario on fs.
func registerTailFlags(fs *flag.FlagSet, c *Config) {
	fs.BoolVar(&c.NoTail, "no-tail", c.NoTail, "skip the tail scenario (hedging: GETs with a slow tail of latency)")
	fs.BoolFunc("tail-only", "run the tail scenario only: -no-outage -p \"\" and no overload", func(string) error {
		c.NoOutage, c.Ps, c.Overload, c.NoTail = true, nil, nil, false
		return nil
	})
	fs.IntVar(&c.Tail.Clients, "tail-clients", c.Tail.Clients, "clients of the tail scenario")
	fs.Float64Var(&c.Tail.Rate, "tail-rate", c.Tail.Rate, "GETs per second per client in the tail scenario")
	fs.DurationVar(&c.Tail.Duration, "tail-duration", c.Tail.Duration, "length of the tail scenario's load when -ops is 0")
	fs.DurationVar(&c.Tail.Median, "tail-median", c.Tail.Median, "median latency of the tail scenario's server")
	fs.Float64Var(&c.Tail.Sigma, "tail-sigma", c.Tail.Sigma, "log-normal shape of the tail scenario's latency")
	fs.Float64Var(&c.Tail.SlowRate, "tail-slow-rate", c.Tail.SlowRate, "share of slow requests in the tail scenario")
	fs.Float64Var(&c.Tail.SlowFactor, "tail-slow-factor", c.Tail.SlowFactor, "how many times slower a slow request is")
	fs.DurationVar(&c.Tail.HedgeDelay, "tail-hedge-delay", c.Tail.HedgeDelay, "delay of resilient-hedge-fixed")
	fs.Func("tail-strategies", fmt.Sprintf("comma-separated tail strategies (default all: %s)", strings.Join(TailStrategyNames(), ",")), func(s string) error {
		c.Tail.Strategies = splitList(s)
		for _, name := range c.Tail.Strategies {
			found := false
			for _, st := range tailStrategies {
				found = found || st.Name == name
			}
			if !found {
				return fmt.Errorf("unknown tail strategy %q", name)
			}
		}
		return nil
	})
}

// WriteTailMarkdown writes the tail results as a Markdown table per scale.
func WriteTailMarkdown(w io.Writer, tc TailConfig, res []TailResult) error {
	tc = tc.resolved()
	var b strings.Builder
	for _, scale := range tailScales(res) {
		fmt.Fprintf(&b, "#### tail (GETs; %g %% of requests %g× slower, median %v, σ %g), %s\n\n",
			100*tc.SlowRate, tc.SlowFactor, tc.Median, tc.Sigma, scaleTitle(scale))
		b.WriteString("| strategy | ops | server requests | load | success | p50 ms | p99 ms | p99.9 ms | p99 gain |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range res {
			if r.Scale != scale {
				continue
			}
			if r.Invalid {
				why := "overran"
				if !r.Overran {
					why = fmt.Sprintf("%d operations started more than %v late", r.LateOps, LateThreshold)
				}
				fmt.Fprintf(&b, "| %s | %d | **invalid** (%s) | | | | | | |\n", r.Strategy, r.Ops, why)
				continue
			}
			gain := ""
			if r.P99Gain > 0 {
				gain = fmt.Sprintf("%.1f×", r.P99Gain)
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %.3f | %.1f %% | %.1f | %.1f | %.1f | %s |\n", r.Strategy, r.Ops, r.ServerRequests,
				r.Load, 100*r.SuccessRate, r.P50Ms, r.P99Ms, r.P999Ms, gain)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteTailJSON writes the tail results as a JSON array.
func WriteTailJSON(w io.Writer, res []TailResult) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// PlotTail writes tail.png and tail.svg into dir: per scale, the p50, p99
// and p99.9 of each strategy (bars), with its load in the label.
// It returns the files written.
func PlotTail(dir string, res []TailResult) ([]string, error) {
	scales := tailScales(res)
	if len(scales) == 0 {
		return nil, nil
	}
	grid := make([][]*plot.Plot, 1)
	for _, scale := range scales {
		var rows []TailResult
		for _, r := range res {
			if r.Scale == scale && !r.Invalid {
				rows = append(rows, r)
			}
		}
		p := plot.New()
		p.Title.Text = "tail latency, " + scale
		p.Y.Label.Text = "latency (ms)"
		names := make([]string, len(rows))
		for i, r := range rows {
			names[i] = fmt.Sprintf("%s\nload %.3f", r.Strategy, r.Load)
		}
		w := vg.Points(14)
		for k, q := range []struct {
			name string
			v    func(TailResult) float64
		}{{"p50", func(r TailResult) float64 { return r.P50Ms }}, {"p99", func(r TailResult) float64 { return r.P99Ms }},
			{"p99.9", func(r TailResult) float64 { return r.P999Ms }}} {
			vals := make(plotter.Values, len(rows))
			for i, r := range rows {
				vals[i] = q.v(r)
			}
			bars, err := plotter.NewBarChart(vals, w)
			if err != nil {
				return nil, err
			}
			bars.Color = colorAt(k)
			bars.LineStyle.Width = 0
			bars.Offset = vg.Length(k-1) * w
			p.Add(bars)
			p.Legend.Add(q.name, bars)
		}
		p.Legend.Top = true
		p.NominalX(names...)
		grid[0] = append(grid[0], p)
	}
	return saveGrid(filepath.Join(dir, "tail"), grid, vg.Length(len(scales))*16*vg.Centimeter, 11*vg.Centimeter)
}

func tailScales(res []TailResult) []string {
	var out []string
	for _, r := range res {
		found := false
		for _, s := range out {
			found = found || s == r.Scale
		}
		if !found {
			out = append(out, r.Scale)
		}
	}
	return out
}
