package resilient

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"
)

// hostState is what a Transport keeps per destination host (URL.Host): its
// retry budget, circuit breaker, rate limiter and server-directed pause.
// Created on first use and kept for the Transport's life.
type hostState struct {
	name    string
	budget  *Budget // nil when budgets are off
	breaker *gobreaker.TwoStepCircuitBreaker[struct{}]
	limiter *rate.Limiter // nil without WithRateLimit

	// pauseUntil (Unix ns) holds back every request to the host after a
	// 429 or 503 with a server-directed delay.
	pauseUntil atomic.Int64
	// openUntil (Unix ns) is when an open breaker will let a probe through.
	openUntil atomic.Int64

	// Breaker transitions recorded under gobreaker's lock, dispatched later.
	hasTransitions atomic.Bool
	mu             sync.Mutex // guards transitions
	transitions    []transition
}

type transition struct{ from, to BreakerState }

func (t *Transport) host(name string) *hostState {
	if h, ok := t.hosts.Load(name); ok {
		return h.(*hostState)
	}
	h := &hostState{name: name}
	switch {
	case t.cfg.budget != nil:
		h.budget = t.cfg.budget
	case !t.cfg.budgetOff:
		h.budget = NewBudget(t.cfg.budgetConfig)
	}
	if !t.cfg.breakerOff {
		h.breaker = newBreaker(t.cfg.breaker, h, t.cfg.now)
	}
	if t.cfg.rateLimit != rate.Inf {
		h.limiter = rate.NewLimiter(t.cfg.rateLimit, t.cfg.rateBurst)
	}
	actual, _ := t.hosts.LoadOrStore(name, h)
	return actual.(*hostState)
}

func (h *hostState) recordTransition(from, to BreakerState) {
	h.mu.Lock()
	h.transitions = append(h.transitions, transition{from, to})
	h.mu.Unlock()
	h.hasTransitions.Store(true)
}

// takeTransitions returns and clears the recorded breaker transitions.
func (h *hostState) takeTransitions() []transition {
	if !h.hasTransitions.Load() {
		return nil
	}
	h.mu.Lock()
	tr := h.transitions
	h.transitions = nil
	h.hasTransitions.Store(false)
	h.mu.Unlock()
	return tr
}

// pause holds back requests to the host until now+d (never shortens an
// existing pause).
func (h *hostState) pause(now time.Time, d time.Duration) {
	until := now.Add(d).UnixNano()
	for {
		cur := h.pauseUntil.Load()
		if cur >= until || h.pauseUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// pausedFor returns how long requests to the host must still wait. It reads
// the clock only if the host was ever paused.
func (h *hostState) pausedFor(now func() time.Time) time.Duration {
	if u := h.pauseUntil.Load(); u != 0 {
		if d := time.Duration(u - now().UnixNano()); d > 0 {
			return d
		}
	}
	return 0
}

// breakerOpen reports whether the breaker is open now (a retry would be
// refused), without counting a request.
func (h *hostState) breakerOpen() bool {
	return h.breaker != nil && h.breaker.State() == gobreaker.StateOpen
}

// sleep waits d or until ctx is done, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
