package resilient

import (
	"net/http"
	"strings"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/resilienthttp/resilient/internal/wire"
)

// The retry decision. What follows an attempt's answer is decided here, in
// this order; each step that ends the call names its reason:
//
//  1. classify (classify.go): the Classifier's Decision, with what the
//     Transport knows better (a cancelled caller, no response is no
//     success, a write that got no answer may have been applied);
//  2. the unsafe-retry guard: a request whose method is not idempotent
//     is retried, after an answer that may have been applied, only with
//     evidence that the server dedupes it by its key (ErrUnsafeRetry),
//     which a request without a key never has, or with a strong
//     precondition (precondition.go);
//  3. the call's limits: attempts (ErrRetriesExhausted), a body that
//     cannot be replayed (ErrBodyNotReplayable), a server delay over the
//     maximum (ErrDelayTooLong), then the backoff and the key's age
//     (ErrKeyExpired);
//  4. the gate's reservation (gate.go): pushback (ErrPushback), the
//     deadline (ErrDelayTooLong), the breaker (ErrCircuitOpen), the retry
//     tokens (ErrTokensExhausted) and the budget (ErrBudgetExhausted).
//
// Steps 1 and 2 make an attempt's verdict (call.verdict): settle (settle.go)
// settles the attempt with it. Steps 3 and 4 decide a retry (call.decide).
// So a 503 answering a POST with a minted key is, in order: retryable
// (step 1); refused with ErrUnsafeRetry unless the server dedupes on its
// route, the application vouches for it or the failure proves the POST was
// not applied (step 2); then retried within the attempts, the body, the
// Retry-After maximum and the key's age (step 3) if the gate admits it
// (step 4).

// verdict is the judgment of one attempt: decision steps 1 and 2.
type verdict struct {
	d Decision
	// err is the attempt's error as the caller is to see it: its own,
	// joined with the caller's context's error when the caller gave up.
	err error
	// stop is why the Transport will not retry the attempt when it
	// overrode the classifier (ErrUnsafeRetry); nil otherwise.
	stop error
	// shown: the answer to an unsafe keyed request shows that the server
	// dedupes by the key (showsDedupe), evidence for its route that
	// observe records.
	shown bool
}

// verdict returns the verdict on attempt a of c: decision steps 1 and 2.
// It changes nothing: the verdict says it all.
func (c *call) verdict(a *wire.Attempt) verdict {
	op := &c.op
	v, rh := classify(c.cfg, a, c.Ctx, op.key) // 1. classify
	if !a.Sent || !op.unsafe && (op.key != "" || idempotentMethod(c.Req.Method)) {
		return v
	}
	// 2. the unsafe-retry guard. Three things show that the server
	// dedupes: this answer (shown), the application vouching for it, or
	// an earlier answer on a's route. The evidence of earlier answers is
	// looked up only for a retry. A request without a key has none of
	// them: nothing can dedupe it. A strong precondition (guarded) is
	// evidence of another kind, with a key or without: a request applied
	// once fails it when sent again.
	if op.unsafe {
		v.shown = a.Resp != nil && showsDedupe(a.Resp.Header, rh, c.cfg.keyHeader, op.key, v.d)
	}
	if !v.shown && v.d.Action == Retry && !notApplied(a) &&
		(!op.unsafe || !c.vouched() && !c.h.Evidence.Has(host.RouteOf(c.Req), a.End)) && !wire.Guarded(c.Req.Header) {
		v.d = terminal(v.d, a.Resp != nil && a.Resp.StatusCode >= 500 || a.Err != nil)
		v.stop = ErrUnsafeRetry
	}
	return v
}

// decide decides whether c retries after attempt l.cur, settled with
// verdict l.curV: decision steps 3 and 4. The retry would be attempt n, the
// i-th of c. It returns nil when the gate reserved it (l.res, after
// l.delay), else why not: the verdict's stop (nil for a final answer),
// a limit's reason, or the gate's (refused).
func (c *call) decide(l *loop, i, n int) (stop error, refused bool) {
	d := l.curV.d
	if d.Action != Retry {
		return l.curV.stop, false // 1–2: final, or the guard's ErrUnsafeRetry
	}
	// 3. the call's limits.
	cfg := c.cfg
	switch {
	case c.led.attempts >= cfg.maxAttempts, c.outer.sendsOne(), c.deferToSite():
		return ErrRetriesExhausted, false // a single attempt's: the outer loop retries
	case !c.op.body.Replayable():
		return ErrBodyNotReplayable, false
	case d.Delay > cfg.retryAfterMax:
		return ErrDelayTooLong, false
	}
	delay := d.Delay
	if cfg.backoff != nil {
		delay = max(delay, cfg.backoff.Delay(n, l.delay))
	}
	// A retry goes out after delay: the server must still hold its key.
	if err := c.op.keyAge(cfg, cfg.now().Add(delay)); err != nil {
		return ErrKeyExpired, false
	}
	l.delay = delay
	// 4. the gate reserves the retry without blocking; a refused retry
	// ends c with the last answer at once. polling: the last answer said
	// the operation is in progress (a 409 from a call of the key in
	// another process).
	polling := d.Category == CategoryInProgress
	if err := c.h.Reserve(&l.res, &c.Applicant, i, n, l.delay, polling, cfg.nanos()); err != nil {
		return err, true
	}
	return nil, false
}

// notApplied reports whether attempt a's failure proves the server did not
// apply it: the dial failed, nothing was written, or the server said 429.
func notApplied(a *wire.Attempt) bool {
	if a.Err != nil {
		return notSent(a.Err) || (a.Writes.Traced && !a.Writes.Any)
	}
	return a.Resp != nil && a.Resp.StatusCode == http.StatusTooManyRequests
}

// vouched reports whether the application vouches that c's server
// dedupes by the key: the key is its own, or it declared the server
// (WithDedupingServer). Asked only after the cheaper questions: a success
// needs it only when its answer showed that the server dedupes.
func (c *call) vouched() bool { return c.op.vouched(c.cfg, c.Req) }

// vouched is call.vouched for op, of the caller's request req.
func (op *operation) vouched(cfg *config, req *http.Request) bool {
	return op.own || cfg.declaredDeduping(req)
}

// noteShown records, as evidence for c's route at end, that an answer to
// c, an unsafe request, showed that the server dedupes by its key, unless
// the application vouches for the server anyway (call.vouched). Evidence
// is recorded from any answer, a success included.
func (c *call) noteShown(end int64) { c.op.noteShown(c.cfg, c.h, c.Req, end) }

// noteShown is call.noteShown for op, of the caller's request req to h.
func (op *operation) noteShown(cfg *config, h *host.State, req *http.Request, end int64) {
	if !op.vouched(cfg, req) {
		h.Evidence.Note(host.RouteOf(req), end)
	}
}

// showsDedupe reports whether a response with header h (and replay headers
// rh) shows that the server dedupes by its key. It does if it echoes the
// key, says how its idempotency store answered, or says the key is in use.
func showsDedupe(h http.Header, rh replayHeaders, keyHeader, key string, d Decision) bool {
	if rh.present() {
		return true
	}
	if d.Category == CategoryInProgress || d.Category == CategoryPayloadMismatch {
		return true
	}
	if v := headerValue(h, keyHeader); v != "" {
		return v == key || strings.Trim(v, `"`) == key
	}
	return false
}
