package redisbudget_test

import (
	"testing"
	"time"

	"github.com/resilienthttp/resilient/redisbudget"
)

// The hot path: a first attempt, and a retry served from the lease (or
// refused), from many goroutines; no Redis call on the caller's goroutine.
func BenchmarkDeposit(b *testing.B) {
	f := redisbudget.NewWithBackend(redisbudget.NewMemory(), redisbudget.Config{FlushEvery: 1 << 30})
	defer f.Close()
	bg := f.For("h")
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bg.DepositAt(now)
		}
	})
}

func BenchmarkWithdraw(b *testing.B) {
	f := redisbudget.NewWithBackend(redisbudget.NewMemory(), redisbudget.Config{})
	defer f.Close()
	bg := f.For("h")
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if bg.WithdrawAt(now) {
				bg.RefundAt(now)
			}
		}
	})
}
