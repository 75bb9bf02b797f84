// Command budget-and-breaker compares resilient's retry controls on bursts
// of requests to a failing server, to help choose between them. (The name
// is historical; the default control is now the retry tokens.)
//
// For each failure rate it starts a server on 127.0.0.1 that answers 503 to
// that fraction of requests, sends a bounded burst of POSTs (300 by default,
// from 8 goroutines, up to 4 attempts each) through a fresh Transport per
// setting, and prints what the server received and how the operations ended:
//
//	go run ./examples/budget-and-breaker
//	go run ./examples/budget-and-breaker -ops 500 -fail 0.1,0.5,1
//
// The server dedupes by Idempotency-Key and shows it by echoing the key, as
// Stripe does; without that evidence (or resilient.WithDedupingServer) a POST
// answered 503 may have been applied, is not re-sent (ErrUnsafeRetry), and
// there is nothing to control. The settings:
//
//	1 attempt (bare client)  WithMaxAttempts(1): the baseline
//	no control               WithRetryControl(): only the 4 attempts bound retries
//	retry tokens (default)   no option: per-host RetryTokens
//	Finagle budget           WithRetryControl(RetryBudget{}): 20 % + 10/s over 10 s
//	tokens + breaker         WithRetryControl(RetryTokens{}, CircuitBreaker{}): a classic breaker on top of the tokens
//
// How to read it: amplification is requests sent per operation; succeeded
// counts operations that got their 201, to compare with the bare client's
// row; firsts refused counts operations that failed without a request being
// sent; retries refused counts operations whose next retry a control
// refused (they get the last 503 at once).
//
// How to choose:
//
//   - With no control, retries multiply the load by about 1 + f + f² + f³
//     at failure rate f — 3.4× at 90 %, 4× when everything fails — exactly
//     when the server can least take it.
//   - The retry tokens (the default) cost nothing when failures are rare: at
//     10 % they send every retry that no control would. A retry takes a
//     token and only a healthy answer earns half a token back, so retries
//     fade as failures grow: at 90 % amplification stays near 1, and when
//     everything fails only the bucket is spent (max(3, 2 % of the last 10
//     s's first attempts)). First attempts are never refused, so no
//     operation fails that a bare client would have completed. Keep them
//     unless a measurement says otherwise; tune them with RetryTokens' fields.
//   - A Finagle budget allows Ratio retries per first attempt plus
//     MinPerSecond × Window per window, whatever happens to them: it keeps
//     adding that much load to a server where everything fails, and its
//     floor (100 retries per 10 s) is large next to a burst of a few hundred
//     operations — here the floor is what bounds it. Choose it when the extra
//     load a dependency can take is known as a share of the traffic, or to
//     share one budget between processes (SharedBudget, package redisbudget).
//   - A classic breaker stops sending anything once FailureRatio of at least
//     MinRequests requests in Window failed, for OpenTimeout: it sheds a host
//     that is down (at 90 % it sends less than a bare client) but fails
//     operations that a single attempt would have completed (it succeeds
//     less often than the bare client), and near FailureRatio whether it
//     trips depends on timing. Choose it only to protect a dependency that
//     must be shed when it is down, with OpenTimeout near its recovery time;
//     CircuitBreaker.RetriesOnly keeps first attempts.
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

// defaultAttempts is WithMaxAttempts' default: every setting but bare keeps
// it.
const defaultAttempts = 4

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
	fail := flag.String("fail", "0.1,0.5,0.9,1", "comma-separated failure rates of the server, each in [0, 1]")
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

// The settings compared, in the order of settings().
const (
	bare = iota
	uncontrolled
	tokens
	budget
	breaker
)

// settings are the retry controls compared.
func settings() []setting {
	return []setting{
		bare:         {"1 attempt (bare client)", []resilient.Option{resilient.WithMaxAttempts(1)}},
		uncontrolled: {"no control", []resilient.Option{resilient.WithRetryControl()}},
		tokens:       {"retry tokens (default)", nil},
		budget: {"Finagle budget 20%+10/s", []resilient.Option{
			resilient.WithRetryControl(resilient.RetryBudget{})}},
		breaker: {"tokens + breaker", []resilient.Option{resilient.WithRetryControl(resilient.RetryTokens{}, resilient.CircuitBreaker{})}},
	}
}

// uncontrolledBound is the amplification of retries with no control at
// failure rate f, if each attempt fails independently: 1 + f + f² + … for
// the defaultAttempts attempts.
func uncontrolledBound(f float64) float64 {
	sum, p := 0.0, 1.0
	for range defaultAttempts {
		sum += p
		p *= f
	}
	return sum
}

// run sends one burst per failure rate and setting and prints the table.
// The whole run is bounded by a 60 s deadline.
func run(ctx context.Context, w io.Writer, cfg config) error {
	if cfg.ops < 1 || cfg.ops > maxOps || cfg.workers < 1 || cfg.workers > 64 {
		return fmt.Errorf("budget-and-breaker: ops must be in [1, %d] and workers in [1, 64]", maxOps)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	fmt.Fprintf(w, "%d operations (POSTs) per burst, %d concurrent senders, up to %d attempts each\n",
		cfg.ops, cfg.workers, defaultAttempts)
	for _, rate := range cfg.rates {
		fmt.Fprintf(w, "\nserver failing %.0f%% of requests (no control, failures independent: 1+f+f²+f³ = %.2fx)\n", rate*100, uncontrolledBound(rate))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "setting\tsent\tamplification\tsucceeded\tfirsts refused\tretries sent\tretries refused\tout of attempts")
		for _, s := range settings() {
			r, err := burst(ctx, rate, s, cfg.ops, cfg.workers)
			if err != nil {
				return err
			}
			fmt.Fprintf(tw, "%s\t%d\t%.2fx\t%d\t%d\t%d\t%d\t%d\n",
				s.name, r.sent, r.amplification(), r.succeeded, r.firstsRefused, r.retries, r.retriesRefused, r.exhausted)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
