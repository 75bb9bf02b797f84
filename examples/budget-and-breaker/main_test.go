package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, config{ops: 300, workers: 8, rates: []float64{0.3, 0.9}}))
	s := out.String()
	t.Log("\n" + s)
	for _, want := range []string{
		"300 operations per burst, 8 concurrent senders, up to 4 attempts each",
		"server failing 30% of requests", "server failing 90% of requests",
		"retries only", "budget 10%+1/s", "budget + breaker", "amplification", "stopped by budget", "stopped by breaker",
	} {
		assert.Contains(t, s, want)
	}
}

func TestRunRejectsUnboundedBursts(t *testing.T) {
	var out bytes.Buffer
	assert.Error(t, run(context.Background(), &out, config{ops: maxOps + 1, workers: 8}))
	assert.Error(t, run(context.Background(), &out, config{ops: 10, workers: 0}))
	_, err := parseRates("0.3,1.5")
	assert.Error(t, err)
}

// TestBurst checks the claims of the package documentation on the numbers of
// each setting.
func TestBurst(t *testing.T) {
	const ops, workers = 300, 8
	// Budget 10 % + 1/s over 10 s: 30 + 10 retries, plus one per worker for
	// concurrent withdrawals at a bucket boundary. A burst that a busy
	// machine stretches past the window gets the 10 again for each window it
	// spans.
	maxBudgetRetries := func(elapsed time.Duration) int {
		return ops/10 + 10*(1+int(elapsed/(10*time.Second))) + workers
	}
	ss := settings()
	naive, budget, both := ss[0], ss[1], ss[2]
	ctx := context.Background()

	got := func(rate float64, s setting) (result, time.Duration) {
		t.Helper()
		start := time.Now()
		r, err := burst(ctx, rate, s, ops, workers)
		elapsed := time.Since(start)
		require.NoError(t, err)
		assert.Equal(t, r.sent, r.attempts, "%s at %.1f: the server saw every attempt", s.name, rate)
		assert.Equal(t, ops, r.succeeded+r.byBudget+r.byBreaker+r.exhausted+r.otherFail, "every operation ended once")
		assert.Zero(t, r.otherFail)
		return r, elapsed
	}

	for _, rate := range []float64{0.3, 0.9} {
		n, _ := got(rate, naive)
		assert.Greater(t, n.amplification(), 1+rate, "retries only at %.1f", rate)
		assert.Zero(t, n.byBudget+n.byBreaker)

		b, elapsed := got(rate, budget)
		assert.LessOrEqual(t, b.retries, maxBudgetRetries(elapsed), "budget at %.1f", rate)
		assert.Equal(t, ops+b.retries, b.sent)
		assert.Positive(t, b.byBudget)
		assert.Zero(t, b.byBreaker)

		bb, _ := got(rate, both)
		if rate < 0.5 {
			assert.Zero(t, bb.byBreaker, "a breaker at FailureRatio 0.5 stays shut at %.1f", rate)
		} else {
			assert.Positive(t, bb.byBreaker)
			assert.Less(t, bb.sent, b.sent, "an open breaker sends less than the budget alone")
		}
	}
}
