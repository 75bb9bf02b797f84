package resilient

import (
	"sync/atomic"
	"time"
)

// clockRebase is how often a clock reads the wall clock again.
const clockRebase = time.Second

// clock is a Transport's source of the current time. It makes one
// monotonic clock read per call, where time.Now makes two: the wall clock
// and the monotonic clock. Those are two vDSO reads, about 25 ns each on a
// 2-core VM (BenchmarkClock).
//
// The wall time it returns is that of the last time.Now, at most
// clockRebase ago, plus the monotonic time elapsed since. So it follows a
// step of the wall clock within clockRebase. The monotonic readings of its
// times are the monotonic clock's. The Transport compares those: deadlines,
// pauses, durations. A clock is safe for concurrent use.
type clock struct {
	base atomic.Pointer[time.Time] // a time.Now result, with its monotonic reading
}

func newClock() *clock {
	c := &clock{}
	t := time.Now()
	c.base.Store(&t)
	return c
}

// now returns the current time.
func (c *clock) now() time.Time {
	b := c.base.Load()
	if d := time.Since(*b); d >= 0 && d < clockRebase {
		return b.Add(d)
	}
	// Once per clockRebase; also when the base is not of this clock
	// (a Transport made outside a synctest bubble and used inside it).
	t := time.Now()
	c.base.Store(&t)
	return t
}
