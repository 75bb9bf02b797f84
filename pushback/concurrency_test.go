package pushback_test

import (
	"math"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"

	"github.com/resilienthttp/resilient/pushback"
)

// TestBudgetUnderConcurrency has many goroutines send first attempts and
// retries at once and checks exact totals: every request counted once, and
// exactly the allowance of retries admitted (the check and the count are
// one compare-and-swap, so goroutines admitted together cannot overshoot).
// The bubble's clock stands still while they run: one window.
func TestBudgetUnderConcurrency(t *testing.T) {
	const (
		goroutines = 32
		each       = 500
	)
	tests := []struct {
		name string
		cfg  pushback.Config
	}{
		{"defaults", pushback.Config{}},
		{"small ratio", pushback.Config{Ratio: 0.1, MinPerSecond: 2}},
		{"one bucket", pushback.Config{Buckets: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := pushback.New(tt.cfg)
				// First attempts succeed, retries fail: the allowance is
				// set by the first attempts alone.
				h := b.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Header.Get("Retry-Attempt") != "0" {
						w.WriteHeader(http.StatusServiceUnavailable)
					}
				}))
				var wg sync.WaitGroup
				for range goroutines {
					wg.Go(func() {
						for range each {
							serve(h, first())
						}
					})
				}
				wg.Wait()
				var shedBy sync.Map
				for g := range goroutines {
					wg.Go(func() {
						n := 0
						for range each {
							if refused(serve(h, retry("1"))) {
								n++
							}
						}
						shedBy.Store(g, n)
					})
				}
				wg.Wait()
				shed := 0
				shedBy.Range(func(_, v any) bool { shed += v.(int); return true })

				st := b.Stats()
				firsts := uint64(goroutines * each)
				assert.Equal(t, firsts, st.FirstAttempts)
				assert.Equal(t, firsts, st.Healthy)
				assert.Equal(t, firsts, st.WindowHealthy)
				assert.Equal(t, uint64(goroutines*each), st.Retries)
				assert.Equal(t, uint64(shed), st.RetriesShed)
				want := uint64(math.Ceil(st.Allowance))
				assert.Equal(t, want, st.RetriesAdmitted(), "allowance %v", st.Allowance)
				assert.Equal(t, want, st.WindowRetries)
				assert.Equal(t, st.RetriesAdmitted(), st.Failures)
				assert.Zero(t, st.InFlight)
			})
		})
	}
}

// TestBudgetRaceMixed runs first attempts, retries and Stats together under
// the race detector, in real time, and checks the totals add up.
func TestBudgetRaceMixed(t *testing.T) {
	b := pushback.New(pushback.Config{MaxInFlight: 8})
	h := b.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Fail") != "" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				switch (g + i) % 3 {
				case 0:
					serve(h, first())
				case 1:
					serve(h, request("Retry-Attempt", "2", "Fail", "1"))
				default:
					_ = b.Stats()
				}
			}
		})
	}
	wg.Wait()
	st := b.Stats()
	assert.Equal(t, uint64(1600), st.FirstAttempts+st.Retries)
	assert.Equal(t, st.FirstAttempts-st.FirstAttemptsShed+st.RetriesAdmitted(), st.Healthy+st.Failures)
	assert.Zero(t, st.InFlight)
}
