package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, config{ops: 100, workers: 8, rates: []float64{0.5}}))
	s := out.String()
	t.Log("\n" + s)
	for _, want := range []string{
		"100 operations (POSTs) per burst, 8 concurrent senders, up to 4 attempts each",
		"server failing 50% of requests (no control, failures independent: 1+f+f²+f³ = 1.88x)",
		"amplification", "succeeded", "firsts refused", "retries refused", "out of attempts",
	} {
		assert.Contains(t, s, want)
	}
	for _, s0 := range settings() {
		assert.Contains(t, s, s0.name)
	}
}

func TestRunRejectsUnboundedBursts(t *testing.T) {
	var out bytes.Buffer
	assert.Error(t, run(context.Background(), &out, config{ops: maxOps + 1, workers: 8}))
	assert.Error(t, run(context.Background(), &out, config{ops: 10, workers: 0}))
	_, err := parseRates("0.3,1.5")
	assert.Error(t, err)
}

// TestBurst checks the shapes the package documentation describes, on the
// numbers of each setting. The server spreads its failures evenly, so the
// n-th request fails or not whatever the timing; the bounds below hold on
// a loaded machine too.
func TestBurst(t *testing.T) {
	const ops, workers = 300, 8
	ss := settings()
	ctx := context.Background()

	// The Finagle budget allows 20 % of first attempts plus 10/s × 10 s per
	// window. A burst that a busy machine stretches across windows gets the
	// floor again for each (an event counts for 9/10 of the window at
	// least); concurrent withdrawals at a bucket boundary may each exceed
	// the bound by one.
	maxBudgetRetries := func(elapsed time.Duration) int {
		return ops/5 + 100*(1+int(elapsed/(9*time.Second))) + workers*(1+int(elapsed/time.Second))
	}

	for _, rate := range []float64{0.1, 0.9, 1} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			rs := make([]result, len(ss))
			var budgetElapsed time.Duration
			for i, s := range ss {
				start := time.Now()
				r, err := burst(ctx, rate, s, ops, workers)
				if i == budget {
					budgetElapsed = time.Since(start)
				}
				require.NoError(t, err)
				// Every setting: the server saw every attempt; every
				// operation ended once, none for a reason other than those
				// tabled (no POST was held back as an unsafe retry: the
				// server's echo shows it dedupes); one charge per success,
				// none created twice.
				assert.Equal(t, r.sent, r.firsts+r.retries, "%s: the server saw every attempt", s.name)
				assert.Equal(t, ops, r.succeeded+r.firstsRefused+r.retriesRefused+r.exhausted+r.otherFail, "%s: every operation ended once", s.name)
				assert.Zero(t, r.otherFail, s.name)
				assert.Equal(t, r.succeeded, r.created, "%s: one charge per success", s.name)
				assert.Zero(t, r.replays, s.name)
				if i != breaker {
					// Only a classic breaker refuses first attempts: with
					// any retry control, what a bare client sends is sent,
					// so at least as many operations succeed.
					assert.Zero(t, r.firstsRefused, s.name)
					assert.Equal(t, ops, r.firsts, s.name)
					assert.GreaterOrEqual(t, r.succeeded, rs[bare].succeeded, "%s succeeds at least as often as a bare client", s.name)
				}
				rs[i] = r
			}
			b, n, tk, bu, br := rs[bare], rs[uncontrolled], rs[tokens], rs[budget], rs[breaker]

			assert.Equal(t, ops, b.sent)
			assert.Zero(t, b.retries)

			// No control: about 1 + f + f² + f³ requests per operation.
			assert.InEpsilon(t, uncontrolledBound(rate), n.amplification(), 0.05, "no control")
			assert.Zero(t, n.retriesRefused)

			// Budget: bounded by its share and floor, whatever the rate.
			assert.LessOrEqual(t, bu.retries, maxBudgetRetries(budgetElapsed), "budget")

			if rate <= 0.1 {
				// Rare failures: the tokens and the budget refuse no retry
				// that no control would send; the breaker stays shut.
				assert.Zero(t, tk.retriesRefused, "tokens")
				assert.Zero(t, bu.retriesRefused, "budget")
				assert.Zero(t, br.firstsRefused+br.retriesRefused, "breaker")
				return
			}
			// Most or all requests fail: the tokens keep amplification near
			// 1 (what the bucket holds plus half a token per success); the
			// budget still spends its share and floor; the breaker sheds
			// the host, below a bare client's load, and first attempts with
			// it.
			assert.Less(t, tk.amplification(), 1.2, "tokens")
			assert.Positive(t, tk.retriesRefused, "tokens")
			assert.Positive(t, bu.retriesRefused, "budget")
			assert.Greater(t, bu.retries, tk.retries, "the budget grows with first attempts, the tokens with successes")
			assert.Positive(t, br.firstsRefused, "breaker")
			assert.Less(t, br.sent, b.sent, "an open classic breaker sends less than a bare client")
		})
	}
}
