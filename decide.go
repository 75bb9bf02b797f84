package resilient

import (
	"net/http"
	"strings"
	"time"

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
//     precondition (internal/wire, precondition.go);
//  3. the call's limits: attempts, or an outer loop or a loop site that
//     retries instead (ErrRetriesExhausted), a body that cannot be
//     replayed (ErrBodyNotReplayable), a server delay over the maximum
//     (ErrDelayTooLong), then the backoff and the key's age
//     (ErrKeyExpired);
//  4. the host's gate (internal/host, gate.go, State.Reserve): pushback
//     (ErrPushback), a shedding host and the deadline (ErrDelayTooLong),
//     the breaker (ErrCircuitOpen), the retry tokens (ErrTokensExhausted)
//     and the budget (ErrBudgetExhausted).
//
// Steps 1 and 2 make an attempt's verdict (call.verdict, with guard):
// settle (settle.go) settles the attempt with it. Step 3 is decide, over
// the facts call.facts gathers. Step 4 is the host's: the loop (call.run)
// asks the gate to reserve the retry decide returns; the gate takes a
// token or the budget's share.
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
		return v // nothing to guard: no answer, or a request safe to re-send
	}
	if op.unsafe {
		v.shown = a.Resp != nil && showsDedupe(a.Resp.Header, rh, c.cfg.keyHeader, op.key, v.d)
	}
	g := guardFacts{d: v.d, unsafe: op.unsafe, shown: v.shown, notApplied: notApplied(a),
		guarded: wire.Guarded(c.Req.Header), ambiguous: a.Resp != nil && a.Resp.StatusCode >= 500 || a.Err != nil}
	if g.d.Action == Retry && op.unsafe && !g.shown {
		// The evidence of earlier answers is looked up only for a retry.
		g.vouched = c.vouched()
		g.evidence = !g.vouched && c.h.Evidence.Has(host.RouteOf(c.Req), a.End)
	}
	v.d, v.stop = guard(&g) // 2. the unsafe-retry guard
	return v
}

// guardFacts is what the unsafe-retry guard reads of an attempt of a
// request that is not safe to re-send: one whose method is not
// idempotent, keyed (unsafe) or not.
type guardFacts struct {
	d          Decision // the classifier's (step 1)
	unsafe     bool     // the request has a key
	shown      bool     // this answer shows that the server dedupes by the key
	vouched    bool     // the key is the application's, or it declared the server (WithDedupingServer)
	evidence   bool     // an earlier answer on the route showed that the server dedupes
	notApplied bool     // the failure proves the request was not applied (notApplied)
	guarded    bool     // a strong precondition (internal/wire, precondition.go)
	ambiguous  bool     // a 5xx or an error: the request may have been applied
}

// guard is step 2, the unsafe-retry guard, for a request that is not safe
// to re-send. Three things show that the server dedupes: this answer, the
// application vouching for it, or an earlier answer on the route. A
// request without a key has none of them: nothing can dedupe it. A strong
// precondition is evidence of another kind, with a key or without: a
// request applied once fails it when sent again. Without any, a retry
// after an answer that may have been applied is refused: the decision
// becomes terminal, and stop is ErrUnsafeRetry.
func guard(f *guardFacts) (d Decision, stop error) {
	if f.d.Action != Retry || f.shown || f.notApplied || f.guarded || f.unsafe && (f.vouched || f.evidence) {
		return f.d, nil
	}
	return terminal(f.d, f.ambiguous), ErrUnsafeRetry
}

// facts is what the decision reads of an attempt's answer and its call:
// the verdict (steps 1 and 2) and the call's limits (step 3). call.facts
// gathers them. Two are questions asked in their turn, never before: the
// backoff (it draws its jitter) and the call's loop site (asking is
// remembered), which decide is given beside the facts. facts holds no
// pointer into the call: it would move the call to the heap.
type facts struct {
	v          verdict
	attempts   int           // the attempts the call sent
	max        int           // WithMaxAttempts
	outer      bool          // an outer loop sends the retries (outerCall.sendsOne)
	replayable bool          // the body can be sent again
	delayMax   time.Duration // WithRetryAfterMax
	backoff    Backoff       // nil for none
	n          int           // the retry's number
	prev       time.Duration // the previous backoff
	key        keyAge        // the key's age when the retry would go out
}

// next is what follows an attempt: a retry after delay, if the host's
// gate admits it (step 4, host.State.Reserve); else the call ends, with
// stop, nil for a final answer. polling: the retry waits for an operation
// in progress elsewhere.
type next struct {
	retry   bool
	delay   time.Duration
	polling bool
	stop    error
}

// decide is step 3 of the order above, after an attempt's verdict: the
// call's limits. It returns a retry for step 4, the host's gate, which the
// caller asks (host.State.Reserve), or why the call ends. site, if not
// nil, is asked whether its loop site retries instead (call.deferToSite).
// decide changes nothing but what that question remembers and the
// backoff's jitter source.
func decide(f *facts, site *call) next {
	d := f.v.d
	if d.Action != Retry {
		return next{stop: f.v.stop} // 1–2: final, or the guard's ErrUnsafeRetry
	}
	// 3. the call's limits.
	switch {
	case f.attempts >= f.max, f.outer, site != nil && site.deferToSite():
		return next{stop: ErrRetriesExhausted} // a single attempt's: the outer loop retries
	case !f.replayable:
		return next{stop: ErrBodyNotReplayable}
	case d.Delay > f.delayMax:
		return next{stop: ErrDelayTooLong}
	}
	delay := d.Delay
	if f.backoff != nil {
		delay = max(delay, f.backoff.Delay(f.n, f.prev))
	}
	// A retry goes out after delay: the server must still hold its key.
	if f.key.expired(delay) {
		return next{stop: ErrKeyExpired}
	}
	return next{retry: true, delay: delay, polling: d.Category == CategoryInProgress}
}

// facts gathers what the decision reads after attempt l.cur of c, settled
// with verdict l.curV. The retry would be attempt n.
func (c *call) facts(l *loop, n int) facts {
	cfg := c.cfg
	return facts{v: l.curV, attempts: c.led.attempts, max: cfg.maxAttempts, outer: c.outer.sendsOne(),
		replayable: c.op.body.Replayable(), delayMax: cfg.retryAfterMax, backoff: cfg.backoff, n: n, prev: l.delay,
		key: keyAge{key: c.op.key, born: c.op.born, cfg: cfg}}
}

// keyAge is what the decision reads of an operation's key: the key, the
// time its Store record was made (zero if none) and the retention.
type keyAge struct {
	key  string
	born time.Time
	cfg  *config
}

// expired reports whether the key is too old for a retry after delay
// (operation.keyAge).
func (k keyAge) expired(delay time.Duration) bool {
	return keyAgeAt(k.cfg, k.key, k.born, k.cfg.now().Add(delay)) != nil
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
