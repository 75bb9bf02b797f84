package resilient

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// ledger folds a call's attempts into what the caller and observers see:
// the Report, the Events and, at the end, one *Error (or the final
// response), built once.
type ledger struct {
	rep      *Report // nil unless the caller attached one
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

func (l *ledger) start(c *call, rep *Report) {
	if len(c.t.cfg.observers) > 0 {
		l.began = c.t.cfg.now() // only events report the request's duration
	}
	l.rep = rep
	if l.rep != nil {
		l.rep.Operation = c.op.name
	}
}

func (l *ledger) resolved(op *operation) {
	if l.rep != nil {
		l.rep.Key = op.key
		l.rep.SingleAttempt = !op.body.replayable()
	}
}

// note folds a sent attempt and its decision into the ledger; hedge says
// it was a hedge (WithHedging).
func (c *call) note(a *attempt, d Decision, wait time.Duration, hedge bool) {
	l := &c.led
	if a.sent {
		l.attempts++
		l.resends += a.writes.resends
	}
	l.lastErr = a.err
	if a.resp != nil {
		l.status = a.resp.StatusCode
	}
	// Once an attempt may have been applied, the outcome stays unknown until
	// a success answers for it: a later 429 or 4xx (from a rate limiter or a
	// proxy in front of the API) says nothing about the earlier attempt.
	// A success answers for earlier attempts only if they were the same
	// operation: keyed, or an idempotent method. After an unkeyed POST that
	// may have been applied, a second success may be a duplicate.
	if l.ambiguous || d.Ambiguous { // else it stays false either way
		switch {
		case d.Action == Success && (c.op.key != "" || idempotentMethod(c.req.Method)):
			l.ambiguous = false
		case d.Ambiguous:
			l.ambiguous = true
		}
	}
	if !a.sent {
		return
	}
	if l.rep != nil {
		ar := AttemptReport{Attempt: a.n, Wait: wait, Err: a.err, Action: d.Action, Category: d.Category, Replayed: d.Replayed, Pushback: d.Pushback, Duration: a.took, Resends: a.writes.resends, Hedge: hedge}
		l.rep.Resends = l.resends
		if a.resp != nil {
			ar.StatusCode = a.resp.StatusCode
		}
		l.rep.Attempts = append(l.rep.Attempts, ar)
	}
	if len(c.t.cfg.observers) > 0 {
		e := Event{Kind: EventAttempt, Attempt: a.n, Resends: a.writes.resends, Category: d.Category, Action: d.Action, Replayed: d.Replayed, Duration: a.took, Err: a.err, Hedge: hedge}
		if d.Pushback {
			e.Pushback, e.Delay = true, min(d.Delay, c.t.cfg.retryAfterMax)
		}
		if a.resp != nil {
			e.StatusCode = a.resp.StatusCode
		}
		c.emit(e)
	}
}

// retrying emits the decision to retry attempt a as attempt n after delay.
func (c *call) retrying(n int, a *attempt, d Decision, delay time.Duration) {
	if len(c.t.cfg.observers) == 0 {
		return
	}
	e := Event{Kind: EventRetry, Attempt: n, Delay: delay, Category: d.Category, Action: Retry, Outcome: OutcomeRetry, Err: a.err}
	if a.resp != nil {
		e.StatusCode = a.resp.StatusCode
	}
	c.emit(e)
}

// finish ends the call after attempt a: records the outcome with the Store,
// fills the Report, emits the outcome, and returns a's response or an
// *Error. stop is why retries stopped, nil if a's decision was final.
func (c *call) finish(a *attempt, d Decision, stop error) (*http.Response, error) {
	l := &c.led
	c.op.body.close()
	// Done only after a definitive answer: a success that is not a redirect
	// hop, or a terminal refusal with no attempt that may have been applied.
	// Everything else (retries stopped, a cancelled caller, an unknown
	// outcome, a redirect the client may follow) stays Pending.
	if c.t.cfg.store != nil {
		c.record((d.Action == Success && !isRedirect(a.resp)) || (d.Action == Terminal && d.Category != CategoryCanceled && !l.ambiguous))
	}
	if l.rep != nil {
		l.rep.SingleAttempt = !c.op.body.replayable() // a streamed body may have gone over the limit
		l.rep.Stopped = stop
		l.rep.Replayed = a.resp != nil && d.Replayed
		l.rep.Unknown = l.ambiguous
		l.rep.Winner, l.rep.Hedges, l.rep.HedgeWon = a.n, len(l.hedgeNums), l.isHedge(a.n)
	}
	observed := len(c.t.cfg.observers) > 0 // events are built only for observers
	if a.resp != nil {
		if observed {
			c.emit(Event{Kind: EventOutcome, Attempt: a.n, Attempts: l.attempts, Resends: l.resends, StatusCode: a.resp.StatusCode, Category: d.Category, Action: d.Action,
				Replayed: d.Replayed, Outcome: outcomeOf(d, stop), Duration: c.elapsed(), Hedges: len(l.hedgeNums), Hedge: l.isHedge(a.n)})
		}
		return a.resp, nil
	}
	outcome := outcomeOf(d, stop)
	if stop == nil {
		stop = a.err
		if d.Category == CategoryCanceled {
			stop = c.ctx.Err()
		}
	}
	e := &Error{Key: c.op.key, Operation: c.op.name, Attempts: l.attempts, Resends: l.resends, Category: d.Category, StatusCode: l.status, Unknown: l.ambiguous, Reason: stop, Err: a.err}
	c.retryAt(e)
	c.emit(Event{Kind: EventOutcome, Attempt: a.n, Attempts: l.attempts, Resends: l.resends, Category: d.Category, Action: d.Action, Unknown: e.Unknown,
		Outcome: outcome, Duration: c.elapsed(), Err: e, Hedges: len(l.hedgeNums), Hedge: l.isHedge(a.n)})
	return nil, e
}

// fail builds the *Error for a call that stops before or between attempts,
// records the operation as pending if anything was sent, and emits the
// outcome.
func (c *call) fail(reason error, cat Category, err error) error {
	l := &c.led
	e := &Error{Key: c.op.key, Operation: c.op.name, Attempts: l.attempts, Resends: l.resends, Category: cat, StatusCode: l.status,
		Unknown: l.ambiguous, Reason: reason, Err: err}
	c.retryAt(e)
	if l.rep != nil {
		l.rep.Stopped = reason
		l.rep.Unknown = e.Unknown
	}
	if l.attempts > 0 {
		c.record(false)
	}
	outcome := OutcomeError
	switch {
	case errors.Is(reason, ErrCircuitOpen):
		outcome = OutcomeCircuitOpen
	case errors.Is(reason, ErrBudgetExhausted):
		outcome = OutcomeBudgetExhausted
	case errors.Is(reason, ErrDelayTooLong):
		outcome = OutcomeDelayTooLong
	case errors.Is(reason, ErrPushback):
		outcome = OutcomePushback
	case errors.Is(reason, context.Canceled), errors.Is(reason, context.DeadlineExceeded):
		outcome = OutcomeCanceled
	}
	c.emit(Event{Kind: EventOutcome, Attempts: l.attempts, StatusCode: l.status, Category: cat, Unknown: e.Unknown,
		Outcome: outcome, Duration: c.elapsed(), Err: e})
	return e
}

// retryAt sets e.RetryAt when the host's breaker or the server's pushback
// refused.
func (c *call) retryAt(e *Error) {
	if c.h == nil {
		return
	}
	var u int64
	switch {
	case errors.Is(e.Reason, ErrCircuitOpen):
		u = c.h.openUntil.Load()
	case errors.Is(e.Reason, ErrPushback):
		u = c.h.pauses.pushbackUntil.Load()
	}
	if u != 0 {
		e.RetryAt = time.Unix(0, u)
	}
}

// stopped ends the call when the gate refused to send an attempt after
// waiting for it: the previous response, if any, is gone, so the caller
// gets an *Error with the gate's reason and the last cause.
func (c *call) stopped(reason error) error {
	c.op.body.close()
	switch {
	case errors.Is(reason, ErrCircuitOpen):
		return c.fail(reason, CategoryCircuitOpen, c.led.lastErr)
	case errors.Is(reason, ErrDelayTooLong), errors.Is(reason, ErrPushback):
		return c.fail(reason, CategoryRateLimit, c.led.lastErr)
	}
	return c.fail(reason, CategoryCanceled, reason)
}

func outcomeOf(d Decision, stop error) string {
	switch {
	case errors.Is(stop, ErrBudgetExhausted):
		return OutcomeBudgetExhausted
	case errors.Is(stop, ErrCircuitOpen):
		return OutcomeCircuitOpen
	case errors.Is(stop, ErrRetriesExhausted):
		return OutcomeRetriesExhausted
	case errors.Is(stop, ErrDelayTooLong):
		return OutcomeDelayTooLong
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
	if simbugs && bugActive("redirectdone") {
		return false
	}
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

func (c *call) emit(e Event) {
	obs := c.t.cfg.observers
	if len(obs) == 0 {
		return
	}
	if c.req.URL != nil {
		e.Host = c.req.URL.Host
	}
	e.Method, e.Key, e.Operation = c.req.Method, c.op.key, c.op.name
	for _, o := range obs {
		o(c.ctx, e)
	}
}

// dispatchTransitions emits h's breaker transitions. They belong to the
// host, not to the request that happened to observe them: the Event carries
// the host only, and the context is not the request's.
func (c *call) dispatchTransitions(h *hostState) {
	tr := h.transitions.take()
	for _, x := range tr {
		for _, o := range c.t.cfg.observers {
			o(context.Background(), Event{Kind: EventBreaker, Host: h.name, From: x.from, To: x.to})
		}
	}
}

// elapsed is the request's duration so far, for events (0 without observers).
func (c *call) elapsed() time.Duration {
	if c.led.began.IsZero() {
		return 0
	}
	return c.t.cfg.now().Sub(c.led.began)
}

// hedgeSent emits the decision to send hedge n after delay.
func (c *call) hedgeSent(n int, delay time.Duration) {
	if len(c.t.cfg.observers) == 0 {
		return
	}
	c.emit(Event{Kind: EventHedge, Attempt: n, Delay: delay, Hedge: true})
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
