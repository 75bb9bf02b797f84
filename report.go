package resilient

import "time"

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
	// Deferred names the rule by which the call sent one attempt, an outer
	// retry loop retrying it (see WithOuterRetries). It is "" when the
	// Transport retried as usual. Otherwise it is one of:
	//
	//   - "mark": an SDK's marks;
	//   - "option": WithOuterRetries(true) or ContextWithOuterRetries;
	//   - "request", "header" or "identical": a loop's re-send recognised;
	//   - "site": a call site that loops.
	Deferred string
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
	// again on its own. net/http re-sends a request on a keep-alive
	// connection that died before anything was written. That transparent
	// retry costs no retry token. Re-sends after a write are refused (see
	// ErrUnsafeRetry), so they never reach the server twice.
	Resends int
	// Hedge is true when the attempt was a hedge: a copy sent while an
	// earlier one was still in flight (WithHedging). A copy cancelled
	// because another answered first has Category CategoryCanceled.
	Hedge bool
}
