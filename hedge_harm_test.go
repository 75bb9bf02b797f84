package resilient_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
)

// runFatesGET is runFates with GETs, which hedging applies to.
func runFatesGET(t *testing.T, p float64, ops, clients int, rate float64, opts ...resilient.Option) harmRun {
	t.Helper()
	var out harmRun
	synctest.Test(t, func(t *testing.T) {
		srv := &fateServer{p: p, latency: 20 * time.Millisecond, seen: make(map[string]int)}
		trs := make([]*resilient.Transport, clients)
		for i := range trs {
			trs[i] = resilient.NewTransport(srv, opts...)
		}
		ok := make([]bool, ops)
		gap := time.Duration(float64(time.Second) / rate)
		var wg sync.WaitGroup
		for i := range ops {
			tr := trs[i%clients]
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/charges/1", nil)
				req.Header.Set("X-Op", strconv.Itoa(i))
				resp, err := tr.RoundTrip(req)
				if err == nil {
					ok[i] = resp.StatusCode == http.StatusCreated
					resp.Body.Close()
				}
			})
			time.Sleep(gap)
		}
		wg.Wait()
		out.ok = make(map[int]bool, ops)
		for i, v := range ok {
			if v {
				out.ok[i] = true
			}
		}
		out.load = float64(srv.sent.Load()) / float64(ops)
	})
	return out
}

// TestHedgingDoesNoHarm is TestDefaultsDoNoHarm with hedging on, at its
// worst: every request is slower than the hedge delay, so every request
// would be hedged if the gate let it. No operation that a single attempt
// completes fails (a retryable answer from one copy waits for the other);
// hedges spend the retry tokens, so the load stays within what the tokens
// allow (Refill 0.5 per healthy answer) and, when everything fails, is as
// bounded as without hedging.
func TestHedgingDoesNoHarm(t *testing.T) {
	const ops = 4000
	hedging := resilient.WithHedging(resilient.HedgingConfig{Delay: 10 * time.Millisecond})
	for _, sc := range []struct {
		name    string
		clients int
	}{{"shared", 1}, {"small clients", 25}} {
		for _, p := range []float64{0, 0.1, 0.5, 1} {
			t.Run(fmt.Sprintf("%s/p=%.1f", sc.name, p), func(t *testing.T) {
				t.Parallel()
				none := runFatesGET(t, p, ops, sc.clients, 250, resilient.WithMaxAttempts(1))
				hedged := runFatesGET(t, p, ops, sc.clients, 250, hedging)
				harm := 0
				for i := range none.ok {
					if !hedged.ok[i] {
						harm++
					}
				}
				assert.Zero(t, harm, "operations a single attempt completes that hedging failed")
				t.Logf("none %.2f %% at load %.3f; hedging %.2f %% at load %.3f",
					100*float64(len(none.ok))/ops, none.load, 100*float64(len(hedged.ok))/ops, hedged.load)
				// Each healthy answer earns 0.5 token; hedges and retries
				// take one each, beyond what the buckets hold at the start.
				success := float64(len(hedged.ok)) / ops
				assert.LessOrEqual(t, hedged.load, 1+0.5*success+0.03, "no more hedges and retries than the tokens allow")
				if p == 1 {
					assert.LessOrEqual(t, hedged.load, 1.05, "load bounded when everything fails")
				}
			})
		}
	}
}
