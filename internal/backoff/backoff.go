// Package backoff implements resilient's Backoff kinds (Exponential,
// FullJitter, EqualJitter, DecorrelatedJitter) and Seeded, which makes a
// jittered one reproducible for the tests and simulations of this
// repository (sim, bench).
package backoff

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Delayer is resilient.Backoff.
type Delayer interface {
	Delay(attempt int, prev time.Duration) time.Duration
}

// Kind is one of the four kinds of backoff.
type Kind uint8

// The kinds, as resilient's constructors of the same names.
const (
	Exponential Kind = iota
	FullJitter
	EqualJitter
	Decorrelated
)

var backoffNames = [...]string{
	Exponential:  "Exponential",
	FullJitter:   "FullJitter",
	EqualJitter:  "EqualJitter",
	Decorrelated: "DecorrelatedJitter",
}

// backoff implements the four kinds. Its fields are set by the
// constructor and never change, so Delay needs no lock except the one of a
// seeded source.
type backoff struct {
	kind Kind
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

// New returns a backoff of the given kind; base ≤ 0 means no wait and max <
// base is raised to base.
func New(kind Kind, base, max time.Duration) Delayer {
	if base <= 0 {
		base, max = 0, 0
	}
	if max < base {
		max = base
	}
	return &backoff{kind: kind, base: base, max: max}
}

// Seeded returns a copy of b that draws its randomness from a PCG generator
// seeded with seed, so that two copies made with the same seed return the same
// sequence of delays. The copy serialises Delay on a mutex: it is meant for
// tests and simulations, not for production traffic. b must be a Backoff
// returned by resilient's constructors; any other (including nil) is returned
// unchanged. b itself is not modified.
func Seeded(b Delayer, seed uint64) Delayer {
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

// Delay implements resilient.Backoff.
func (b *backoff) Delay(attempt int, prev time.Duration) time.Duration {
	if b.base == 0 {
		return 0
	}
	switch b.kind {
	case FullJitter:
		return b.rand(b.ceiling(attempt))
	case EqualJitter:
		v := b.ceiling(attempt)
		half := v / 2
		return v - half + b.rand(half)
	case Decorrelated:
		prev = min(max(prev, b.base), b.max)
		hi := time.Duration(math.MaxInt64)
		if prev <= math.MaxInt64/3 {
			hi = 3 * prev
		}
		return min(b.max, b.base+b.rand(hi-b.base))
	default: // Exponential
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
