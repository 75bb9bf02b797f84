package resilient

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/resilienthttp/resilient/internal/reason"
)

// Sentinel errors. RoundTrip never returns them bare. It returns an *Error
// whose Unwrap yields one of them (the reason retries stopped) and the last
// cause. So errors.Is works on the result of http.Client.Do, through the
// *url.Error that net/http wraps around it.
var (
	// ErrRetriesExhausted: every allowed attempt was made and the last one
	// failed with a retryable outcome.
	ErrRetriesExhausted = reason.ErrRetriesExhausted
	// ErrTokensExhausted: the retry tokens of the destination host
	// (RetryTokens, the default retry control) had none left for a retry.
	// It is a client-side decision, not a server answer.
	ErrTokensExhausted = reason.ErrTokensExhausted
	// ErrBudgetExhausted: the retry budget of the destination host
	// (RetryBudget or SharedBudget) refused a retry. It is a client-side
	// decision, not a server answer.
	ErrBudgetExhausted = reason.ErrBudgetExhausted
	// ErrCircuitOpen: the destination host's circuit breaker is open (or its
	// half-open probes are all in flight) and the attempt was not sent.
	// Error.RetryAt says when the breaker will let a probe through.
	ErrCircuitOpen = reason.ErrCircuitOpen
	// ErrBodyNotReplayable: the request body could not be read, or could not
	// be read again, so no further attempt could be sent.
	ErrBodyNotReplayable = reason.ErrBodyNotReplayable
	// ErrKeyExpired: the operation's pending key is older than the key
	// retention window (WithKeyRetention); the server may have forgotten it,
	// so reusing it could create a duplicate. Reconcile, then Delete the
	// operation from the Store.
	ErrKeyExpired = reason.ErrKeyExpired
	// ErrOperationMismatch: the operation named with ContextWithOperation was
	// first claimed with a different request (method, URL or body).
	ErrOperationMismatch = reason.ErrOperationMismatch
	// ErrInvalidKey: a caller-supplied idempotency key is empty, longer than
	// 255 bytes or not printable ASCII. Nothing was sent.
	ErrInvalidKey = reason.ErrInvalidKey
	// ErrDelayTooLong: the Transport returned instead of sleeping, with the
	// last answer when it had one. The server asked to wait (Retry-After)
	// longer than the configured maximum, or longer than the time left
	// before the context's deadline. Or other answers from the host asked
	// for the same pause within that delay: the host is shedding, and a
	// retry would wait out a pause it keeps renewing. A pause is judged
	// before any wait: a retry that waited out a pause is sent. A retry
	// that waited out a cold host's Retry-After is judged again: the
	// first attempts sent meanwhile may show that the host sheds.
	ErrDelayTooLong = reason.ErrDelayTooLong
	// ErrRateLimited: the host's RateLimit could not admit the attempt
	// before the context's deadline, so it was not sent.
	ErrRateLimited = reason.ErrRateLimited
	// ErrPushback: the destination host's server pushed back (see
	// Decision.Pushback) and the time it asked for has not passed, so the
	// retry was not sent. Error.RetryAt says when retries may resume. First
	// attempts are not held back by pushback.
	ErrPushback = reason.ErrPushback
	// ErrStore: the Store failed (it is down or returned an error). The request
	// was not sent without its durable key.
	ErrStore = reason.ErrStore
	// ErrInvalidRequest: the request cannot be sent at all (nil URL, an
	// http or https URL without a host, a nil Header, an invalid method or
	// header field).
	ErrInvalidRequest = reason.ErrInvalidRequest
)

// Error describes a request that did not end with a response. RoundTrip
// returns it (wrapped by http.Client in a *url.Error) when the last attempt
// produced no response, or when the Transport refused to send at all. It
// also stands for a 412 that answered a re-send after an attempt that may
// have been applied (see Response).
//
// Use errors.As to get it and errors.Is to test Reason or the cause:
//
//	var re *resilient.Error
//	if errors.As(err, &re) && re.Unknown {
//		// the effect may exist: keep re.Key and resolve later
//	}
//	if errors.Is(err, resilient.ErrCircuitOpen) { ... }
type Error struct {
	// Key is the operation's idempotency key ("" if the request had none).
	Key string
	// Operation is the name given with ContextWithOperation, if any.
	Operation string
	// Attempts is the number of attempts sent (0 when nothing was sent).
	Attempts int
	// Resends is the number of times the base transport sent an attempt
	// again on its own. net/http does so on a keep-alive connection that
	// died before anything was written. Every request put on the wire is
	// Attempts + Resends.
	Resends int
	// Category classifies the last outcome (or the refusal).
	Category Category
	// StatusCode is the status of the last response seen, 0 if none.
	StatusCode int
	// Unknown is true when an attempt may have reached the server and no
	// definitive answer followed: the effect may or may not exist. It is false
	// when nothing was applied for sure (dial error, breaker open, budget
	// refused before sending, a 4xx answer). It is also true for a call that
	// waited for another call of its key in this process (see Transport) and
	// had no answer of its own: that one may have applied the operation.
	Unknown bool
	// RetryAt is when the circuit breaker will let a probe through, set with
	// ErrCircuitOpen, or when the server's pushback ends, set with
	// ErrPushback; zero otherwise.
	RetryAt time.Time
	// Reason is why the Transport stopped. It is one of the sentinel errors
	// of this package, or the caller's context error. When the last attempt
	// failed with an error the Classifier called terminal, it is that error
	// itself.
	Reason error
	// Err is the last cause (a network error, a context error, a store error);
	// nil when the last attempt had a response, save with Response.
	Err error
	// Response is the last answer when it is a 412 Precondition Failed to
	// a re-send, after an attempt that may have been applied; nil
	// otherwise. Unknown is then true: that attempt may have applied the
	// request, and so made its precondition fail. Or another client
	// changed the resource. Its body is read before RoundTrip returns:
	// 64 KiB at most, for 100 ms at most. So it can be read after
	// http.Client has cancelled the request (Client.Timeout), and a short
	// one frees its connection even if it is not closed. Close it.
	Response *http.Response
}

// Error returns a one-line description without secrets: no headers, no body.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Reason != nil {
		b.WriteString(e.Reason.Error())
	} else {
		b.WriteString("resilient: request failed")
	}
	b.WriteString(" (attempts ")
	b.WriteString(strconv.Itoa(e.Attempts))
	if e.Resends > 0 {
		b.WriteString(", resends ")
		b.WriteString(strconv.Itoa(e.Resends))
	}
	if e.Category != "" {
		b.WriteString(", category ")
		b.WriteString(string(e.Category))
	}
	if e.StatusCode != 0 {
		b.WriteString(", last status ")
		b.WriteString(strconv.Itoa(e.StatusCode))
	}
	if e.Key != "" {
		b.WriteString(", key ")
		b.WriteString(e.Key)
	}
	if e.Unknown {
		b.WriteString(", outcome unknown")
	}
	b.WriteString(")")
	if e.Err != nil && e.Err != e.Reason {
		// The cause, unless it says no more than the reason (a context
		// error returned by the base transport as the caller's own).
		if msg := e.Err.Error(); e.Reason == nil || msg != e.Reason.Error() {
			b.WriteString(": ")
			b.WriteString(msg)
		}
	}
	// One line, whatever the cause's text holds (errors.Join's, a
	// classifier's own error).
	return strings.ReplaceAll(b.String(), "\n", "; ")
}

// Timeout reports whether the request failed because a deadline passed:
// the context's, http.Client.Timeout's, an attempt timeout's or a network
// timeout. It is what os.IsTimeout and (*url.Error).Timeout ask, and it
// answers as they would for the error a bare client returns.
func (e *Error) Timeout() bool {
	for _, err := range [...]error{e.Reason, e.Err} {
		if err == nil {
			continue
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return true
		}
		if t, ok := errors.AsType[interface {
			error
			Timeout() bool
		}](err); ok && t.Timeout() {
			return true
		}
	}
	return false
}

// Unwrap returns Reason and Err, so errors.Is and errors.As see both.
func (e *Error) Unwrap() []error {
	switch {
	case e.Reason == nil && e.Err == nil:
		return nil
	case e.Reason == nil:
		return []error{e.Err}
	case e.Err == nil || e.Err == e.Reason:
		return []error{e.Reason}
	}
	return []error{e.Reason, e.Err}
}

// ErrUnsafeRetry: the request was not re-sent. It is not idempotent and may
// have been applied. Nothing shows that the server dedupes it by its key. A
// bare client would not have re-sent it either. Use WithDedupingServer for
// a server known to honour keys.
var ErrUnsafeRetry = reason.ErrUnsafeRetry
