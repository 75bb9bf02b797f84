package clock

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestClock: the clock's time is time.Now's, read once per call from the
// monotonic clock; it reads the wall clock again after Rebase, and a
// Clock made outside a synctest bubble gives the bubble's time inside it.
func TestClock(t *testing.T) {
	outside := New()
	synctest.Test(t, func(t *testing.T) {
		assert.True(t, outside.Now().Equal(time.Now()), "a clock from outside the bubble rebases")
		c := New()
		base := c.base.Load()
		for _, step := range []time.Duration{0, time.Millisecond, 300 * time.Millisecond, Rebase / 2} {
			time.Sleep(step)
			assert.True(t, c.Now().Equal(time.Now()))
			assert.Equal(t, time.Now().UnixNano(), c.Nanos(), "nanos is now's Unix nanoseconds")
		}
		assert.Same(t, base, c.base.Load(), "no wall-clock read within Rebase")
		time.Sleep(Rebase)
		now := c.Now()
		assert.True(t, now.Equal(time.Now()))
		assert.NotSame(t, base, c.base.Load(), "the wall clock read again")
		later := c.Now()
		assert.False(t, later.Before(now))
		assert.Equal(t, outside.Nanos(), time.Now().UnixNano(), "nanos rebases as now does")
	})
}

// TestLater: a time plus a server's delay saturates instead of wrapping.
func TestLater(t *testing.T) {
	for _, tt := range []struct {
		name string
		ns   int64
		d    time.Duration
		want int64
	}{
		{"plain", 1_000, 500, 1_500},
		{"zero delay", math.MaxInt64, 0, math.MaxInt64},
		{"negative delay", 1_000, -500, 500},
		{"past the end", time.Now().UnixNano(), math.MaxInt64, math.MaxInt64},
		{"before the start", -1_000, math.MinInt64, math.MinInt64},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Later(tt.ns, tt.d))
		})
	}
}

// BenchmarkClock compares the Transport's clock with time.Now.
func BenchmarkClock(b *testing.B) {
	c := New()
	b.Run("clock", func(b *testing.B) {
		for b.Loop() {
			c.Now()
		}
	})
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			time.Now()
		}
	})
}

// TestClockDoesNotAllocate: reading the clock allocates nothing.
func TestClockDoesNotAllocate(t *testing.T) {
	c := New()
	assert.Zero(t, testing.AllocsPerRun(100, func() { c.Now() }), "Now")
	assert.Zero(t, testing.AllocsPerRun(100, func() { c.Nanos() }), "Nanos")
}
