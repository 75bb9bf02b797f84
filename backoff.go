package resilient

import (
	"time"

	"github.com/resilienthttp/resilient/internal/backoff"
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
// most 700 ms in total, 350 ms on average. A server-directed delay is never
// shortened by jitter. Every Backoff returned by this package is safe for
// concurrent use by multiple goroutines. Most callers should keep the
// default.
type Backoff interface {
	// Delay returns the wait before the retry numbered attempt. The
	// Transport waits max(Delay, server delay); a server-directed delay is
	// Retry-After or the RateLimit fields.
	//
	// The package's four kinds compute it without overflow for any attempt:
	// base·2^(attempt-1) saturates at max. They never return a negative
	// duration. Their constructors normalise inputs once. base ≤ 0 gives a
	// zero delay on every attempt, max < base is raised to base, and
	// attempt < 1 counts as 1. Their randomness comes from the top-level
	// functions of math/rand/v2. Those are safe for concurrent use, take no
	// lock and do not allocate. Their Delay never allocates.
	Delay(attempt int, prev time.Duration) time.Duration
}

// Exponential returns a Backoff without jitter: base·2^(attempt-1), capped at
// max. It keeps many clients in lockstep, so prefer a jittered kind unless
// the delays must be predictable. base ≤ 0 means no wait; max < base is
// raised to base.
func Exponential(base, max time.Duration) Backoff {
	return backoff.New(backoff.Exponential, base, max)
}

// FullJitter returns a Backoff that waits a uniformly random duration in
// [0, min(max, base·2^(attempt-1))). It spreads retries the most and is the
// default, as FullJitter(100*time.Millisecond, 2*time.Second). base ≤ 0
// means no wait; max < base is raised to base.
func FullJitter(base, max time.Duration) Backoff {
	return backoff.New(backoff.FullJitter, base, max)
}

// EqualJitter returns a Backoff that waits v/2 + rand[0, v/2) with
// v = min(max, base·2^(attempt-1)): at least half the exponential delay,
// spread over its upper half. base ≤ 0 means no wait; max < base is raised
// to base.
func EqualJitter(base, max time.Duration) Backoff {
	return backoff.New(backoff.EqualJitter, base, max)
}

// DecorrelatedJitter returns a Backoff that waits min(max, rand[base, 3·prev)).
// prev is the previous delay. A prev below base (such as 0 before the first
// retry) counts as base; a prev above max counts as max. It ignores attempt:
// each delay grows from the last one. base ≤ 0 means no wait; max < base is
// raised to base.
func DecorrelatedJitter(base, max time.Duration) Backoff {
	return backoff.New(backoff.Decorrelated, base, max)
}
