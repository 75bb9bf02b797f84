package resilient

import (
	"context"
	"time"
)

// Report records what the Transport did for one request: its key, each
// attempt and wait, and why it stopped. Attach an empty Report to the
// request's context with ContextWithReport and read it after the response
// (or error) is returned:
//
//	rep := new(resilient.Report)
//	req = req.WithContext(resilient.ContextWithReport(ctx, rep))
//	resp, err := client.Do(req)
//	log.Println(rep.Key, len(rep.Attempts), rep.Replayed)
//
// A Report belongs to one request at a time; it is written by RoundTrip and
// must not be read until RoundTrip returns. Redirects followed by
// http.Client append to the same Report.
type Report struct {
	// Key is the idempotency key sent, "" if none.
	Key string
	// Operation is the name from ContextWithOperation, if any.
	Operation string
	// Attempts lists every attempt sent, in order.
	Attempts []AttemptReport
	// Resends is the number of times the base transport sent an attempt
	// again on its own (see AttemptReport.Resends).
	Resends int
	// Replayed is true when the final response came from the server's
	// idempotency store.
	Replayed bool
	// SingleAttempt is true when the body could not be replayed (over the
	// buffer limit, no GetBody), so no retry was possible.
	SingleAttempt bool
	// Stopped is why the Transport stopped retrying (ErrRetriesExhausted,
	// ErrTokensExhausted, ErrBudgetExhausted, ErrCircuitOpen,
	// ErrDelayTooLong, ErrRateLimited, a context error…),
	// nil when the last outcome was a success or terminal.
	Stopped error
	// Unknown is true when the outcome is unknown (see Error.Unknown).
	Unknown bool
	// Winner is the Attempt number of the attempt whose answer RoundTrip
	// returned: the last one sent, or, with hedging, the copy that answered
	// first (see WithHedging).
	Winner int
	// Hedges is the number of hedges sent (WithHedging); HedgeWon is true
	// when the answer returned came from one of them.
	Hedges   int
	HedgeWon bool
}

// AttemptReport describes one attempt.
type AttemptReport struct {
	// Attempt is 0 for the first attempt.
	Attempt int
	// Wait is how long the Transport waited before sending it (backoff,
	// Retry-After, host pause; not rate-limit waits).
	Wait time.Duration
	// StatusCode is the response status, 0 if the attempt failed.
	StatusCode int
	// Err is the attempt's error, nil if it had a response.
	Err error
	// Action and Category are the Classifier's verdict.
	Action   Action
	Category Category
	// Replayed is true when the server answered from its idempotency store.
	Replayed bool
	// Pushback is true when the answer was the server's pushback
	// (Decision.Pushback): no retry to the host until PushbackUntil.
	Pushback bool
	// Duration is how long the attempt took until response headers or error.
	Duration time.Duration
	// Resends is the number of times the base transport sent this attempt
	// again on its own: net/http re-sends a request on a keep-alive
	// connection that died before anything was written (a transparent
	// retry, which costs no retry token). Re-sends after a write are
	// refused (see ErrUnsafeRetry), so they never reach the server twice.
	Resends int
	// Hedge is true when the attempt was a hedge: a copy sent while an
	// earlier one was still in flight (WithHedging). A copy cancelled
	// because another answered first has Category CategoryCanceled.
	Hedge bool
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventAttempt: an attempt finished and was classified.
	EventAttempt EventKind = iota + 1
	// EventRetry: the Transport decided to retry after Delay.
	EventRetry
	// EventOutcome: RoundTrip is returning; Outcome says how.
	EventOutcome
	// EventBreaker: a host's circuit breaker changed state (From, To).
	EventBreaker
	// EventStore: the Store failed to record an operation's outcome (Err
	// wraps ErrStore). The request's own EventOutcome follows.
	EventStore
	// EventHedge: the Transport sent hedge Attempt after waiting Delay for
	// an answer (WithHedging); its EventAttempt follows when it is settled.
	EventHedge
)

// Outcome values of an EventOutcome (and of the "outcome" log attribute).
const (
	OutcomeSuccess          = "success"
	OutcomeReplayed         = "replayed"
	OutcomeTerminal         = "terminal"
	OutcomeRetry            = "retry"
	OutcomeRetriesExhausted = "retries_exhausted"
	OutcomeTokensExhausted  = "tokens_exhausted"
	OutcomeBudgetExhausted  = "budget_exhausted"
	OutcomeCircuitOpen      = "circuit_open"
	OutcomeDelayTooLong     = "delay_too_long"
	OutcomeRateLimited      = "rate_limited"
	OutcomePushback         = "pushback"
	OutcomeCanceled         = "canceled"
	OutcomeError            = "error"
)

// Event is what an Observer receives. Fields that do not apply to the Kind
// are zero. It never carries headers or bodies.
type Event struct {
	Kind      EventKind
	Host      string
	Method    string
	Key       string
	Operation string
	// Attempt is the attempt number, 0 for the first; in an EventOutcome,
	// the number of the attempt whose answer was returned.
	Attempt int
	// Attempts is the number of attempts sent (EventOutcome).
	Attempts int
	// Resends is the number of re-sends the base transport made on its own
	// (of this attempt for EventAttempt, in all for EventOutcome).
	Resends    int
	StatusCode int
	Category   Category
	Action     Action
	// Delay is the wait before the next attempt (EventRetry), or how long
	// the server's pushback holds retries (EventAttempt with Pushback).
	Delay time.Duration
	// Duration is the attempt's (EventAttempt) or the whole request's
	// (EventOutcome) duration.
	Duration time.Duration
	Replayed bool
	Unknown  bool
	// Pushback is true when the attempt's answer was the server's pushback
	// (EventAttempt): the Transport sends no retry to Host for Delay.
	Pushback bool
	// Outcome is one of the Outcome… constants (EventOutcome).
	Outcome string
	// From and To are breaker states (EventBreaker).
	From, To BreakerState
	Err      error
	// Hedge is true for a hedge (EventHedge, and its EventAttempt) and, in
	// an EventOutcome, when the answer returned came from a hedge, whose
	// number is then Attempt (the winner's; the last attempt's without
	// hedging). Hedges is the number of hedges sent (EventOutcome).
	Hedge  bool
	Hedges int
}

// Observer receives Events. See WithObserver.
type Observer func(ctx context.Context, e Event)
