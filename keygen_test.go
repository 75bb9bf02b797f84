package resilient_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/resilienthttp/resilient"
)

// BenchmarkNewKey measures key minting. The "randpool" variant turns on
// uuid.EnableRandPool, a process-wide switch of github.com/google/uuid that
// batches crypto/rand reads; resilient does not turn it on (it is global
// state that belongs to the application), and this benchmark shows what an
// application that does would gain.
func BenchmarkNewKey(b *testing.B) {
	b.Run("default", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := resilient.NewKey(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("default-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resilient.NewKey()
			}
		})
	})
	b.Run("randpool", func(b *testing.B) {
		uuid.EnableRandPool()
		defer uuid.DisableRandPool()
		b.ReportAllocs()
		for b.Loop() {
			resilient.NewKey()
		}
	})
	b.Run("randpool-parallel", func(b *testing.B) {
		uuid.EnableRandPool()
		defer uuid.DisableRandPool()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resilient.NewKey()
			}
		})
	})
}
