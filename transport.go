package resilient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/resilienthttp/resilient/persist"
	"github.com/sony/gobreaker/v2"
)

// Transport is an http.RoundTripper that makes requests safe to retry.
//
// For each request (one logical operation) it chooses an idempotency key once,
// before the first attempt — the caller's header or ContextWithKey, the key a
// Store holds for a named operation, or a new UUIDv7 for POST and PATCH — and
// sends that same key on every attempt. It classifies each attempt's outcome
// (DefaultClassifier), waits with jittered backoff (FullJitter by default)
// but never less than a server-directed Retry-After and never past the
// context's deadline, and stops when attempts run out, the host's retry budget
// refuses, or the host's circuit breaker is open.
//
// The zero Transport is not usable; build one with NewTransport, or an
// *http.Client with NewClient or Wrap. A Transport is safe for concurrent use
// by multiple goroutines and should be reused: its per-host budgets and
// breakers only work if it is shared by the requests to a host. Per-host
// state (budget, breaker, limiter, pause) is created on a host's first
// request and kept for the Transport's life, so a Transport that calls an
// unbounded set of hosts grows with it.
//
// RoundTrip keeps the RoundTripper contract: it never modifies the caller's
// request (each attempt is sent on a copy); it takes its context from
// req.Context(); it closes the request body on every path; it returns a
// response or an error, never both. When the last attempt produced a response
// — a final 503 included — that response is returned with a nil error, so the
// caller sees the real status. Otherwise the error is an *Error whose Reason
// says why retries stopped and whose Unknown field says whether the effect
// may exist. Bodies of discarded responses are drained (up to 64 KiB) and
// closed.
type Transport struct {
	base  http.RoundTripper
	cfg   config
	hosts sync.Map // URL.Host → *hostState
}

// NewTransport returns a Transport that sends attempts through base
// (http.DefaultTransport if nil), configured by opts.
func NewTransport(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{base: base, cfg: defaultConfig()}
	for _, o := range opts {
		o(&t.cfg)
	}
	if t.cfg.logger != nil {
		t.cfg.observers = append(t.cfg.observers, logObserver(t.cfg.logger))
	}
	return t
}

// CloseIdleConnections closes idle connections of the base transport, if it
// supports it (http.Client.CloseIdleConnections calls it).
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// attemptHeaderValues avoids an allocation per attempt for the attempt header.
var attemptHeaderValues = func() (v [16][]string) {
	for i := range v {
		v[i] = []string{strconv.Itoa(i)}
	}
	return v
}()

func attemptValue(n int) []string {
	if n < len(attemptHeaderValues) {
		return attemptHeaderValues[n]
	}
	return []string{strconv.Itoa(n)}
}

// call is the state of one RoundTrip.
type call struct {
	t         *Transport
	req       *http.Request
	ctx       context.Context
	host      *hostState
	rep       *Report
	key       string
	op        string
	body      replayBody
	start     time.Time
	attempts  int
	ambiguous bool
	// withdrawnAt is when the retry about to be sent was paid for from the
	// budget; zero once it is sent (or when none is pending).
	withdrawnAt time.Time

	// wrote counts the times the base transport wrote the current attempt
	// (httptrace WroteRequest), to see the re-sends net/http makes on its
	// own. A new counter and trace per attempt: a previous attempt's write
	// loop may still report, and WithClientTrace composes the caller's
	// hooks into the trace it is given. Keyed requests only; nil otherwise.
	wrote   *atomic.Int32
	status  int
	lastErr error
}

// RoundTrip sends req, retrying as configured. See Transport for the
// guarantees. Errors are *Error values; errors.Is works with ErrInvalidKey,
// ErrInvalidRequest, ErrBodyNotReplayable, ErrStore, ErrOperationMismatch,
// ErrKeyExpired, ErrCircuitOpen, ErrBudgetExhausted, ErrRetriesExhausted,
// ErrDelayTooLong and the context's errors.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := &call{t: t, req: req, ctx: req.Context()}
	if len(t.cfg.observers) > 0 {
		c.start = t.cfg.now() // only events report the request's duration
	}
	c.rep, _ = c.ctx.Value(reportCtxKey).(*Report)
	c.op, _ = OperationFromContext(c.ctx)
	if c.rep != nil {
		c.rep.Operation = c.op
	}
	if err := checkRequest(req); err != nil {
		closeReqBody(req)
		return nil, c.fail(ErrInvalidRequest, CategoryTerminal, err)
	}
	if err := c.identity(); err != nil {
		closeReqBody(req)
		c.key = "" // never echo an invalid key
		return nil, c.fail(ErrInvalidKey, CategoryClient, err)
	}
	if err := c.body.init(req, t.cfg.maxBodyBuffer); err != nil {
		return nil, c.fail(ErrBodyNotReplayable, CategoryClient, err)
	}
	// A redirect hop (req.Response set by http.Client) continues the
	// operation with the key identity found; it is not claimed again.
	if c.op != "" && t.cfg.store != nil && req.Response == nil {
		if err := c.claim(); err != nil {
			c.body.close()
			return nil, err
		}
	}
	if c.rep != nil {
		c.rep.Key = c.key
		c.rep.SingleAttempt = !c.body.replayable
	}
	c.host = t.host(req.URL.Host)
	return c.loop()
}

func checkRequest(req *http.Request) error {
	switch {
	case req.URL == nil:
		return errors.New("nil URL")
	case req.URL.Scheme != "http" && req.URL.Scheme != "https":
		return fmt.Errorf("unsupported scheme %q", req.URL.Scheme)
	case req.URL.Host == "":
		return errors.New("no host in URL")
	case req.Header == nil:
		return errors.New("nil Header")
	}
	return checkHeader(req.Header)
}

// checkHeader refuses, before anything is sent, the header fields net/http
// would refuse with an untyped error that no classifier can tell from a
// transient one: names that are not RFC 9110 tokens, values with control
// characters other than HTAB. The error names the field, never its value.
func checkHeader(h http.Header) error {
	for name, values := range h {
		if !isToken(name) {
			return fmt.Errorf("invalid header field name %q", name)
		}
		for _, v := range values {
			for i := 0; i < len(v); i++ {
				if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
					return fmt.Errorf("invalid value for header field %q", name)
				}
			}
		}
	}
	return nil
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func closeReqBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// identity chooses the operation's key: the caller's header, the context's
// key, the key of the request this one is a redirect of, or (for the
// configured methods) a new one. A Store claim may replace it later.
func (c *call) identity() error {
	cfg := &c.t.cfg
	if vs := c.req.Header[cfg.keyHeader]; len(vs) > 0 {
		c.key = vs[0]
		return ValidateKey(c.key)
	}
	if k, ok := KeyFromContext(c.ctx); ok {
		c.key = k
		return ValidateKey(k)
	}
	// http.Client follows a 307/308 by calling RoundTrip again with a new
	// request whose Response is the redirect; that response's Request is the
	// attempt we sent, with the key. Same method, same operation, same key.
	if prev := c.req.Response; prev != nil && prev.Request != nil && prev.Request.Method == c.req.Method {
		if k := prev.Request.Header.Get(cfg.keyHeader); k != "" {
			c.key = k
			return nil
		}
	}
	if cfg.keyMethods.has(c.req.Method) || (c.op != "" && cfg.store != nil) {
		k, err := cfg.keyFunc()
		if err != nil {
			return err
		}
		c.key = k
		return ValidateKey(k)
	}
	return nil
}

// loop is the attempt loop of the design: admission, attempt, classify,
// retry or return.
func (c *call) loop() (*http.Response, error) {
	cfg := &c.t.cfg
	var wait, prevDelay time.Duration
	for n := 0; ; n++ {
		if err := c.admit(&wait); err != nil {
			c.abandon()
			return nil, err
		}
		done, err := c.allowBreaker(n)
		if err != nil {
			c.abandon()
			return nil, err
		}
		c.withdrawnAt = time.Time{} // the retry paid for is being sent
		if n == 0 && c.host.budget != nil {
			c.host.budget.Deposit()
		}
		resp, d, err := c.attempt(n, wait, done)
		if d.Action != Retry {
			return c.finish(resp, d, err, nil)
		}

		// A 429 or 503 with a delay holds back every request to the host,
		// whether or not this one retries.
		if resp != nil && d.Delay > 0 && d.Delay <= cfg.retryAfterMax &&
			(resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
			c.host.pause(cfg.now(), d.Delay)
		}

		// Retryable: find a reason to stop, else pay for the retry.
		delay := d.Delay
		if cfg.backoff != nil {
			delay = max(delay, cfg.backoff.Delay(n+1, prevDelay))
		}
		var stop error
		switch {
		case c.attempts >= cfg.maxAttempts:
			stop = ErrRetriesExhausted
		case !c.body.replayable:
			stop = ErrBodyNotReplayable
		case d.Delay > cfg.retryAfterMax:
			stop = ErrDelayTooLong
		case !c.fits(delay):
			stop = ErrDelayTooLong
		case c.host.breakerOpen():
			stop = ErrCircuitOpen
		case c.host.budget != nil && !c.withdraw():
			stop = ErrBudgetExhausted
		}
		if stop != nil {
			return c.finish(resp, d, err, stop)
		}
		retry := Event{Kind: EventRetry, Attempt: n + 1, Delay: delay, Category: d.Category, Action: Retry, Outcome: OutcomeRetry, Err: err}
		if resp != nil {
			retry.StatusCode = resp.StatusCode
		}
		c.emit(retry)
		if resp != nil {
			discard(resp)
		}
		if err := sleep(c.ctx, delay); err != nil {
			c.abandon()
			return nil, c.fail(err, CategoryCanceled, err)
		}
		wait, prevDelay = delay, delay
	}
}

// withdraw pays for a retry from the host's budget before the backoff, so
// that a refused retry costs no wait; abandon takes the payment back if the
// retry is then not sent (the caller gave up, the pause or the rate limit
// does not fit the deadline, the breaker refused).
func (c *call) withdraw() bool {
	now := c.t.cfg.now()
	if !c.host.budget.WithdrawAt(now) {
		return false
	}
	c.withdrawnAt = now
	return true
}

// abandon ends a call between attempts without sending the next one: it
// refunds the retry paid for, if any, and releases the caller's body if no
// attempt took it.
func (c *call) abandon() {
	if !c.withdrawnAt.IsZero() {
		c.host.budget.refundAt(c.withdrawnAt)
		c.withdrawnAt = time.Time{}
	}
	c.body.close()
}

// fits reports whether waiting d leaves time before the context's deadline.
func (c *call) fits(d time.Duration) bool {
	dl, ok := c.ctx.Deadline()
	return !ok || c.t.cfg.now().Add(d).Before(dl)
}

// admit waits for the host's rate limiter and server-directed pause.
func (c *call) admit(wait *time.Duration) error {
	h := c.host
	if p := h.pausedFor(c.t.cfg.now); p > 0 {
		if !c.fits(p) {
			return c.fail(ErrDelayTooLong, CategoryRateLimit, c.lastErr)
		}
		if err := sleep(c.ctx, p); err != nil {
			return c.fail(err, CategoryCanceled, err)
		}
		*wait += p
	}
	if h.limiter != nil {
		if err := h.limiter.Wait(c.ctx); err != nil {
			if ctxErr := c.ctx.Err(); ctxErr != nil {
				return c.fail(ctxErr, CategoryCanceled, err)
			}
			// The limiter refuses waits that would pass the deadline.
			return c.fail(ErrDelayTooLong, CategoryRateLimit, err)
		}
	}
	return nil
}

// allowBreaker asks the host's breaker for permission to send attempt n.
func (c *call) allowBreaker(n int) (func(error), error) {
	h := c.host
	if h.breaker == nil {
		return nil, nil
	}
	done, err := h.breaker.Allow()
	c.dispatchTransitions()
	if err != nil && n == 0 && c.t.cfg.breaker.RetriesOnly {
		return nil, nil // sent, uncounted: the breaker is not admitting
	}
	if err != nil {
		e := c.fail(ErrCircuitOpen, CategoryCircuitOpen, err)
		if errors.Is(err, gobreaker.ErrOpenState) {
			e.(*Error).RetryAt = time.Unix(0, h.openUntil.Load())
		}
		return nil, e
	}
	return done, nil
}

// attempt sends attempt n and classifies it. The returned response (nil on
// error) is the caller's to return or discard.
func (c *call) attempt(n int, wait time.Duration, done func(error)) (*http.Response, Decision, error) {
	cfg := &c.t.cfg
	ctx, cancel := c.ctx, context.CancelFunc(nil)
	if cfg.attemptTimeout > 0 {
		ctx, cancel = context.WithTimeout(c.ctx, cfg.attemptTimeout)
	}
	if c.key != "" {
		// http.Transport re-sends a keyed request by itself when a reused
		// connection dies before the response; count the writes to know.
		wrote := new(atomic.Int32)
		c.wrote = wrote
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Add(1) }})
	}
	areq := c.req.WithContext(ctx)
	areq.Header = c.req.Header.Clone() // never nil: checkRequest refused a nil Header
	if c.key != "" {
		areq.Header[cfg.keyHeader] = []string{c.key}
	}
	if cfg.attemptHeader != "" {
		areq.Header[cfg.attemptHeader] = attemptValue(n)
	}
	body, err := c.body.body(n)
	if err != nil {
		// Only a retry can get here (GetBody failed); nothing is sent.
		if cancel != nil {
			cancel()
		}
		if done != nil {
			done(errBreakerExcluded)
		}
		return nil, Decision{Action: Terminal, Category: CategoryClient}, err
	}
	if n == 0 {
		c.body.first = nil // the base transport owns it now
	}
	areq.Body = body
	areq.GetBody = c.body.rewind()

	var sent time.Time
	if c.rep != nil || len(cfg.observers) > 0 {
		sent = cfg.now()
	}
	resp, err := c.t.base.RoundTrip(areq)
	end := cfg.now()
	var took time.Duration
	if !sent.IsZero() {
		took = end.Sub(sent)
	}
	c.attempts++
	switch {
	case resp != nil && err != nil:
		// A base transport that breaks the contract: trust the error.
		if resp.Body != nil {
			resp.Body.Close()
		}
		resp = nil
	case resp == nil && err == nil:
		err = errors.New("resilient: base transport returned no response and no error")
	}
	var d Decision
	if err != nil && c.ctx.Err() != nil {
		// The caller gave up; nothing else matters.
		err = errors.Join(c.ctx.Err(), err)
		d = Decision{Action: Terminal, Category: CategoryCanceled, Ambiguous: true}
	} else {
		d = cfg.classifier(Outcome{Request: areq, Response: resp, Err: err, Keyed: c.key != "", Now: end})
	}
	if resp != nil && resp.Body == nil {
		resp.Body = http.NoBody // as http.Client would; callers and discard read it
	}
	if err != nil && d.Action == Success {
		// No response is no success, whatever a classifier says, and it
		// proves nothing about the effect.
		d.Action, d.Ambiguous = Terminal, true
	}
	// A write that got no answer of its own (an error after a write, or an
	// answer to a re-send net/http made after the first write's connection
	// died) may have been applied, whatever the last error says.
	if c.wrote != nil {
		if w := c.wrote.Load(); (err != nil && w >= 1) || (resp != nil && d.Action != Success && w >= 2) {
			d.Ambiguous = true
		}
	}
	if done != nil {
		// The breaker counts the host's health, not this request's
		// retryability: a 5xx or a network error is a failure even when
		// the request is not safe to retry.
		switch {
		case d.Category == CategoryCanceled:
			done(errBreakerExcluded)
		case d.Action == Retry, err != nil, resp.StatusCode >= 500:
			done(errBreakerFailure)
		default:
			done(nil)
		}
		c.dispatchTransitions()
	}
	if cancel != nil {
		if resp != nil {
			resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
		} else {
			cancel()
		}
	}

	c.lastErr = err
	if resp != nil {
		c.status = resp.StatusCode
	}
	// Once an attempt may have been applied, the outcome stays unknown until
	// a success answers for it: a later 429 or 4xx (from a rate limiter or a
	// proxy in front of the API) says nothing about the earlier attempt.
	// A success answers for earlier attempts only if they were the same
	// operation: keyed, or an idempotent method. After an unkeyed POST that
	// may have been applied, a second success may be a duplicate.
	switch {
	case d.Action == Success && (c.key != "" || idempotentMethod(c.req.Method)):
		c.ambiguous = false
	case d.Ambiguous:
		c.ambiguous = true
	}
	if c.rep != nil {
		ar := AttemptReport{Attempt: n, Wait: wait, Err: err, Action: d.Action, Category: d.Category, Replayed: d.Replayed, Duration: took}
		if resp != nil {
			ar.StatusCode = resp.StatusCode
		}
		c.rep.Attempts = append(c.rep.Attempts, ar)
	}
	if len(cfg.observers) > 0 {
		e := Event{Kind: EventAttempt, Attempt: n, Category: d.Category, Action: d.Action, Replayed: d.Replayed, Duration: took, Err: err}
		if resp != nil {
			e.StatusCode = resp.StatusCode
		}
		c.emit(e)
	}
	return resp, d, err
}

// finish ends the call: records the outcome with the Store, fills the
// Report, emits the outcome, and returns resp or an *Error.
func (c *call) finish(resp *http.Response, d Decision, err error, stop error) (*http.Response, error) {
	c.body.close()
	// Done only after a definitive answer: a success, or a terminal refusal
	// with no attempt that may have been applied. Everything else (retries
	// stopped, a cancelled caller, an unknown outcome) stays Pending.
	c.record(d.Action == Success || (d.Action == Terminal && d.Category != CategoryCanceled && !c.ambiguous))
	outcome := outcomeOf(resp, d, stop)
	if c.rep != nil {
		c.rep.Stopped = stop
		c.rep.Replayed = resp != nil && d.Replayed
		c.rep.Unknown = c.ambiguous
	}
	if resp != nil {
		c.emit(Event{Kind: EventOutcome, Attempts: c.attempts, StatusCode: resp.StatusCode, Category: d.Category, Action: d.Action,
			Replayed: d.Replayed, Outcome: outcome, Duration: c.elapsed()})
		return resp, nil
	}
	if stop == nil {
		stop = err
		if d.Category == CategoryCanceled {
			stop = c.ctx.Err()
		}
	}
	e := &Error{Key: c.key, Operation: c.op, Attempts: c.attempts, Category: d.Category, StatusCode: c.status, Unknown: c.ambiguous, Reason: stop, Err: err}
	c.emit(Event{Kind: EventOutcome, Attempts: c.attempts, Category: d.Category, Action: d.Action, Unknown: e.Unknown,
		Outcome: outcome, Duration: c.elapsed(), Err: e})
	return nil, e
}

// fail builds the *Error for a call that stops before or between attempts,
// and emits the outcome.
func (c *call) fail(reason error, cat Category, err error) error {
	e := &Error{Key: c.key, Operation: c.op, Attempts: c.attempts, Category: cat, StatusCode: c.status,
		Unknown: c.ambiguous, Reason: reason, Err: err}
	if c.rep != nil {
		c.rep.Stopped = reason
		c.rep.Unknown = e.Unknown
	}
	if c.attempts > 0 {
		c.record(false)
	}
	outcome := OutcomeError
	switch {
	case errors.Is(reason, ErrCircuitOpen):
		outcome = OutcomeCircuitOpen
	case errors.Is(reason, ErrDelayTooLong):
		outcome = OutcomeDelayTooLong
	case errors.Is(reason, context.Canceled), errors.Is(reason, context.DeadlineExceeded):
		outcome = OutcomeCanceled
	}
	c.emit(Event{Kind: EventOutcome, Attempts: c.attempts, StatusCode: c.status, Category: cat, Unknown: e.Unknown,
		Outcome: outcome, Duration: c.elapsed(), Err: e})
	return e
}

func outcomeOf(resp *http.Response, d Decision, stop error) string {
	switch {
	case errors.Is(stop, ErrBudgetExhausted):
		return OutcomeBudgetExhausted
	case errors.Is(stop, ErrCircuitOpen):
		return OutcomeCircuitOpen
	case errors.Is(stop, ErrRetriesExhausted):
		return OutcomeRetriesExhausted
	case errors.Is(stop, ErrDelayTooLong):
		return OutcomeDelayTooLong
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

// record tells the Store how the operation ended: definitive answers are
// Done, everything else stays Pending. Store errors here are reported to
// observers but do not change the response: the request already happened.
func (c *call) record(definitive bool) {
	s := c.t.cfg.store
	if s == nil || c.op == "" {
		return
	}
	state := persist.Pending
	if definitive {
		state = persist.Done
	}
	// The caller's context may be done (that is often why we stop); the
	// record must still be written.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 5*time.Second)
	defer cancel()
	if err := s.Finish(ctx, c.op, state, c.attempts); err != nil {
		c.emit(Event{Kind: EventStore, Attempts: c.attempts, Err: fmt.Errorf("%w: finish: %w", ErrStore, err)})
	}
}

func (c *call) emit(e Event) {
	obs := c.t.cfg.observers
	if len(obs) == 0 {
		return
	}
	if c.req.URL != nil {
		e.Host = c.req.URL.Host
	}
	e.Method, e.Key, e.Operation = c.req.Method, c.key, c.op
	for _, o := range obs {
		o(c.ctx, e)
	}
}

func (c *call) dispatchTransitions() {
	tr := c.host.takeTransitions()
	for _, x := range tr {
		c.emit(Event{Kind: EventBreaker, From: x.from, To: x.to})
	}
}

// discard drains (bounded) and closes a response the caller will not see,
// so its connection can be reused.
func discard(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	io.CopyN(io.Discard, resp.Body, defaultDrainLimit)
	resp.Body.Close()
}

// cancelBody cancels the attempt's context when the caller closes the body.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// elapsed is the request's duration so far, for events (0 without observers).
func (c *call) elapsed() time.Duration {
	if c.start.IsZero() {
		return 0
	}
	return c.t.cfg.now().Sub(c.start)
}
