// Command budget-and-breaker shows how the retry budget and the circuit
// breaker change what a burst of requests does to a failing server, to help
// choose BudgetConfig and BreakerSettings.
//
// For each failure rate it starts a server on 127.0.0.1 that answers 503 to
// that fraction of requests, sends a bounded burst of POSTs (300 by default,
// from 8 goroutines, up to 4 attempts each) through three Transports, and
// prints what the server received and how the requests ended:
//
//	go run ./examples/budget-and-breaker
//	go run ./examples/budget-and-breaker -ops 500 -fail 0.1,0.5,1
//
// How to read it and choose:
//
//   - Without a budget, retries multiply the load by up to 1 + f + f² + f³
//     at failure rate f: 3.4× at 90 %, exactly when the server can least
//     take it.
//   - A budget bounds retries to Ratio × first attempts + MinPerSecond ×
//     Window per window, whatever the failure rate: here 10 % + 1/s, so at
//     most 1.1× plus 10 retries. Pick Ratio as the extra load the server can
//     absorb (the default 0.2 is Finagle's and Linkerd's), MinPerSecond so
//     that a quiet client can still retry (the default 10/s), and Window
//     longer than a typical blip (default 10 s). Requests it stops get the
//     last answer (here the 503) at once.
//   - A breaker stops sending at all once FailureRatio of at least
//     MinRequests requests in Window failed, for OpenTimeout: it sheds a host
//     that is down (90 % here) and stays shut for one that merely degrades
//     (30 % here, below FailureRatio 0.5), which the budget handles. Set
//     MinRequests high enough that a few early failures cannot trip it, and
//     OpenTimeout near how long the host takes to recover.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/resilienthttp/resilient"
)

// maxOps bounds a burst, whatever the flags say.
const maxOps = 2000

// config is what the flags set.
type config struct {
	ops     int       // operations per burst
	workers int       // concurrent senders
	rates   []float64 // server failure rates, one table section each
}

func main() {
	cfg := config{}
	flag.IntVar(&cfg.ops, "ops", 300, fmt.Sprintf("operations per burst (1-%d)", maxOps))
	flag.IntVar(&cfg.workers, "workers", 8, "concurrent senders (1-64)")
	fail := flag.String("fail", "0.3,0.9", "comma-separated failure rates of the server, each in [0, 1]")
	flag.Parse()
	var err error
	if cfg.rates, err = parseRates(*fail); err != nil {
		log.Fatal(err)
	}
	if err := run(context.Background(), os.Stdout, cfg); err != nil {
		log.Fatal(err)
	}
}

func parseRates(s string) ([]float64, error) {
	var rates []float64
	for _, f := range strings.Split(s, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("budget-and-breaker: -fail: %q is not a rate in [0, 1]", f)
		}
		rates = append(rates, r)
	}
	return rates, nil
}

// settings are the configurations compared.
func settings() []setting {
	budget := resilient.WithBudgetConfig(resilient.BudgetConfig{Ratio: 0.1, MinPerSecond: 1, Window: 10 * time.Second})
	breaker := resilient.WithBreaker(resilient.BreakerSettings{
		FailureRatio: 0.5, MinRequests: 20, Window: 10 * time.Second, OpenTimeout: 2 * time.Second, HalfOpenProbes: 1})
	return []setting{
		{"retries only", []resilient.Option{resilient.WithoutBudget(), resilient.WithoutBreaker()}},
		{"budget 10%+1/s", []resilient.Option{budget, resilient.WithoutBreaker()}},
		{"budget + breaker", []resilient.Option{budget, breaker}},
	}
}

// run sends one burst per failure rate and setting and prints the table.
// The whole run is bounded by a 20 s deadline.
func run(ctx context.Context, w io.Writer, cfg config) error {
	if cfg.ops < 1 || cfg.ops > maxOps || cfg.workers < 1 || cfg.workers > 64 {
		return fmt.Errorf("budget-and-breaker: ops must be in [1, %d] and workers in [1, 64]", maxOps)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	fmt.Fprintf(w, "%d operations per burst, %d concurrent senders, up to %d attempts each\n",
		cfg.ops, cfg.workers, resilient.DefaultMaxAttempts)
	for _, rate := range cfg.rates {
		fmt.Fprintf(w, "\nserver failing %.0f%% of requests\n", rate*100)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "setting\tsent\tamplification\tsucceeded\tretries\tstopped by budget\tstopped by breaker\tout of attempts")
		for _, s := range settings() {
			r, err := burst(ctx, rate, s, cfg.ops, cfg.workers)
			if err != nil {
				return err
			}
			fmt.Fprintf(tw, "%s\t%d\t%.2fx\t%d\t%d\t%d\t%d\t%d\n",
				s.name, r.sent, r.amplification(), r.succeeded, r.retries, r.byBudget, r.byBreaker, r.exhausted)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
