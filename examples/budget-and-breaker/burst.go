package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/resilienthttp/resilient"
)

// setting is one retry control compared.
type setting struct {
	name string
	opts []resilient.Option
}

// result is what one burst did.
type result struct {
	ops       int // operations (POSTs) the application made
	sent      int // requests the server received
	firsts    int // first attempts sent
	retries   int // retries sent
	succeeded int // operations that ended with a 201

	firstsRefused  int // operations refused before any attempt (an open classic breaker)
	retriesRefused int // operations whose next retry was refused (tokens, budget or breaker)
	exhausted      int // operations out of attempts
	otherFail      int // anything else (an unsafe retry not sent, an error): none expected

	created, replays int // the server's effects, and answers from its key store
}

// amplification is requests sent per logical operation: the load the
// retries add to what the application asked for.
func (r result) amplification() float64 { return float64(r.sent) / float64(r.ops) }

// burst sends ops POSTs through a fresh Transport configured with s, from
// workers goroutines, to a fresh server failing at rate, and reports what
// happened. Each request is bounded by ctx.
func burst(ctx context.Context, rate float64, s setting, ops, workers int) (result, error) {
	srv := newFailingServer(rate)
	defer srv.Close()
	t := newTally()
	base := &http.Transport{MaxIdleConnsPerHost: workers}
	defer base.CloseIdleConnections()
	opts := append([]resilient.Option{
		resilient.WithObserver(t.observe),
		resilient.WithBackoff(resilient.FullJitter(time.Millisecond, 4*time.Millisecond)),
	}, s.opts...)
	client := &http.Client{Transport: resilient.NewTransport(base, opts...)}

	jobs := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range jobs {
				if err := post(ctx, client, srv.URL+"/v1/charges", job); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
send:
	for i := range ops {
		select {
		case jobs <- i:
		case err = <-errs:
			break send
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	if err == nil {
		err = <-errs
	}
	if err != nil {
		return result{}, err
	}

	r := result{ops: ops, sent: srv.requests(), firsts: t.firsts, retries: t.retries}
	r.created, r.replays = srv.effects()
	for outcome, n := range t.unsent {
		if outcome == resilient.OutcomeCircuitOpen {
			r.firstsRefused += n
		} else {
			r.otherFail += n
		}
	}
	for outcome, n := range t.outcomes {
		switch outcome {
		case resilient.OutcomeSuccess, resilient.OutcomeReplayed:
			r.succeeded += n
		case resilient.OutcomeTokensExhausted, resilient.OutcomeBudgetExhausted, resilient.OutcomeCircuitOpen:
			r.retriesRefused += n
		case resilient.OutcomeRetriesExhausted:
			r.exhausted += n
		default:
			r.otherFail += n
		}
	}
	return r, nil
}

// post sends one charge. A final 503 or an open breaker is an expected
// result, not an error; only a failure of the example itself (the context
// ends, the server is unreachable) is.
func post(ctx context.Context, client *http.Client, url string, job int) error {
	// Each operation is a charge of its own (the same request sent again
	// from one goroutine would be a retry loop's, to which the Transport
	// defers).
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(fmt.Sprintf(`{"amount":1000,"job":%d}`, job)))
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("budget-and-breaker: burst: %w", ctx.Err())
		}
		if !errors.Is(err, resilient.ErrCircuitOpen) {
			return fmt.Errorf("budget-and-breaker: burst: %w", err)
		}
		return nil
	}
	io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}
