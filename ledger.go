package resilient

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/resilienthttp/resilient/internal/wire"
)

// ledger folds a call's attempts into what the caller and observers see:
// the Report, the Events and, at the end, one *Error (or the final
// response), built once.
type ledger struct {
	cfg *config
	ctx context.Context // the caller's, which its Events are emitted with
	req *http.Request   // the caller's request
	id  ident           // the operation's key and name, which its Events and *Error carry
	rep *Report         // nil unless the caller attached one
	// began is when the call began, for its Events (zero without
	// observers).
	began    time.Time
	attempts int
	resends  int // sends the base transport made on its own
	// ambiguous: an attempt may have been applied and no success has
	// answered for it since.
	ambiguous bool
	status    int // the last status seen
	lastErr   error
	hedgeNums []int // the attempt numbers that were hedges (WithHedging)
}

// ident is what names an operation: its key and its name, "" if none. It
// holds the rule by which it deferred to an outer retry loop, "" if it did
// not (see Report.Deferred).
type ident struct{ key, name, deferred string }

// start starts the ledger of a call of req, in ctx, carrying out the
// operation named name, reported in rep (nil if none).
func (l *ledger) start(cfg *config, ctx context.Context, req *http.Request, name string, rep *Report) {
	l.cfg, l.ctx, l.req, l.id.name = cfg, ctx, req, name
	if len(cfg.observers) > 0 {
		l.began = cfg.now() // only events report the request's duration
	}
	l.rep = rep
	if l.rep != nil {
		l.rep.Operation = name
	}
}

// deferred records that the call deferred to an outer loop by rule.
func (l *ledger) deferred(rule string) {
	l.id.deferred = rule
	if l.rep != nil {
		l.rep.Deferred = rule
	}
}

// identify records the operation's key, as chosen so far.
func (l *ledger) identify(key string) { l.id.key = key }

// resolved records the operation's key once it is resolved, and whether
// it can be sent only once (single).
func (l *ledger) resolved(key string, single bool) {
	l.identify(key)
	if l.rep != nil {
		l.rep.Key = key
		l.rep.SingleAttempt = single
	}
}

// note folds a sent attempt and its decision into the ledger; hedge says
// it was a hedge (WithHedging).
func (l *ledger) note(a *wire.Attempt, d Decision, wait time.Duration, hedge bool) {
	if a.Sent {
		l.attempts++
		l.resends += a.Writes.Resends
	}
	l.lastErr = a.Err
	if a.Resp != nil {
		l.status = a.Resp.StatusCode
	}
	// Once an attempt may have been applied, the outcome stays unknown until
	// a success answers for it: a later 429 or 4xx (from a rate limiter or a
	// proxy in front of the API) says nothing about the earlier attempt.
	// A success answers for earlier attempts only if they were the same
	// operation: keyed, an idempotent method, or guarded by a strong
	// precondition (which the earlier attempt would have failed had it been
	// applied). After an unkeyed POST that may have been applied, a second
	// success may be a duplicate.
	if l.ambiguous || d.Unknown { // else it stays false either way
		switch {
		case d.Action == Success && (l.id.key != "" || idempotentMethod(l.req.Method) || wire.Guarded(l.req.Header)):
			l.ambiguous = false
		case d.Unknown:
			l.ambiguous = true
		}
	}
	if !a.Sent {
		return
	}
	if l.rep != nil {
		ar := AttemptReport{Attempt: a.N, Wait: wait, Err: a.Err, Action: d.Action, Category: d.Category, Replayed: d.Replayed, Pushback: d.Pushback, Duration: a.Took, Resends: a.Writes.Resends, Hedge: hedge}
		l.rep.Resends = l.resends
		if a.Resp != nil {
			ar.StatusCode = a.Resp.StatusCode
		}
		l.rep.Attempts = append(l.rep.Attempts, ar)
	}
	if len(l.cfg.observers) > 0 {
		e := Event{Kind: EventAttempt, Attempt: AttemptReport{Attempt: a.N, Wait: wait, Resends: a.Writes.Resends, Category: d.Category, Action: d.Action, Replayed: d.Replayed, Duration: a.Took, Err: a.Err, Hedge: hedge}}
		if d.Pushback {
			e.Attempt.Pushback, e.Delay = true, min(d.Delay, l.cfg.retryAfterMax)
		}
		if a.Resp != nil {
			e.Attempt.StatusCode = a.Resp.StatusCode
		}
		l.emit(e)
	}
}

// retrying emits the decision to retry attempt a as attempt n after delay.
func (l *ledger) retrying(n int, a *wire.Attempt, d Decision, delay time.Duration) {
	if len(l.cfg.observers) == 0 {
		return
	}
	e := Event{Kind: EventRetry, Attempt: AttemptReport{Attempt: n, Category: d.Category, Action: Retry, Err: a.Err}, Delay: delay, Outcome: OutcomeRetry}
	if a.Resp != nil {
		e.Attempt.StatusCode = a.Resp.StatusCode
	}
	l.emit(e)
}

// definitive reports whether attempt a, decided d, answers for the
// operation: a success that is not a redirect hop, or a terminal refusal
// with no attempt that may have been applied. Everything else (retries
// stopped, a cancelled caller, an unknown outcome, a redirect the client
// may follow) leaves it pending.
func (l *ledger) definitive(a *wire.Attempt, d Decision) bool {
	return (d.Action == Success && !isRedirect(a.Resp)) || (d.Action == Terminal && d.Category != CategoryCanceled && !l.ambiguous)
}

// finish folds the end of the call after attempt a, decided d, on host h
// (nil if none) into the Report and the outcome Event, and returns a's
// response or an *Error. stop is why retries stopped, nil if d was final.
// A 412 after an attempt that may have been applied is an *Error too, its
// response in Error.Response (preconditionUnknown).
//
// single says that the body can be sent only once (a streamed body may
// have gone over the limit).
func (l *ledger) finish(a *wire.Attempt, d Decision, stop error, h *host.State, single bool) (*http.Response, error) {
	if l.rep != nil {
		l.rep.SingleAttempt = single
		l.rep.Stopped = stop
		l.rep.Replayed = a.Resp != nil && d.Replayed
		l.rep.Unknown = l.ambiguous
		l.rep.Winner, l.rep.Hedges, l.rep.HedgeWon = a.N, len(l.hedgeNums), l.isHedge(a.N)
	}
	observed := len(l.cfg.observers) > 0 // events are built only for observers
	if a.Resp != nil && !wire.PreconditionUnknown(l.req.Method, a.Resp, l.ambiguous) {
		if observed {
			l.emit(Event{Kind: EventOutcome, Attempt: AttemptReport{Attempt: a.N, StatusCode: a.Resp.StatusCode, Category: d.Category, Action: d.Action, Replayed: d.Replayed, Hedge: l.isHedge(a.N)},
				Outcome: outcomeOf(d, stop), Summary: Summary{Attempts: l.attempts, Resends: l.resends, Hedges: len(l.hedgeNums), Duration: l.elapsed(), Deferred: l.id.deferred}})
		}
		return a.Resp, nil
	}
	outcome := outcomeOf(d, stop)
	if stop == nil {
		stop = a.Err
		if d.Category == CategoryCanceled {
			stop = l.ctx.Err()
		}
	}
	e := &Error{Key: l.id.key, Operation: l.id.name, Attempts: l.attempts, Resends: l.resends, Category: d.Category, StatusCode: l.status, Unknown: l.ambiguous, Reason: stop, Err: a.Err}
	if a.Resp != nil { // a 412 that may answer for an applied attempt
		wire.HoldAnswer(a.Resp, wire.DrainTimeout) // readable after http.Client cancels the request
		e.Response, e.Err = a.Resp, wire.ErrPreconditionUnknown
	}
	retryAt(e, h)
	l.emit(Event{Kind: EventOutcome, Attempt: AttemptReport{Attempt: a.N, StatusCode: l.status, Category: d.Category, Action: d.Action, Hedge: l.isHedge(a.N)},
		Outcome: outcome, Summary: Summary{Attempts: l.attempts, Resends: l.resends, Hedges: len(l.hedgeNums), Duration: l.elapsed(), Unknown: e.Unknown, Deferred: l.id.deferred}, Err: e})
	return nil, e
}

// failure builds the *Error of a call, on host h (nil if none), that stops
// before or between attempts, and fills the Report; failed emits it.
func (l *ledger) failure(reason error, cat Category, err error, h *host.State) *Error {
	e := &Error{Key: l.id.key, Operation: l.id.name, Attempts: l.attempts, Resends: l.resends, Category: cat, StatusCode: l.status,
		Unknown: l.ambiguous, Reason: reason, Err: err}
	retryAt(e, h)
	if l.rep != nil {
		l.rep.Stopped = reason
		l.rep.Unknown = e.Unknown
	}
	return e
}

// failed emits the outcome of a call that failed with e (failure).
func (l *ledger) failed(e *Error) {
	outcome := OutcomeError
	switch reason := e.Reason; {
	case errors.Is(reason, ErrCircuitOpen):
		outcome = OutcomeCircuitOpen
	case errors.Is(reason, ErrTokensExhausted):
		outcome = OutcomeTokensExhausted
	case errors.Is(reason, ErrBudgetExhausted):
		outcome = OutcomeBudgetExhausted
	case errors.Is(reason, ErrDelayTooLong):
		outcome = OutcomeDelayTooLong
	case errors.Is(reason, ErrRateLimited):
		outcome = OutcomeRateLimited
	case errors.Is(reason, ErrPushback):
		outcome = OutcomePushback
	case errors.Is(reason, context.Canceled), errors.Is(reason, context.DeadlineExceeded):
		outcome = OutcomeCanceled
	}
	l.emit(Event{Kind: EventOutcome, Attempt: AttemptReport{StatusCode: l.status, Category: e.Category},
		Outcome: outcome, Summary: Summary{Attempts: l.attempts, Duration: l.elapsed(), Unknown: e.Unknown, Deferred: l.id.deferred}, Err: e})
}

// retryAt sets e.RetryAt when h's breaker or the server's pushback
// refused.
func retryAt(e *Error, h *host.State) {
	if h == nil {
		return
	}
	var u int64
	switch {
	case errors.Is(e.Reason, ErrCircuitOpen):
		u = h.OpenUntil.Load()
	case errors.Is(e.Reason, ErrPushback):
		u = h.Pauses.PushbackUntil.Load()
	}
	if u != 0 {
		e.RetryAt = time.Unix(0, u)
	}
}

// stopCategory returns the Category of a call the gate stopped for
// reason after waiting, and whether the last attempt's error is the
// cause (else reason itself is).
func stopCategory(reason error) (Category, bool) {
	switch {
	case errors.Is(reason, ErrCircuitOpen):
		return CategoryCircuitOpen, true
	case errors.Is(reason, ErrDelayTooLong), errors.Is(reason, ErrRateLimited), errors.Is(reason, ErrPushback):
		return CategoryRateLimit, true
	}
	return CategoryCanceled, false
}

func outcomeOf(d Decision, stop error) OutcomeKind {
	switch {
	case errors.Is(stop, ErrTokensExhausted):
		return OutcomeTokensExhausted
	case errors.Is(stop, ErrBudgetExhausted):
		return OutcomeBudgetExhausted
	case errors.Is(stop, ErrCircuitOpen):
		return OutcomeCircuitOpen
	case errors.Is(stop, ErrRetriesExhausted):
		return OutcomeRetriesExhausted
	case errors.Is(stop, ErrDelayTooLong):
		return OutcomeDelayTooLong
	case errors.Is(stop, ErrRateLimited):
		return OutcomeRateLimited
	case errors.Is(stop, ErrPushback):
		return OutcomePushback
	case stop != nil:
		return OutcomeError
	case d.Category == CategoryCanceled:
		return OutcomeCanceled
	case d.Action == Success && d.Replayed:
		return OutcomeReplayed
	case d.Action == Success:
		return OutcomeSuccess
	}
	return OutcomeTerminal
}

// isRedirect reports whether resp is a redirect http.Client may follow,
// which does not answer for the operation.
func isRedirect(resp *http.Response) bool {
	if resp == nil {
		return false
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return headerValue(resp.Header, "Location") != ""
	}
	return false
}

// emit sends e, tagged with the call's request and operation, to the
// observers.
func (l *ledger) emit(e Event) {
	obs := l.cfg.observers
	if len(obs) == 0 {
		return
	}
	if l.req.URL != nil {
		e.Host = l.req.URL.Host
	}
	e.Method, e.Key, e.Operation = l.req.Method, l.id.key, l.id.name
	for _, o := range obs {
		o(l.ctx, e)
	}
}

// elapsed is the request's duration so far, for events (0 without observers).
func (l *ledger) elapsed() time.Duration {
	if l.began.IsZero() {
		return 0
	}
	return l.cfg.now().Sub(l.began)
}

// hedgeSent notes hedge n, sent after delay, and emits the decision.
func (l *ledger) hedgeSent(n int, delay time.Duration) {
	l.hedgeNums = append(l.hedgeNums, n)
	if len(l.cfg.observers) == 0 {
		return
	}
	l.emit(Event{Kind: EventHedge, Attempt: AttemptReport{Attempt: n, Hedge: true}, Delay: delay})
}

// hedgeWithdrawn forgets hedge n, which never left.
func (l *ledger) hedgeWithdrawn(n int) {
	l.hedgeNums = slices.DeleteFunc(l.hedgeNums, func(h int) bool { return h == n })
}

// isHedge reports whether attempt n of the call was a hedge.
func (l *ledger) isHedge(n int) bool {
	for _, h := range l.hedgeNums {
		if h == n {
			return true
		}
	}
	return false
}
