package resilient_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
)

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
				none := runFatesMethod(t, http.MethodGet, p, ops, sc.clients, 250, resilient.WithMaxAttempts(1))
				hedged := runFatesMethod(t, http.MethodGet, p, ops, sc.clients, 250, hedging)
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
