package bench

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/google/uuid"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/retrycontrol"
)

// The root package benchmarks each of its mechanisms alone (BenchmarkBudget,
// BenchmarkBackoff, BenchmarkNewKey, BenchmarkTransport). These put them next
// to the alternatives a user weighs: the peers' equivalents, and the paths a
// storm takes (a budget that refuses, a caller-chosen key).

// BenchmarkRetryBudget measures asking a retry budget for permission.
//
//   - resilient/refused: Withdraw on an exhausted budget, the path every
//     failed request takes during a storm.
//   - resilient/traffic-parallel: GOMAXPROCS goroutines each doing what a
//     Transport does per request at a 20 % failure rate: one Deposit, and
//     one Withdraw every fifth request.
//   - failsafe/permit and failsafe/permit-parallel: failsafe-go's budget
//     (a cap on the fraction of in-flight executions that are retries, not a
//     rolling window): TryAcquirePermit and ReleasePermit, the methods its
//     retry policy calls (public on the concrete type, hidden by the
//     budget.Budget interface).
func BenchmarkRetryBudget(b *testing.B) {
	b.Run("resilient/refused", func(b *testing.B) {
		bu := retrycontrol.NewBudget(retrycontrol.BudgetConfig{Ratio: 0.2, Window: 10 * time.Second})
		for bu.Withdraw() {
		}
		b.ReportAllocs()
		for b.Loop() {
			if bu.Withdraw() {
				b.Fatal("an exhausted budget allowed a retry")
			}
		}
	})
	b.Run("resilient/traffic-parallel", func(b *testing.B) {
		bu := retrycontrol.NewBudget(retrycontrol.DefaultBudgetConfig())
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				bu.Deposit()
				if i%5 == 0 {
					bu.Withdraw()
				}
			}
		})
	})
	b.Run("failsafe/permit", func(b *testing.B) {
		bu := failsafeBudget(b)
		b.ReportAllocs()
		for b.Loop() {
			if bu.TryAcquirePermit() {
				bu.ReleasePermit()
			}
		}
	})
	b.Run("failsafe/permit-parallel", func(b *testing.B) {
		bu := failsafeBudget(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if bu.TryAcquirePermit() {
					bu.ReleasePermit()
				}
			}
		})
	})
}

// permits is the part of failsafe-go's budget its retry policy uses.
type permits interface {
	TryAcquirePermit() bool
	ReleasePermit()
}

func failsafeBudget(b *testing.B) permits {
	p, ok := budget.New().(permits)
	if !ok {
		b.Skip("failsafe-go's budget no longer has TryAcquirePermit and ReleasePermit")
	}
	return p
}

// BenchmarkBackoffSchedule computes the delays of a whole failing operation,
// three retries, with each library's backoff: resilient's kinds at the SDK's
// default base and cap, and go-retryablehttp's two Backoff functions at its
// defaults (1 s to 30 s). failsafe-go computes its delays inside its retry
// executor and exports no function to time alone.
func BenchmarkBackoffSchedule(b *testing.B) {
	const base, cap = 100 * time.Millisecond, 2 * time.Second
	for _, bo := range []struct {
		name string
		b    resilient.Backoff
	}{
		{"resilient/Exponential", resilient.Exponential(base, cap)},
		{"resilient/FullJitter", resilient.FullJitter(base, cap)},
		{"resilient/EqualJitter", resilient.EqualJitter(base, cap)},
		{"resilient/DecorrelatedJitter", resilient.DecorrelatedJitter(base, cap)},
	} {
		b.Run(bo.name, func(b *testing.B) {
			b.ReportAllocs()
			var sink time.Duration
			for b.Loop() {
				prev := time.Duration(0)
				for attempt := 1; attempt <= 3; attempt++ {
					prev = bo.b.Delay(attempt, prev)
					sink += prev
				}
			}
			_ = sink
		})
	}
	// A failed attempt's response, as retryablehttp's Backoff receives it.
	resp := &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}}
	for _, bo := range []struct {
		name string
		f    retryablehttp.Backoff
	}{
		{"retryablehttp/DefaultBackoff", retryablehttp.DefaultBackoff},
		{"retryablehttp/LinearJitterBackoff", retryablehttp.LinearJitterBackoff},
	} {
		b.Run(bo.name, func(b *testing.B) {
			b.ReportAllocs()
			var sink time.Duration
			for b.Loop() {
				for attempt := 0; attempt < 3; attempt++ {
					sink += bo.f(time.Second, 30*time.Second, attempt, resp)
				}
			}
			_ = sink
		})
	}
}

// BenchmarkKey compares the ways a keyed POST gets its key: minting one
// (resilient's UUIDv7 against a UUIDv4), validating a caller's key, and a
// POST through the Transport (over the stub) with a key it mints, a key from
// ContextWithKey, and a key already in the header.
func BenchmarkKey(b *testing.B) {
	b.Run("mint/uuidv7-NewKey", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := resilient.NewKey(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mint/uuidv4", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = uuid.NewString()
		}
	})
	b.Run("validate", func(b *testing.B) {
		k, _ := resilient.NewKey()
		b.ReportAllocs()
		for b.Loop() {
			if err := resilient.ValidateKey(k); err != nil {
				b.Fatal(err)
			}
		}
	})
	tr := resilient.NewTransport(stubTransport{})
	post := func(b *testing.B, ctx context.Context, header string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/v1/charges", http.NoBody)
		if err != nil {
			b.Fatal(err)
		}
		if header != "" {
			req.Header.Set(resilient.DefaultKeyHeader, header)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	b.Run("transport/minted", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			post(b, context.Background(), "")
		}
	})
	b.Run("transport/context-key", func(b *testing.B) {
		ctx := resilient.ContextWithKey(context.Background(), "order-4711:charge")
		b.ReportAllocs()
		for b.Loop() {
			post(b, ctx, "")
		}
	})
	b.Run("transport/header-key", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			post(b, context.Background(), "order-4711:charge")
		}
	})
}
