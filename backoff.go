package resilient

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Backoff computes the wait before a retry. attempt is 1 for the first retry;
// prev is the previous delay (0 before the first retry).
//
// The package provides four kinds. With v = min(max, base·2^(attempt-1)):
//
//	Exponential(base, max)         v                                no jitter
//	FullJitter(base, max)          rand[0, v)                       the default
//	EqualJitter(base, max)         v/2 + rand[0, v/2)
//	DecorrelatedJitter(base, max)  min(max, rand[base, 3·prev))     prev < base counts as base
//
// The default, FullJitter(100ms, 2s), waits for:
//
//	attempt  1      2      3      4      5       6 and later
//	range    0–100  0–200  0–400  0–800  0–1600  0–2000 ms
//
// With the default of 4 attempts (3 retries) a failing operation waits at
// most 700 ms in total, 350 ms on average.
//
// A server-directed delay (Retry-After, or the RateLimit fields) is never
// shortened by jitter: the Transport waits max(Delay, server delay).
//
// All four are computed without overflow for any attempt (base·2^(attempt-1)
// saturates at max) and never return a negative duration. Inputs are
// normalised once by the constructor: base ≤ 0 gives a zero delay on every
// attempt, max < base is raised to base, and attempt < 1 counts as 1.
//
// Randomness comes from the top-level functions of math/rand/v2, which are
// safe for concurrent use, take no lock and do not allocate; Delay never
// allocates. For reproducible tests and simulations, Seeded returns a copy
// that draws from a seeded PCG instead. Every Backoff returned by this
// package is safe for concurrent use by multiple goroutines.
type Backoff interface {
	Delay(attempt int, prev time.Duration) time.Duration
}

type backoffKind uint8

const (
	kindExponential backoffKind = iota
	kindFullJitter
	kindEqualJitter
	kindDecorrelated
)

var backoffNames = [...]string{
	kindExponential:  "Exponential",
	kindFullJitter:   "FullJitter",
	kindEqualJitter:  "EqualJitter",
	kindDecorrelated: "DecorrelatedJitter",
}

// backoff implements the four kinds of Backoff. Its fields are set by the
// constructor and never change, so Delay needs no lock except the one of a
// seeded source.
type backoff struct {
	kind backoffKind
	base time.Duration // > 0, or 0 for "never wait"
	max  time.Duration // >= base
	src  *backoffRand  // nil: the top-level functions of math/rand/v2
}

// backoffRand is a seeded generator serialised by a mutex: *rand.Rand is not
// safe for concurrent use.
type backoffRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newBackoff(kind backoffKind, base, max time.Duration) Backoff {
	if base <= 0 {
		base, max = 0, 0
	}
	if max < base {
		max = base
	}
	return &backoff{kind: kind, base: base, max: max}
}

// Exponential returns a Backoff without jitter: base·2^(attempt-1), capped at
// max. It keeps many clients in lockstep, so prefer a jittered kind unless
// the delays must be predictable. base ≤ 0 means no wait; max < base is
// raised to base.
func Exponential(base, max time.Duration) Backoff {
	return newBackoff(kindExponential, base, max)
}

// FullJitter returns a Backoff that waits a uniformly random duration in
// [0, min(max, base·2^(attempt-1))). It spreads retries the most and is the
// default, as FullJitter(100*time.Millisecond, 2*time.Second). base ≤ 0
// means no wait; max < base is raised to base.
func FullJitter(base, max time.Duration) Backoff {
	return newBackoff(kindFullJitter, base, max)
}

// EqualJitter returns a Backoff that waits v/2 + rand[0, v/2) with
// v = min(max, base·2^(attempt-1)): at least half the exponential delay,
// spread over its upper half. base ≤ 0 means no wait; max < base is raised
// to base.
func EqualJitter(base, max time.Duration) Backoff {
	return newBackoff(kindEqualJitter, base, max)
}

// DecorrelatedJitter returns a Backoff that waits min(max, rand[base, 3·prev)),
// where prev is the previous delay and a prev below base (such as 0 before the
// first retry) counts as base; a prev above max counts as max. It ignores
// attempt: each delay grows from the last one. base ≤ 0 means no wait;
// max < base is raised to base.
func DecorrelatedJitter(base, max time.Duration) Backoff {
	return newBackoff(kindDecorrelated, base, max)
}

// Seeded returns a copy of b that draws its randomness from a PCG generator
// seeded with seed, so that two copies made with the same seed return the same
// sequence of delays. The copy serialises Delay on a mutex: it is meant for
// tests and simulations, not for production traffic. b must be a Backoff
// returned by this package; any other Backoff (including nil) is returned
// unchanged. b itself is not modified.
func Seeded(b Backoff, seed uint64) Backoff {
	bo, ok := b.(*backoff)
	if !ok || bo == nil {
		return b
	}
	c := *bo
	c.src = &backoffRand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	return &c
}

// String describes b, as in "FullJitter(100ms, 2s)".
func (b *backoff) String() string {
	return backoffNames[b.kind] + "(" + b.base.String() + ", " + b.max.String() + ")"
}

// Delay implements Backoff.
func (b *backoff) Delay(attempt int, prev time.Duration) time.Duration {
	if b.base == 0 {
		return 0
	}
	switch b.kind {
	case kindFullJitter:
		return b.rand(b.ceiling(attempt))
	case kindEqualJitter:
		v := b.ceiling(attempt)
		half := v / 2
		return v - half + b.rand(half)
	case kindDecorrelated:
		prev = min(max(prev, b.base), b.max)
		hi := time.Duration(math.MaxInt64)
		if prev <= math.MaxInt64/3 {
			hi = 3 * prev
		}
		return min(b.max, b.base+b.rand(hi-b.base))
	default: // kindExponential
		return b.ceiling(attempt)
	}
}

// ceiling returns min(max, base·2^(attempt-1)) without overflow. It requires
// base > 0.
func (b *backoff) ceiling(attempt int) time.Duration {
	n := max(attempt, 1) - 1
	// base<<n <= max  ⇔  base <= max>>n, and base<<n cannot overflow then.
	if n >= 63 || b.base > b.max>>uint(n) {
		return b.max
	}
	return b.base << uint(n)
}

// rand returns a uniformly random duration in [0, n), or 0 if n ≤ 0.
func (b *backoff) rand(n time.Duration) time.Duration {
	if n <= 0 {
		return 0
	}
	if b.src == nil {
		return time.Duration(rand.Int64N(int64(n)))
	}
	b.src.mu.Lock()
	v := b.src.r.Int64N(int64(n))
	b.src.mu.Unlock()
	return time.Duration(v)
}
