package resilient

import (
	"math"
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
// step of the wall clock within clockRebase.
//
// Inside the Transport, times are Unix nanoseconds (nanos): the pauses,
// windows and buckets keep them so, and an int64 costs no time.Time
// arithmetic on the hot path. Durations between two of them are the
// monotonic clock's, except across a rebase that followed a step of the
// wall clock. now gives the time.Time of the same clock, for what leaves
// the Transport (records, errors, the classifier's Outcome). A clock is
// safe for concurrent use.
type clock struct {
	base atomic.Pointer[clockBase]
}

// clockBase is a time.Now result, with its monotonic reading, and its Unix
// nanoseconds.
type clockBase struct {
	t  time.Time
	ns int64
}

func newClock() *clock {
	c := &clock{}
	c.rebase()
	return c
}

// nanos returns the current time in Unix nanoseconds: now().UnixNano(),
// without building a time.Time.
func (c *clock) nanos() int64 {
	b := c.base.Load()
	if d := time.Since(b.t); d >= 0 && d < clockRebase {
		return b.ns + int64(d)
	}
	return c.rebase().ns
}

// now returns the current time.
func (c *clock) now() time.Time {
	b := c.base.Load()
	if d := time.Since(b.t); d >= 0 && d < clockRebase {
		return b.t.Add(d)
	}
	return c.rebase().t
}

// rebase reads the wall clock: once per clockRebase, and when the base is
// not of this clock (a Transport made outside a synctest bubble and used
// inside it).
func (c *clock) rebase() *clockBase {
	t := time.Now()
	b := &clockBase{t: t, ns: t.UnixNano()}
	c.base.Store(b)
	return b
}

// wall returns the time.Time of ns, Unix nanoseconds of a clock: a wall
// time, without a monotonic reading.
func wall(ns int64) time.Time { return time.Unix(0, ns) }

// later returns ns+d, Unix nanoseconds, saturated at the int64 limits: a
// server's delay can be anything.
func later(ns int64, d time.Duration) int64 {
	if s := ns + int64(d); (d > 0) == (s > ns) || d == 0 {
		return s
	}
	if d > 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}
