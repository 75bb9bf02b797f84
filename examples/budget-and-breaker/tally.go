package main

import (
	"context"
	"sync"

	"github.com/resilienthttp/resilient"
)

// tally counts a Transport's Events: first attempts and retries sent, and
// how each request ended. It is a resilient.Observer (its observe method),
// safe for concurrent use.
type tally struct {
	mu       sync.Mutex
	firsts   int                           // first attempts sent
	retries  int                           // retries sent
	outcomes map[resilient.OutcomeKind]int // resilient.Outcome… → requests that sent at least one attempt
	unsent   map[resilient.OutcomeKind]int // resilient.Outcome… → requests refused before any attempt
}

func newTally() *tally {
	return &tally{outcomes: map[resilient.OutcomeKind]int{}, unsent: map[resilient.OutcomeKind]int{}}
}

func (t *tally) observe(_ context.Context, e resilient.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch e.Kind {
	case resilient.EventAttempt:
		if e.Attempt.Attempt == 0 {
			t.firsts++
		} else {
			t.retries++
		}
	case resilient.EventOutcome:
		if e.Summary.Attempts == 0 {
			t.unsent[e.Outcome]++
		} else {
			t.outcomes[e.Outcome]++
		}
	}
}
