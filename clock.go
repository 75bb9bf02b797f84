package resilient

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// clockRebase is how often a clock reads the wall clock again. It is at
// most a second: addWithinSecond adds less than one.
const clockRebase = time.Second

// A clockRebase over a second does not compile.
const _ = uint64(time.Second - clockRebase)

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
		if fieldsChecked {
			if t, ok := addWithinSecond(b, d); ok {
				return t
			}
		}
		return b.Add(d)
	}
	// Once per clockRebase; also when the base is not of this clock
	// (a Transport made outside a synctest bubble and used inside it).
	t := time.Now()
	c.base.Store(&t)
	return t
}

// timeFields is the layout of a time.Time: its wall clock (a flag for a
// monotonic reading, 33 bits of seconds since 1885 and 30 bits of
// nanoseconds), its monotonic reading, and its location. See the time
// package's Time.
type timeFields struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

const (
	wallMonotonic = 1 << 63
	wallNsecBits  = 30
	wallNsecMask  = 1<<wallNsecBits - 1
)

// fieldsChecked is true once the package's start has checked that
// addWithinSecond's results are time.Time.Add's (checkTimeFields). When
// they are not (a Go release that lays out a time.Time otherwise), the
// clock calls Add.
var fieldsChecked = checkTimeFields()

// addWithinSecond returns b.Add(d) for a d in [0, 1 s), which the caller
// ensures, and a b with a monotonic reading. It computes it as Add does,
// without Add's general case: the nanoseconds carry at most one second,
// and both readings move by d. It reports false where that does not apply
// (no monotonic reading, the seconds field full): the caller then calls
// Add. It runs a fifth of Add's instructions. Only for a time.Time laid
// out as timeFields, which checkTimeFields checks (fieldsChecked).
func addWithinSecond(b *time.Time, d time.Duration) (time.Time, bool) {
	f := (*timeFields)(unsafe.Pointer(b))
	if f.wall&wallMonotonic == 0 {
		return time.Time{}, false
	}
	nsec := f.wall&wallNsecMask + uint64(d)
	sec := f.wall &^ wallMonotonic >> wallNsecBits
	if nsec >= uint64(time.Second) {
		nsec -= uint64(time.Second)
		if sec++; sec >= 1<<33 {
			return time.Time{}, false // Add moves the seconds out of the wall clock
		}
	}
	t := timeFields{wallMonotonic | sec<<wallNsecBits | nsec, f.ext + int64(d), f.loc}
	return *(*time.Time)(unsafe.Pointer(&t)), true
}

// checkTimeFields reports whether addWithinSecond gives Add's results, field for
// field. It checks the size of a time.Time, then sums of this process's
// clock: now, and around the edge of a second.
func checkTimeFields() bool {
	if unsafe.Sizeof(time.Time{}) != unsafe.Sizeof(timeFields{}) {
		return false
	}
	now := time.Now()
	edge := now.Add(time.Second - time.Duration(now.Nanosecond()) - 1) // a nanosecond before a second
	for _, b := range []time.Time{now, edge, edge.Add(1)} {
		for _, d := range []time.Duration{0, 1, 2, time.Millisecond, time.Second/2 + 7, time.Second - 1} {
			if got, ok := addWithinSecond(&b, d); !ok || got != b.Add(d) {
				return false
			}
		}
	}
	return true
}
