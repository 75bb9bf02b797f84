// Command storm runs the retry-storm benchmark: many clients send keyed POSTs
// to the fake server (fakeserver), which has a capacity limit, through an
// outage and at a range of independent failure rates, once per retry
// strategy, and reports what each strategy did to the server and to its
// callers: a Markdown table (or JSON) on stdout, plots with -out. Then the
// tail scenario (-no-tail skips it, -tail-only runs it alone): GETs against
// a server with a slow tail of latency, without and with hedging, its
// p50/p99/p99.9 and load.
//
// Usage, from bench/ (its own Go module):
//
//	go run ./cmd/storm [flags]                 # real sockets on 127.0.0.1, < 1 min
//	go run ./cmd/storm -virtual [flags]        # simulated time, in-process server
//	go run ./cmd/storm -reproduce brooker2015,brooker2022 -out results
//
// -h lists the flags. A progress bar goes to stderr.
//
// Simulated time needs testing/synctest, which needs a *testing.T: with
// -virtual or -reproduce, the command runs its work as the single test of
// testing.Main, with os.Args emptied so that the testing package parses no
// flag of ours, and stdout handed to the test: what testing.Main prints
// itself ("PASS") goes to stderr.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/resilienthttp/resilient/bench/storm"
)

func main() {
	cfg := storm.DefaultConfig()
	out := storm.Output{Format: "markdown"}
	fs := flag.NewFlagSet("storm", flag.ExitOnError)
	storm.RegisterFlags(fs, &cfg, &out)
	fs.Parse(os.Args[1:])
	if err := out.Validate(); err != nil {
		fail(err)
	}
	cfg.Progress = os.Stderr

	stdout := os.Stdout
	if cfg.Virtual || len(out.Reproduce) > 0 {
		// Virtual runs are parallel subtests; each bubble idles while the
		// runtime hands its goroutines between threads, so more bubbles
		// than cores keep the cores busy.
		os.Args = []string{os.Args[0], "-test.parallel=" + strconv.Itoa(4*runtime.GOMAXPROCS(0))}
		os.Stdout = os.Stderr
		testing.Main(func(string, string) (bool, error) { return true, nil },
			[]testing.InternalTest{{Name: "TestStorm", F: func(t *testing.T) {
				if err := virtual(t, stdout, cfg, out); err != nil {
					t.Fatal(err)
				}
			}}}, nil, nil)
		return // testing.Main exits
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if !cfg.TailOnly() {
		res, err := storm.Run(ctx, cfg)
		if rerr := report(stdout, cfg, out, res); rerr != nil {
			fail(rerr)
		}
		if err != nil {
			// Interrupted: what finished is printed above.
			fail(err)
		}
	}
	if !cfg.NoTail {
		if err := reportTail(stdout, cfg, out, storm.RunTail(ctx, cfg)); err != nil {
			fail(err)
		}
	}
}

// virtual runs the storm, or the published figures, in simulated time.
func virtual(t *testing.T, w io.Writer, cfg storm.Config, out storm.Output) error {
	if len(out.Reproduce) == 0 {
		if !cfg.TailOnly() {
			if err := report(w, cfg, out, storm.RunVirtual(t, cfg)); err != nil {
				return err
			}
		}
		if cfg.NoTail {
			return nil
		}
		return reportTail(w, cfg, out, storm.RunTailVirtual(t, cfg))
	}
	figures := map[string]any{}
	if slices.Contains(out.Reproduce, storm.FigureBrooker2015) {
		res := storm.SimulateOCC(storm.DefaultOCCConfig())
		figures[storm.FigureBrooker2015] = res
		if out.Format == "markdown" {
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
		if out.Format == "markdown" {
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

// report prints the results; with -out it also writes them (storm.md,
// storm.json with the series) and the plots into that directory. Disturbed
// and invalid runs are marked in the results themselves, not on stderr.
func report(w io.Writer, cfg storm.Config, out storm.Output, res []storm.Result) error {
	var err error
	if out.Format == "json" {
		err = storm.WriteJSON(w, res, out.Series)
	} else {
		err = storm.WriteMarkdown(w, res)
	}
	if err != nil || out.Dir == "" {
		return err
	}
	if err := os.MkdirAll(out.Dir, 0o755); err != nil {
		return err
	}
	var md, js bytes.Buffer
	if err := storm.WriteMarkdown(&md, res); err != nil {
		return err
	}
	if err := storm.WriteJSON(&js, res, true); err != nil {
		return err
	}
	files := []string{filepath.Join(out.Dir, "storm.md"), filepath.Join(out.Dir, "storm.json")}
	for i, b := range [][]byte{md.Bytes(), js.Bytes()} {
		if err := os.WriteFile(files[i], b, 0o644); err != nil {
			return err
		}
	}
	plots, err := storm.WritePlots(out.Dir, cfg, res)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "wrote", append(files, plots...))
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "storm:", err)
	os.Exit(1)
}

// reportTail prints the tail scenario's table after the others (in JSON
// mode stdout keeps the storm's results only); with -out it also writes
// tail.md, tail.json and the plot into that directory.
func reportTail(w io.Writer, cfg storm.Config, out storm.Output, res []storm.TailResult) error {
	if out.Format != "json" {
		if err := storm.WriteTailMarkdown(w, cfg.Tail, res); err != nil {
			return err
		}
	}
	if out.Dir == "" {
		return nil
	}
	if err := os.MkdirAll(out.Dir, 0o755); err != nil {
		return err
	}
	var md, js bytes.Buffer
	if err := storm.WriteTailMarkdown(&md, cfg.Tail, res); err != nil {
		return err
	}
	if err := storm.WriteTailJSON(&js, res); err != nil {
		return err
	}
	files := []string{filepath.Join(out.Dir, "tail.md"), filepath.Join(out.Dir, "tail.json")}
	for i, b := range [][]byte{md.Bytes(), js.Bytes()} {
		if err := os.WriteFile(files[i], b, 0o644); err != nil {
			return err
		}
	}
	plots, err := storm.PlotTail(out.Dir, res)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "wrote", append(files, plots...))
	return nil
}
