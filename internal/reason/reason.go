// Package reason holds the errors that say why a call stopped. The root
// package exports each under its Err name (resilient.ErrRetriesExhausted is
// reason.ErrRetriesExhausted), where its meaning is documented; the machinery in
// internal/ returns them.
package reason

import "errors"

// The reasons, documented at their root names.
var (
	// ErrRetriesExhausted is resilient.ErrRetriesExhausted.
	ErrRetriesExhausted = errors.New("resilient: retries exhausted")
	// ErrTokensExhausted is resilient.ErrTokensExhausted.
	ErrTokensExhausted = errors.New("resilient: retry tokens exhausted")
	// ErrBudgetExhausted is resilient.ErrBudgetExhausted.
	ErrBudgetExhausted = errors.New("resilient: retry budget exhausted")
	// ErrCircuitOpen is resilient.ErrCircuitOpen.
	ErrCircuitOpen = errors.New("resilient: circuit open")
	// ErrBodyNotReplayable is resilient.ErrBodyNotReplayable.
	ErrBodyNotReplayable = errors.New("resilient: request body not replayable")
	// ErrKeyExpired is resilient.ErrKeyExpired.
	ErrKeyExpired = errors.New("resilient: idempotency key expired")
	// ErrOperationMismatch is resilient.ErrOperationMismatch.
	ErrOperationMismatch = errors.New("resilient: operation claimed with a different request")
	// ErrInvalidKey is resilient.ErrInvalidKey.
	ErrInvalidKey = errors.New("resilient: invalid idempotency key")
	// ErrDelayTooLong is resilient.ErrDelayTooLong.
	ErrDelayTooLong = errors.New("resilient: retry delay exceeds limit")
	// ErrRateLimited is resilient.ErrRateLimited.
	ErrRateLimited = errors.New("resilient: rate limit wait exceeds deadline")
	// ErrPushback is resilient.ErrPushback.
	ErrPushback = errors.New("resilient: server pushed back on retries")
	// ErrStore is resilient.ErrStore.
	ErrStore = errors.New("resilient: store failed")
	// ErrInvalidRequest is resilient.ErrInvalidRequest.
	ErrInvalidRequest = errors.New("resilient: invalid request")
	// ErrUnsafeRetry is resilient.ErrUnsafeRetry.
	ErrUnsafeRetry = errors.New("resilient: not retried: unsafe request may have been applied and the server is not known to dedupe by key")
	// ErrRequestCanceled is why a call ends when its caller closed the
	// request's Cancel channel: net/http's own words for it.
	ErrRequestCanceled = errors.New("net/http: request canceled")
)
