package host

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// BreakerConfig is a host's breaker: the root's CircuitBreaker, its zero
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

// transitions are a breaker's state changes, recorded under gobreaker's
// lock and dispatched later, outside it.
type transitions struct {
	has  atomic.Bool
	mu   sync.Mutex // guards list
	list []transition
}

type transition struct{ from, to gobreaker.State }

func (h *State) recordTransition(from, to gobreaker.State) {
	h.transitions.record(transition{from, to})
}

// record records transition x.
func (ts *transitions) record(x transition) {
	ts.mu.Lock()
	ts.list = append(ts.list, x)
	ts.mu.Unlock()
	ts.has.Store(true)
}

// dispatchTransitions hands h's breaker transitions to hc.onTransition,
// if any. They belong to the host, not to the request that happened to
// observe them.
func (h *State) dispatchTransitions(hc *Config) {
	tr := h.transitions.take()
	if hc.OnTransition == nil {
		return
	}
	for _, x := range tr {
		hc.OnTransition(h.Name, x.from, x.to)
	}
}

// take returns and clears the recorded transitions.
func (ts *transitions) take() []transition {
	if !ts.has.Load() {
		return nil
	}
	ts.mu.Lock()
	tr := ts.list
	ts.list = nil
	ts.has.Store(false)
	ts.mu.Unlock()
	return tr
}
