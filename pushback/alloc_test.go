package pushback_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/resilienthttp/resilient/pushback"
)

// noop is the handler of the allocation tests and benchmarks.
var noop = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

// TestAcceptPathAllocs checks that admitting a request allocates nothing:
// a first attempt (by header or by a new key), and a retry (by header or by
// a repeated key), with a no-op handler and a reused ResponseWriter. The
// key table's hash is maphash's, or seededHash with a Seed.
func TestAcceptPathAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	tests := []struct {
		name string
		req  *http.Request
		seed uint64
	}{
		{"first attempt", first(), 0},
		{"retry", retry("1"), 0},
		{"first attempt by key", request("Idempotency-Key", "a-new-key"), 0}, // each run after the first is a retry
		{"retry by key", request("Idempotency-Key", "k"), 0},
		{"first attempt by key, seeded", request("Idempotency-Key", "a-new-key"), 42},
		{"retry by key, seeded", request("Idempotency-Key", "k"), 42},
		{"no header", request(), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := pushback.New(pushback.Config{Ratio: 1000, MaxInFlight: 100, Seed: tt.seed})
			h := b.Middleware(noop)
			w := newNopWriter()
			allocs := testing.AllocsPerRun(1000, func() {
				w.reset()
				h.ServeHTTP(w, tt.req)
			})
			if allocs != 0 {
				t.Errorf("%v allocations per request, want 0", allocs)
			}
			if st := b.Stats(); st.RetriesShed+st.FirstAttemptsShed != 0 {
				t.Errorf("shed %d retries and %d first attempts, want every request admitted", st.RetriesShed, st.FirstAttemptsShed)
			}
		})
	}
}

// TestHintPathAllocs checks that adding pushback to a failure answer, and
// refusing a retry, allocate nothing either, with Retry-After drawn from
// math/rand/v2 or from a Seed.
func TestHintPathAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	for _, seed := range []uint64{0, 42} {
		b := pushback.New(pushback.Config{Ratio: -1, MinPerSecond: -1, Seed: seed})
		fail := b.Middleware(status(http.StatusServiceUnavailable))
		w := newNopWriter()
		r1, r2 := first(), retry("1")
		for name, req := range map[string]*http.Request{"hinted failure": r1, "refused retry": r2} {
			allocs := testing.AllocsPerRun(1000, func() {
				w.reset()
				fail.ServeHTTP(w, req)
			})
			if allocs != 0 {
				t.Errorf("seed %d, %s: %v allocations per request, want 0", seed, name, allocs)
			}
			if w.h.Get("X-Should-Retry") != "false" {
				t.Errorf("seed %d, %s: no pushback", seed, name)
			}
		}
	}
}

// BenchmarkServeHTTP measures the middleware around a no-op handler, on
// every core at once.
func BenchmarkServeHTTP(b *testing.B) {
	cases := []struct {
		name string
		req  func() *http.Request
		cfg  pushback.Config
	}{
		{"first", first, pushback.Config{}},
		{"retry", func() *http.Request { return retry("1") }, pushback.Config{Ratio: 1e9}},
		{"refused", func() *http.Request { return retry("1") }, pushback.Config{Ratio: -1, MinPerSecond: -1}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			bud := pushback.New(c.cfg)
			h := bud.Middleware(noop)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w, r := newNopWriter(), c.req()
				for pb.Next() {
					w.reset()
					h.ServeHTTP(w, r)
				}
			})
		})
	}
	// Requests without Retry-Attempt, told apart by their keys: each
	// goroutine cycles through 1,024 keys of its own (after the first
	// round, each is a retry by key).
	b.Run("key", func(b *testing.B) {
		bud := pushback.New(pushback.Config{Ratio: 1e9})
		h := bud.Middleware(noop)
		var goroutines atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			g := goroutines.Add(1)
			reqs := make([]*http.Request, 1024)
			for i := range reqs {
				reqs[i] = request("Idempotency-Key", fmt.Sprintf("0190b3a4-6c1e-7d2a-%04x-%012x", g, i))
			}
			w := newNopWriter()
			for i := 0; pb.Next(); i++ {
				w.reset()
				h.ServeHTTP(w, reqs[i%len(reqs)])
			}
		})
	})
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			w, r := newNopWriter(), first()
			for pb.Next() {
				w.reset()
				noop.ServeHTTP(w, r)
			}
		})
	})
}
