package host

import (
	"time"

	"github.com/sony/gobreaker/v2"
)

// breakerConfig is a host's breaker: the root's CircuitBreaker, its zero
// fields resolved to their defaults.
type BreakerConfig struct {
	FailureRatio   float64
	MinRequests    uint32
	Window         time.Duration
	OpenTimeout    time.Duration
	HalfOpenProbes uint32
	RetriesOnly    bool
}

// errBreakerFailure and errBreakerExcluded are what the Transport reports to
// gobreaker for a retryable outcome and for a cancelled caller.
var (
	errBreakerFailure  = errorString("resilient: retryable outcome")
	errBreakerExcluded = errorString("resilient: excluded outcome")
)

type errorString string

func (e errorString) Error() string { return string(e) }

// newBreaker builds h's breaker. OnStateChange runs under gobreaker's mutex,
// so it only records; the Transport dispatches events after the call returns.
func newBreaker(s BreakerConfig, h *State, now func() time.Time) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	return gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:         h.Name,
		MaxRequests:  s.HalfOpenProbes,
		Interval:     s.Window,
		BucketPeriod: s.Window / 10,
		Timeout:      s.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			valid := c.Requests - min(c.TotalExclusions, c.Requests)
			return valid >= s.MinRequests && float64(c.TotalFailures) >= s.FailureRatio*float64(valid)
		},
		IsExcluded: func(err error) bool { return err == errBreakerExcluded },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				h.OpenUntil.Store(now().Add(s.OpenTimeout).UnixNano())
			}
			h.recordTransition(from, to)
		},
	})
}
