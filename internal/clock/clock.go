// Package clock is a Transport's source of the current time: one monotonic
// clock read per call, where time.Now makes two.
package clock

import (
	"math"
	"sync/atomic"
	"time"
)

// Rebase is how often a Clock reads the wall clock again.
const Rebase = time.Second

// Clock is a Transport's source of the current time. It makes one
// monotonic clock read per call, where time.Now makes two: the wall clock
// and the monotonic clock. Those are two vDSO reads, about 25 ns each on a
// 2-core VM (BenchmarkClock).
//
// The wall time it returns is that of the last time.Now, at most Rebase
// ago, plus the monotonic time elapsed since. So it follows a step of the
// wall clock within Rebase.
//
// Inside the Transport, times are Unix nanoseconds (Nanos): the pauses,
// windows and buckets keep them so, and an int64 costs no time.Time
// arithmetic on the hot path. Durations between two of them are the
// monotonic clock's, except across a rebase that followed a step of the
// wall clock. Now gives the time.Time of the same clock, for what leaves
// the Transport (records, errors, the classifier's Outcome). A Clock is
// safe for concurrent use.
type Clock struct {
	base atomic.Pointer[base]
}

// base is a time.Now result, with its monotonic reading, and its Unix
// nanoseconds.
type base struct {
	t  time.Time
	ns int64
}

// New returns a Clock, read once.
func New() *Clock {
	c := &Clock{}
	c.rebase()
	return c
}

// Nanos returns the current time in Unix nanoseconds: Now().UnixNano(),
// without building a time.Time.
func (c *Clock) Nanos() int64 {
	b := c.base.Load()
	if d := time.Since(b.t); d >= 0 && d < Rebase {
		return b.ns + int64(d)
	}
	return c.rebase().ns
}

// Now returns the current time.
func (c *Clock) Now() time.Time {
	b := c.base.Load()
	if d := time.Since(b.t); d >= 0 && d < Rebase {
		return b.t.Add(d)
	}
	return c.rebase().t
}

// rebase reads the wall clock: once per Rebase, and when the base is not
// of this clock (a Transport made outside a synctest bubble and used
// inside it).
func (c *Clock) rebase() *base {
	t := time.Now()
	b := &base{t: t, ns: t.UnixNano()}
	c.base.Store(b)
	return b
}

// Wall returns the time.Time of ns, Unix nanoseconds of a Clock: a wall
// time, without a monotonic reading.
func Wall(ns int64) time.Time { return time.Unix(0, ns) }

// Later returns ns+d, Unix nanoseconds, saturated at the int64 limits: a
// server's delay can be anything.
func Later(ns int64, d time.Duration) int64 {
	if s := ns + int64(d); (d > 0) == (s > ns) || d == 0 {
		return s
	}
	if d > 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}
