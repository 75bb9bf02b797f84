package persisttest

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resilienthttp/resilient/persist"
)

// Benchmark measures new claims (every claim a distinct operation) at
// concurrency 1 and 64, as sub-benchmarks "conc=1" and "conc=64". Each
// reports claims/s besides the usual ns/op (per claim) and allocations.
// newStore is called once per run of a sub-benchmark and must return an empty
// Store; it should register cleanup with b.Cleanup.
func Benchmark(b *testing.B, newStore func(b *testing.B) persist.Store) {
	for _, conc := range []int{1, 64} {
		b.Run("conc="+strconv.Itoa(conc), func(b *testing.B) {
			benchmarkClaim(b, newStore(b), conc)
		})
	}
}

// benchmarkClaim makes b.N claims of distinct operations from conc goroutines.
func benchmarkClaim(b *testing.B, s persist.Store, conc int) {
	ctx := b.Context()
	created := time.Now()
	var next atomic.Int64
	var failed atomic.Pointer[error]
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				id := strconv.FormatInt(i, 10)
				_, claimed, err := s.Claim(ctx, persist.Record{
					Operation:   "bench:" + id,
					Key:         "key-" + id,
					Fingerprint: "fp",
					Created:     created,
				})
				if err == nil && !claimed {
					err = errors.New("persisttest: operation " + id + " was already claimed")
				}
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
}
