package fakeserver

import (
	"errors"
	"math"
	"time"
)

// LatencyDist is a route's distribution of latency: how long each request
// waits before it is served (or fails), drawn per request like its fate
// (Route.Draw), so that the same seed gives the same latencies. It is
// log-normal with median Median and shape Sigma (the standard deviation of
// the latency's natural logarithm), and with probability SlowRate a request
// is SlowFactor times slower: a slow tail, as from a pause, a cold cache or
// a slow replica. "2 % of requests 20× slower" is SlowRate 0.02,
// SlowFactor 20.
//
// The wait comes on top of a Fault's Latency and, with a Capacity, holds
// the request's slot like its service time.
type LatencyDist struct {
	// Median is the median latency of a request that is not slow.
	Median Duration `json:"median"`
	// Sigma is the log-normal shape; 0 makes every request that is not
	// slow take Median. Must be in [0, 3].
	Sigma float64 `json:"sigma,omitempty"`
	// SlowRate is the probability, in [0, 1], that a request is slow.
	SlowRate float64 `json:"slow_rate,omitempty"`
	// SlowFactor multiplies a slow request's latency; 0 means 1. Must be
	// 0 or at least 1.
	SlowFactor float64 `json:"slow_factor,omitempty"`
}

func (l *LatencyDist) validate() error {
	switch {
	case l.Median < 0:
		return errors.New("median must not be negative")
	case !(l.Sigma >= 0 && l.Sigma <= 3):
		return errors.New("sigma must be in [0, 3]")
	case !(l.SlowRate >= 0 && l.SlowRate <= 1):
		return errors.New("slow_rate must be in [0, 1]")
	case !(l.SlowFactor == 0 || l.SlowFactor >= 1) || math.IsInf(l.SlowFactor, 0):
		return errors.New("slow_factor must be 0 or a finite number at least 1")
	}
	return nil
}

// draw returns the latency that the uniform draws u1, u2 (the log-normal,
// by Box–Muller) and u3 (slow or not), each in [0, 1), give.
func (l *LatencyDist) draw(u1, u2, u3 float64) time.Duration {
	d := float64(l.Median)
	if l.Sigma > 0 {
		z := math.Sqrt(-2*math.Log(1-u1)) * math.Cos(2*math.Pi*u2)
		d *= math.Exp(l.Sigma * z)
	}
	if u3 < l.SlowRate && l.SlowFactor > 1 {
		d *= l.SlowFactor
	}
	return time.Duration(min(d, float64(time.Hour)))
}

// Salts of the three DrawOperation hashes of a request's latency, apart
// from its fate's.
const (
	latencySalt1 = 0x243f6a8885a308d3
	latencySalt2 = 0x13198a2e03707344
	latencySalt3 = 0xa4093822299f31d0
)

// latencyOf draws the latency of a request: from the hash of its operation
// and attempt number n when the route draws by operation, else from the
// route's stream. It requires that p.mu is held.
func (p *routePlan) latencyOf(op string, n uint64) time.Duration {
	if p.draw == DrawOperation && op != "" {
		return p.latency.draw(fate(p.seed^latencySalt1, p.matchHash, op, n),
			fate(p.seed^latencySalt2, p.matchHash, op, n), fate(p.seed^latencySalt3, p.matchHash, op, n))
	}
	return p.latency.draw(p.rng.Float64(), p.rng.Float64(), p.rng.Float64())
}
