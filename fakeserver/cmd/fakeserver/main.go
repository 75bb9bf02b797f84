// Command fakeserver runs the fake idempotent API of package
// github.com/resilienthttp/resilient/fakeserver as a standalone server, so that
// tests in any language can use it.
//
// Usage:
//
//	fakeserver [-addr 127.0.0.1:8080] [-scenario file.json] [-seed N] [-shutdown-timeout 5s]
//	           [-pushback] [-pushback-ratio R] [-pushback-min-per-second N]
//	           [-pushback-max-in-flight N] [-pushback-status 503|429]
//
// The first line it prints on stdout is "listening on http://HOST:PORT". It
// serves the API under /v1/ and the admin endpoints under /_fake/ (see
// fakeserver/README.md). On SIGINT or SIGTERM it releases hanging requests,
// waits up to -shutdown-timeout for the others, then closes every connection
// still open, prints "shut down" and exits with status 0.
//
// With -pushback, or any -pushback-* flag, the API is served behind the
// retry-budget middleware of package github.com/resilienthttp/resilient/pushback
// (its defaults unless a flag says otherwise; see pushback/README.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/pushback"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	default:
		fmt.Fprintln(os.Stderr, "fakeserver:", err)
		stop()
		os.Exit(1)
	}
}

// run is the whole program: it serves until ctx is done, then shuts down.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("fakeserver", flag.ContinueOnError)
	flags.SetOutput(stderr)
	addr := flags.String("addr", "127.0.0.1:8080",
		"listen `address`; an empty host means 127.0.0.1 (use 0.0.0.0 for every interface), port 0 picks a free port")
	scenarioPath := flags.String("scenario", "", "scenario JSON `file` (see README.md); default: a healthy server")
	seed := flags.Uint64("seed", 0, "seed of the random draws; when set, overrides the scenario's seed")
	grace := flags.Duration("shutdown-timeout", 5*time.Second,
		"on SIGINT or SIGTERM, how long to wait for open connections before closing them")
	var pb pushback.Config
	usePushback := flags.Bool("pushback", false, "serve the API behind the pushback retry-budget middleware")
	flags.Float64Var(&pb.Ratio, "pushback-ratio", 0, "retries admitted per healthy answer in the window (0: the default, 0.5; negative: none)")
	flags.Float64Var(&pb.MinPerSecond, "pushback-min-per-second", 0, "retries admitted per second whatever the answers (0: the default, 1; negative: none)")
	flags.IntVar(&pb.MaxInFlight, "pushback-max-in-flight", 0, "requests in service above which first attempts are shed, retries earlier (0: no bound)")
	flags.IntVar(&pb.Status, "pushback-status", 0, "status of a pushback answer: 503 (default) or 429")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if pb.Status != 0 && pb.Status != http.StatusServiceUnavailable && pb.Status != http.StatusTooManyRequests {
		return fmt.Errorf("-pushback-status %d: want 503 or 429", pb.Status)
	}
	if pb.MaxInFlight < 0 || math.IsNaN(pb.Ratio) || math.IsNaN(pb.MinPerSecond) ||
		math.IsInf(pb.Ratio, 0) || math.IsInf(pb.MinPerSecond, 0) {
		return errors.New("-pushback-*: invalid value")
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}

	var opts []fakeserver.Option
	if *scenarioPath != "" {
		data, err := os.ReadFile(*scenarioPath)
		if err != nil {
			return err
		}
		sc, err := fakeserver.ParseScenario(data)
		if err != nil {
			return fmt.Errorf("%s: %w", *scenarioPath, err)
		}
		opts = append(opts, fakeserver.WithScenario(sc))
	}
	flags.Visit(func(f *flag.Flag) {
		if f.Name == "seed" {
			opts = append(opts, fakeserver.WithSeed(*seed))
		}
		if strings.HasPrefix(f.Name, "pushback-") {
			*usePushback = true
		}
	})
	if *usePushback {
		opts = append(opts, fakeserver.WithPushback(pb))
	}

	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return err
	}
	fake := fakeserver.NewUnstarted(opts...)
	hs := &http.Server{Handler: fake.Handler(), ReadHeaderTimeout: 10 * time.Second}
	if _, err := fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr()); err != nil {
		ln.Close()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	select {
	case err := <-served:
		fake.Close()
		return err
	case <-ctx.Done():
	}
	// fake.Close releases at once the requests that hang, wait for capacity
	// or sleep, then waits for every request in service; Shutdown lets the
	// others finish within the grace period. Connections still open when it
	// runs out (a client that never sends its request, or never finishes its
	// body) are closed, which ends their requests too: a signal stops the
	// server whatever its clients do.
	released := make(chan struct{})
	go func() {
		fake.Close()
		close(released)
	}()
	sctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "fakeserver: connections still open after %v, closing them\n", *grace)
		// Close closes every connection; its only possible error is the
		// listener's, which Shutdown has closed already.
		_ = hs.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-released
	fmt.Fprintln(stdout, "shut down")
	return nil
}
