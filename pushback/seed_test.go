package pushback_test

import (
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/resilienthttp/resilient/pushback"
)

// answersTo serves a fixed sequence of requests, without attempt headers,
// one a millisecond of a synctest bubble's clock, to a fresh middleware
// configured by cfg over a handler that always fails, and returns each
// answer: the status, the Retry-After, and whether the middleware refused it
// (a retry by key) or the handler answered it (a first attempt). The budget
// is 0, so every answer draws a Retry-After; the key table has 4 slots and
// the requests cycle through 5 keys (a new 5 every 50 requests), so which
// keys evict one another depends on the hash.
func answersTo(t *testing.T, cfg pushback.Config) []string {
	cfg.Ratio, cfg.MinPerSecond, cfg.KeySlots = -1, -1, 4
	var out []string
	synctest.Test(t, func(*testing.T) {
		b := pushback.New(cfg)
		h := b.Middleware(status(http.StatusInternalServerError))
		for i := range 400 {
			time.Sleep(time.Millisecond)
			w := serve(h, request("Idempotency-Key", fmt.Sprintf("key-%d", i%5+5*(i/50))))
			out = append(out, fmt.Sprintf("%d %s refused=%t", w.status, w.h.Get("Retry-After"), refused(w)))
		}
	})
	return out
}

// TestSeedReplays checks Config.Seed: a fixed seed gives the same answers
// to the same requests, a different seed different ones, and the default
// (0) a random seed per Budget.
func TestSeedReplays(t *testing.T) {
	a, again := answersTo(t, pushback.Config{Seed: 7}), answersTo(t, pushback.Config{Seed: 7})
	assert.Equal(t, a, again, "seed 7 twice")
	assert.NotEqual(t, a, answersTo(t, pushback.Config{Seed: 8}), "seeds 7 and 8")
	// 400 draws of Retry-After between 1 and 2: two random Budgets agree by
	// chance with probability 2⁻⁴⁰⁰.
	assert.NotEqual(t, answersTo(t, pushback.Config{}), answersTo(t, pushback.Config{}), "two random seeds")

	// Both kinds of answer and both Retry-After values occur: the sequence
	// exercises the key table and the draw.
	kinds := map[string]bool{}
	for _, s := range a {
		kinds[s] = true
	}
	assert.Len(t, kinds, 4, "answers: %v", kinds)
}

// TestSeededDrawIgnoresOrder checks that with a Seed, the Retry-After of
// answers written at one instant depends on their keys, not on their order:
// the order of goroutines woken at one instant is the runtime's.
func TestSeededDrawIgnoresOrder(t *testing.T) {
	drawn := func(reverse bool) map[string]string {
		got := map[string]string{}
		synctest.Test(t, func(*testing.T) {
			b := pushback.New(pushback.Config{Ratio: -1, MinPerSecond: -1, Seed: 3})
			h := b.Middleware(status(http.StatusOK))
			for i := range 50 {
				if reverse {
					i = 49 - i
				}
				key := fmt.Sprint("key-", i)
				got[key] = serve(h, request("Retry-Attempt", "1", "Idempotency-Key", key)).h.Get("Retry-After")
			}
		})
		return got
	}
	forward := drawn(false)
	assert.Equal(t, forward, drawn(true))
	values := map[string]bool{}
	for _, ra := range forward {
		values[ra] = true
	}
	assert.Equal(t, map[string]bool{"1": true, "2": true}, values)
}
