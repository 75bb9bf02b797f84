package main

import (
	"context"
	"sync"

	"github.com/resilienthttp/resilient"
)

// tally counts a Transport's Events: attempts, retries and how each request
// ended. It is a resilient.Observer (its observe method), safe for concurrent
// use.
type tally struct {
	mu       sync.Mutex
	attempts int
	retries  int
	outcomes map[string]int // resilient.Outcome… → requests
}

func newTally() *tally { return &tally{outcomes: map[string]int{}} }

func (t *tally) observe(_ context.Context, e resilient.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch e.Kind {
	case resilient.EventAttempt:
		t.attempts++
	case resilient.EventRetry:
		t.retries++
	case resilient.EventOutcome:
		t.outcomes[e.Outcome]++
	}
}
