package resilient

import (
	"time"

	"github.com/sony/gobreaker/v2"
)

// BreakerState is the state of a host's circuit breaker.
type BreakerState uint8

// Breaker states.
const (
	BreakerClosed BreakerState = iota
	BreakerHalfOpen
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return "unknown"
}

// CircuitBreaker is a retry control (see WithRetryControl): a classic
// circuit breaker per destination host, built on
// github.com/sony/gobreaker/v2's TwoStepCircuitBreaker. A Transport has none
// by default. The zero value is the default breaker: every zero field means
// its documented default. It trips at a failure ratio of 0.5 over at least
// 20 requests in a 10 s window. It stays open 5 s, then lets 1 probe
// through.
//
// Failures are 5xx other than 501 and 505, timeouts, resets, refused
// connections, and a 429 without Retry-After. Successes and 4xx answers
// count as successes. Neither counts: a 409 "in progress" (the operation is
// busy, not the host), a 429 with Retry-After (the host pause handles it), a
// local refusal, a cancelled caller. While open, a request fails at once
// with ErrCircuitOpen, unsent. After OpenTimeout it lets HalfOpenProbes
// requests through; that many successes close it, one failure opens it.
//
// A classic breaker sheds load from an overloaded dependency. But while
// open it also fails requests that a single attempt might have got
// through. RetriesOnly sheds retries and never refuses a first attempt.
type CircuitBreaker struct {
	// FailureRatio trips the breaker when failures ÷ requests in the window
	// reach it (default 0.5; a value ≤ 0 or > 1 means the default).
	FailureRatio float64
	// MinRequests is the number of requests in the window below which the
	// breaker never trips (default 20).
	MinRequests uint32
	// Window is the rolling period over which requests are counted while
	// closed, in 10 buckets (default 10 s).
	Window time.Duration
	// OpenTimeout is how long the breaker stays open before letting probes
	// through (default 5 s).
	OpenTimeout time.Duration
	// HalfOpenProbes is how many requests may be in flight while half-open,
	// and how many successes close the breaker (default 1).
	HalfOpenProbes uint32
	// RetriesOnly makes an open breaker refuse retries only. First attempts
	// are always sent, and counted while the breaker admits them. The
	// breaker can then no longer shed the host's first-attempt load. But it
	// never makes a request fail that a single attempt would have got
	// through. Brooker describes the trade-off in "Fixing retries with
	// token buckets and circuit breakers" (2022). Default false: an open
	// breaker refuses every request, without sending it.
	RetriesOnly bool
}

// defaultBreaker is what CircuitBreaker's zero fields mean.
var defaultBreaker = CircuitBreaker{FailureRatio: 0.5, MinRequests: 20, Window: 10 * time.Second, OpenTimeout: 5 * time.Second, HalfOpenProbes: 1}

// resolved returns s with its zero fields set to their defaults.
func (s CircuitBreaker) resolved() CircuitBreaker {
	d := defaultBreaker
	if s.FailureRatio <= 0 || s.FailureRatio > 1 {
		s.FailureRatio = d.FailureRatio
	}
	if s.MinRequests == 0 {
		s.MinRequests = d.MinRequests
	}
	if s.Window <= 0 {
		s.Window = d.Window
	}
	if s.OpenTimeout <= 0 {
		s.OpenTimeout = d.OpenTimeout
	}
	if s.HalfOpenProbes == 0 {
		s.HalfOpenProbes = d.HalfOpenProbes
	}
	return s
}

func fromGobreaker(s gobreaker.State) BreakerState {
	switch s {
	case gobreaker.StateOpen:
		return BreakerOpen
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	}
	return BreakerClosed
}
