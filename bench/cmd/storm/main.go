// Command storm runs the retry-storm benchmark: many clients send keyed POSTs
// to a server with a capacity limit, through an outage, at a range of
// independent failure rates and beyond its capacity, once per retry strategy
// (none, a hand-written loop, go-retryablehttp, failsafe-go, resilient's
// defaults and variants, published retry controls, and the user's own
// policies from -policy FILE), then the tail scenario (GETs with a slow tail
// of latency, without and with hedging), and reports what each strategy did
// to the server and to its callers.
//
// Usage, from bench/ (its own Go module):
//
//	go run ./cmd/storm                        # virtual time, the first screen, ~20 s (first run: +1.5 min of downloads and builds)
//	go run ./cmd/storm -out DIR               # + index.html, every table (storm.md), JSON and plots
//	go run ./cmd/storm -engine sockets        # loopback sockets, real time
//	go run ./cmd/storm -policy ours.json      # your own resilient options beside the defaults
//	go run ./cmd/storm -target http://127.0.0.1:8080   # storm a server you run (see -h: caps)
//	go run ./cmd/storm -reproduce brooker2015,brooker2022 -out results
//
// With no flag it runs the scenarios of storm.DefaultConfig and an
// overload scenario at twice the server's capacity, with the strategies of
// storm.CommandStrategies (-strategies all: every one), in virtual time
// (testing/synctest): immune to the machine's load, it runs the real
// clients against the fakeserver in-process, without net/http's
// connection pool, its own re-sends or the network. Stdout gets the headline (at most 40 lines), -format markdown
// every table, -format json the results. -h lists the flags; a progress
// bar goes to stderr.
//
// Simulated time needs testing/synctest, which needs a *testing.T: in
// virtual runs the command runs its work as the single test of
// testing.Main, with os.Args emptied so that the testing package parses no
// flag of ours, and stdout handed to the test: what testing.Main prints
// itself goes to stderr, and on success the command exits before
// testing.Main would print "PASS".
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/resilienthttp/resilient/bench/storm"
)

func main() {
	cfg := storm.DefaultConfig()
	cfg.Virtual = true
	cfg.Strategies = storm.CommandStrategies()
	cfg.Overload = []float64{2}
	out := storm.Output{Format: "headline"}
	tgt := storm.DefaultTargetConfig()
	fs := flag.NewFlagSet("storm", flag.ExitOnError)
	storm.RegisterFlags(fs, &cfg, &out)
	storm.RegisterTargetFlags(fs, &tgt)
	policy := fs.String("policy", "", "JSON `file` of your own resilient options to storm beside the defaults (see bench/README.md)")
	dryRun := fs.Bool("dry-run", false, "with -target: print what the run would send, and stop")
	routes := fs.Bool("routes", false, "run only the routes scenario (virtual time): a dead route and a live one on one host, at -scales; Markdown to stdout")
	seeds := fs.Int("seeds", 1, "run the storm with `N` seeds (-seed, -seed+1, …; virtual time, no tail) and print each strategy's mean ± spread and harm measured over the seeds")
	seedsFrom := fs.String("seeds-from", "", "comma-separated JSON `files` of runs with different seeds (-format json): print their mean ± spread and harm over the seeds, run nothing")
	fs.Parse(os.Args[1:])
	if *seedsFrom != "" {
		var runs [][]storm.Result
		for _, f := range strings.Split(*seedsFrom, ",") {
			b, err := os.Open(f)
			if err != nil {
				fail(err)
			}
			res, err := storm.ReadResults(b)
			b.Close()
			if err != nil {
				fail(fmt.Errorf("%s: %w", f, err))
			}
			runs = append(runs, res)
		}
		if err := writeSeeds(os.Stdout, out, storm.OverSeeds(runs)); err != nil {
			fail(err)
		}
		return
	}
	if *seeds < 1 || *seeds > 1 && (!cfg.Virtual || *routes || len(out.Reproduce) > 0) {
		fail(errors.New("-seeds N: N ≥ 1, in virtual time, not with -routes or -reproduce"))
	}
	if err := out.Validate(); err != nil {
		fail(err)
	}
	cfg.Progress = os.Stderr
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if tgt.URL != "" && !set["strategies"] {
		// Against a real server, runs are sequential: the headline's
		// strategies only, so that the defaults fit in -max-time.
		cfg.Strategies = storm.HeadlineStrategies()
	}
	if *policy != "" {
		own, tail, err := storm.ReadPolicyFile(*policy)
		if err != nil {
			fail(err)
		}
		cfg.Own, cfg.Tail.Own = own, tail
		for _, s := range own {
			if !slices.Contains(cfg.Strategies, s.Name) {
				cfg.Strategies = append(cfg.Strategies, s.Name)
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		fail(err)
	}
	own := func(s *storm.Summary) {
		for _, st := range cfg.Own {
			s.Own = append(s.Own, st.Name)
		}
	}

	stdout := os.Stdout
	if tgt.URL != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		plan, err := storm.PlanTarget(ctx, tgt, cfg)
		if err != nil {
			fail(err)
		}
		fmt.Fprintln(os.Stderr, plan.DryRun())
		if *dryRun {
			return
		}
		sum, err := plan.Run(ctx)
		if rerr := report(stdout, out, sum); rerr != nil {
			fail(rerr)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "storm: interrupted:", err, "(the report above is partial)")
			os.Exit(130)
		}
		return
	}
	if *dryRun {
		fail(errors.New("-dry-run needs -target"))
	}

	if *routes && !cfg.Virtual {
		fail(errors.New("-routes runs in virtual time only"))
	}
	if cfg.Virtual || len(out.Reproduce) > 0 {
		// Virtual runs are parallel subtests; each bubble idles while the
		// runtime hands its goroutines between threads, so more bubbles
		// than cores keep the cores busy.
		os.Args = []string{os.Args[0], "-test.parallel=" + strconv.Itoa(4*runtime.GOMAXPROCS(0))}
		os.Stdout = os.Stderr
		testing.Main(func(string, string) (bool, error) { return true, nil },
			[]testing.InternalTest{{Name: "TestStorm", F: func(t *testing.T) {
				// Done, exit before testing.Main prints its own verdict.
				defer func() {
					if !t.Failed() {
						os.Exit(0)
					}
				}()
				if *routes {
					rc := storm.DefaultRoutesConfig()
					rc.Seed = cfg.Seed
					res := storm.RunRoutesVirtual(t, rc, cfg.Scales)
					if err := storm.WriteRoutesMarkdown(stdout, rc, res); err != nil {
						t.Fatal(err)
					}
					return
				}
				if len(out.Reproduce) > 0 {
					if err := reproduce(t, stdout, cfg, out); err != nil {
						t.Fatal(err)
					}
					return
				}
				if *seeds > 1 {
					var runs [][]storm.Result
					for i := range *seeds {
						c := cfg
						c.Seed = cfg.Seed + uint64(i)
						runs = append(runs, storm.RunVirtual(t, c))
					}
					if err := writeSeeds(stdout, out, storm.OverSeeds(runs)); err != nil {
						t.Fatal(err)
					}
					return
				}
				sum := storm.Summary{Engine: storm.EngineVirtual, Config: cfg}
				own(&sum)
				if !cfg.TailOnly() {
					sum.Results = storm.RunVirtual(t, cfg)
				}
				if !cfg.NoTail {
					sum.Tail = storm.RunTailVirtual(t, cfg)
				}
				if err := report(stdout, out, sum); err != nil {
					t.Fatal(err)
				}
			}}}, nil, nil)
		return // testing.Main exits
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	sum := storm.Summary{Engine: storm.EngineSockets, Config: cfg}
	own(&sum)
	var err error
	if !cfg.TailOnly() {
		sum.Results, err = storm.Run(ctx, cfg)
	}
	if err == nil && !cfg.NoTail {
		sum.Tail = storm.RunTail(ctx, cfg)
	}
	if err != nil {
		sum.Notes = append(sum.Notes, fmt.Sprintf("INTERRUPTED (%v): a partial report.", err))
	}
	if rerr := report(stdout, out, sum); rerr != nil {
		fail(rerr)
	}
	if err != nil {
		fail(err)
	}
}

// reproduce runs the published figures in simulated time.
func reproduce(t *testing.T, w io.Writer, cfg storm.Config, out storm.Output) error {
	figures := map[string]any{}
	if slices.Contains(out.Reproduce, storm.FigureBrooker2015) {
		res := storm.SimulateOCC(storm.DefaultOCCConfig())
		figures[storm.FigureBrooker2015] = res
		if out.Format != "json" {
			fmt.Fprintf(w, "## %s: Exponential Backoff and Jitter (simulated, resilient's Backoff types)\n\n", storm.FigureBrooker2015)
			if err := storm.WriteOCCMarkdown(w, res); err != nil {
				return err
			}
		}
		if out.Dir != "" {
			files, err := storm.PlotOCC(out.Dir, res)
			if err != nil {
				return err
			}
			fmt.Fprintln(os.Stderr, "wrote", files)
		}
	}
	if slices.Contains(out.Reproduce, storm.FigureBrooker2022) {
		c := storm.DefaultRetryModelConfig()
		c.Seed, c.Progress = cfg.Seed, cfg.Progress
		res := storm.RetryModel(t, c)
		figures[storm.FigureBrooker2022] = res
		if out.Format != "json" {
			fmt.Fprintf(w, "## %s: Fixing retries with token buckets and circuit breakers (virtual time, resilient's Transport)\n\n", storm.FigureBrooker2022)
			if err := storm.WriteRetryModelMarkdown(w, res); err != nil {
				return err
			}
		}
		if out.Dir != "" {
			files, err := storm.PlotRetryModel(out.Dir, res)
			if err != nil {
				return err
			}
			fmt.Fprintln(os.Stderr, "wrote", files)
		}
	}
	if out.Format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(figures)
	}
	return nil
}

// report prints the summary on w in out.Format; with -out it also writes
// into that directory the headline (headline.txt), every table (storm.md,
// tail.md), the results with their series (storm.json, tail.json), the
// plots, and index.html, which holds them all. Disturbed and invalid
// results are marked in the results themselves.
func report(w io.Writer, out storm.Output, sum storm.Summary) error {
	var err error
	switch out.Format {
	case "json":
		err = writeJSON(w, sum, out.Series)
	case "markdown":
		err = writeMarkdown(w, sum)
	default:
		err = storm.WriteHeadline(w, sum)
	}
	if err != nil || out.Dir == "" {
		return err
	}
	if err := os.MkdirAll(out.Dir, 0o755); err != nil {
		return err
	}
	var head, md, js, tmd, tjs bytes.Buffer
	files := map[string]*bytes.Buffer{"headline.txt": &head, "storm.md": &md, "storm.json": &js, "tail.md": &tmd, "tail.json": &tjs}
	if err := storm.WriteHeadline(&head, sum); err != nil {
		return err
	}
	if err := storm.WriteMarkdown(&md, sum.Results); err != nil {
		return err
	}
	if err := storm.WriteJSON(&js, sum.Results, true); err != nil {
		return err
	}
	if err := storm.WriteTailMarkdown(&tmd, sum.Config.Tail, sum.Tail); err != nil {
		return err
	}
	if err := storm.WriteTailJSON(&tjs, sum.Tail); err != nil {
		return err
	}
	var written []string
	for _, name := range []string{"headline.txt", "storm.md", "storm.json", "tail.md", "tail.json"} {
		f := filepath.Join(out.Dir, name)
		if err := os.WriteFile(f, files[name].Bytes(), 0o644); err != nil {
			return err
		}
		written = append(written, f)
	}
	plots, err := storm.WritePlots(out.Dir, sum.Config, sum.Results)
	if err != nil {
		return err
	}
	if len(sum.Tail) > 0 {
		tp, err := storm.PlotTail(out.Dir, sum.Tail)
		if err != nil {
			return err
		}
		plots = append(plots, tp...)
	}
	html, err := storm.WriteHTML(out.Dir, sum, plots)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "wrote", append(append(written, plots...), html))
	return nil
}

// writeSeeds prints the results over seeds: JSON with -format json, else
// the Markdown tables; with -out it also writes them to DIR/seeds.md.
func writeSeeds(w io.Writer, out storm.Output, stats []storm.SeedStat) error {
	if out.Format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(stats)
	}
	var md bytes.Buffer
	if err := storm.WriteSeedsMarkdown(&md, stats); err != nil {
		return err
	}
	if out.Dir != "" {
		if err := os.MkdirAll(out.Dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out.Dir, "seeds.md"), md.Bytes(), 0o644); err != nil {
			return err
		}
	}
	_, err := w.Write(md.Bytes())
	return err
}

// writeMarkdown writes every table of sum.
func writeMarkdown(w io.Writer, sum storm.Summary) error {
	if err := storm.WriteMarkdown(w, sum.Results); err != nil {
		return err
	}
	if len(sum.Tail) == 0 {
		return nil
	}
	return storm.WriteTailMarkdown(w, sum.Config.Tail, sum.Tail)
}

// writeJSON writes sum as one JSON object: the engine, the notes, the
// storm's results and the tail's, each with its disturbed and invalid
// fields.
func writeJSON(w io.Writer, sum storm.Summary, series bool) error {
	var res bytes.Buffer
	if err := storm.WriteJSON(&res, sum.Results, series); err != nil {
		return err
	}
	tail := sum.Tail
	if tail == nil {
		tail = []storm.TailResult{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Engine  string             `json:"engine"`
		Target  string             `json:"target,omitempty"`
		Notes   []string           `json:"notes,omitempty"`
		Results json.RawMessage    `json:"results"`
		Tail    []storm.TailResult `json:"tail"`
	}{sum.Engine, sum.Target, sum.Notes, res.Bytes(), tail})
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "storm:", err)
	os.Exit(1)
}
