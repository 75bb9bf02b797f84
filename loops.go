package resilient

import (
	"context"
	"net/http"
	"strings"

	"github.com/resilienthttp/resilient/internal/loops"
	"github.com/resilienthttp/resilient/internal/wire"
)

// The rules this file carries out (request, header, identical, site) and
// why each is as strong as what it may decide are in doc.go, under "Loops
// without marks". The request rule's admission is reserveOuterRetry's.

// recognise looks for the failure that c sends again, when failures are
// remembered. c's operation op has its key and body ready. When recognise
// finds one, c defers to its loop. It returns c's part of an outer loop:
// one attempt, no wait of the Transport's (host.Applicant.Single). It returns
// the operation's key: the failed call's, by the request rule.
func (c *call) recognise(op *operation) (*outerCall, string) {
	if !c.t.loops.Remembers(c.Req.URL.Host) {
		return nil, op.key
	}
	found, strong, _, key := c.t.loops.Recognise(c.loopState(), c.Req, &op.body, c.cfg.clock)
	if !found {
		return nil, op.key
	}
	// The re-send is never refused: another call may look the same, and
	// even the loop's own retry, refused, is an error the Transport
	// cannot know how the loop takes (a hand-written loop may spend an
	// attempt on it at once, where alone it would have sent one).
	o := &outerCall{single: true, lax: true}
	if !strong {
		return o, op.key // a first attempt, under a key of its own
	}
	if key == "" || op.own || op.key == "" {
		key = op.key
	}
	return o, key
}

// deferToSite reports whether c comes from a call site that has shown its
// loop. c is a call without marks whose attempt failed retryably. The
// Transport then sends no retry; the loop does. It is read once per call,
// on the failure path only.
func (c *call) deferToSite() bool {
	if c.outer != nil || c.outerMode() != outerAuto {
		return false
	}
	if !c.t.loops.Defers(c.loopState(), c.cfg.clock) {
		return false
	}
	c.led.deferred(loops.RuleSite)
	return true
}

// failedRetryably remembers c, a call that ended with a retryable failure,
// so that its loop's re-send is recognised (recognise). rewound: the
// body can be read again for its fingerprint (not when a retry's GetBody
// failed: the fingerprint is then unknown).
func (c *call) failedRetryably(rewound bool) {
	if o := c.outer; o != nil && o.marked && c.Asked != 0 && c.op.key != "" {
		c.t.asked.Set(c.op.key, c.Asked, c.cfg.nanos()) // the SDK's next try waits for it
	}
	if (c.outer != nil && c.outer.marked) || c.op.hop || c.outerMode() != outerAuto {
		return
	}
	lc := c.loopState()
	key := c.op.key
	if c.op.own {
		key = ""
	}
	f := c.t.loops.Failed(lc, c.Req, &c.op.body, rewound, key, lc.Base+c.led.attempts, c.cfg.nanos())
	if c.Asked != 0 {
		c.t.asked.Set(f, c.Asked, f.At) // the loop's re-send waits for it
	}
}

// loopState returns c's loops.Call, made on first use.
func (c *call) loopState() *loops.Call {
	if c.loop == nil {
		c.loop = &loops.Call{}
	}
	return c.loop
}

// The policy this file carries out is in doc.go, under "Outer retry
// loops". The marks are read in internal/wire/sdkmarks.go, a loop's retry is admitted by
// reserveOuterRetry, and a retry finds the call it continues in
// the pending calls (loops.Pending). A loop without marks is recognised in loops.go; none of
// that is on the path of a request without marks until a call fails.

// outerMode is WithOuterRetries' setting.
type outerMode int8

const (
	outerAuto   outerMode = iota // by the request's marks
	outerAlways                  // WithOuterRetries(true)
	outerNever                   // WithOuterRetries(false)
)

// WithOuterRetries declares whether requests come from a loop that retries
// them on its own. Such a loop may be an SDK with its retries on, or the
// application's loop. The Transport then does not retry them as well.
//
// With hosts, it declares it only for requests to those hosts. A host is a
// URL's host, with or without its port. One Transport often serves an SDK
// and plain calls. ContextWithOuterRetries declares it for one call, and
// wins over this option.
//
// With true, every RoundTrip sends one attempt, and the loop decides whether
// and when to retry. A try sent sooner than a server's delay asked (a
// 429's or a shedding host's Retry-After) waits what is left of it. A call that repeats a key of the application's seen
// within a minute is a retry. The host's gate admits it as one, and may
// refuse it (see WithRefusalResponses). Use true with a hand-written loop.
// Use it with an SDK that sends its own idempotency key but no retry count.
// stripe-go with MaxNetworkRetries above 0 is one: its first attempt says
// nothing of its retries.
//
// With false, the Transport retries within each call, as for any request,
// and looks for no loop. An SDK's marks still give each call one key and the
// attempt count. Use false with an SDK whose retries are turned off.
//
// Without this option the Transport looks for a loop and defers to the loop
// it finds. The package documentation, under "Outer retry loops" and "Loops
// without marks", says how it finds one.
func WithOuterRetries(will bool, hosts ...string) Option {
	return func(c *config) {
		m := outerNever
		if will {
			m = outerAlways
		}
		if len(hosts) == 0 {
			c.outer = m
			return
		}
		if c.outerHosts == nil {
			c.outerHosts = make(map[string]outerMode, len(hosts))
		}
		for _, h := range hosts {
			c.outerHosts[strings.ToLower(h)] = m
		}
	}
}

// outerMode returns WithOuterRetries' setting for c's request.
func (c *call) outerMode() outerMode {
	cfg := c.cfg
	if cfg.outerHosts == nil && !outerContexts.Load() {
		return cfg.outer
	}
	return cfg.scopedOuterMode(c.Ctx, c.Req)
}

// scopedOuterMode returns WithOuterRetries' setting for req, made in ctx,
// when hosts or contexts declare it (else it is cfg.outer: call.resolve).
func (cfg *config) scopedOuterMode(ctx context.Context, req *http.Request) outerMode {
	m := cfg.outer
	if cfg.outerHosts != nil && req.URL != nil {
		if hm, ok := cfg.outerHosts[strings.ToLower(req.URL.Host)]; ok {
			m = hm
		} else if hm, ok := cfg.outerHosts[strings.ToLower(req.URL.Hostname())]; ok {
			m = hm
		}
	}
	if outerContexts.Load() {
		if cm, ok := outerFromContext(ctx); ok {
			m = cm
		}
	}
	return m
}

// deferredBy names the rule by which c, a call that sends one attempt,
// defers to its loop (Report.Deferred).
func (c *call) deferredBy() string {
	switch {
	case c.loop != nil && c.loop.Rule != "":
		return c.loop.Rule
	case c.outer.marked:
		return loops.RuleMark
	}
	return loops.RuleOption
}

// outerCall is the part of a call that an outer retry loop concerns.
type outerCall struct {
	mark   wire.Mark
	marked bool // mark was read from the request
	// single: this call sends one attempt; the loop retries. Its retries
	// are admitted by the gate as retries, which it may refuse.
	single bool
	// print is the request's fingerprint when the call is in the pending calls (loops.Pending).
	print string
	// lax: a loop's re-send recognised on evidence that another call may
	// show too (loops.go): its attempt is admitted as a first
	// attempt, never refused.
	lax bool
}

// outerKey reads the marks of req; checkHeader found a field that may carry
// one. It returns the SDK's call (nil without marks) and the operation's
// key. Where the Transport chooses the key, it is the SDK's call id or the
// key of the pending call this one continues. outerKey is called once the
// body is ready, before anything is sent.
func (op *operation) outerKey(cfg *config, req *http.Request, pending *loops.Pending) (*outerCall, string) {
	m, ok := wire.ReadMark(req.Header)
	if !ok || op.hop {
		return nil, op.key
	}
	o := &outerCall{mark: m, marked: true}
	if op.own || op.key == "" {
		return o, op.key // the application's key, or a request that takes none
	}
	if m.Count < 0 {
		return o, op.key // no count: nothing to match a retry by
	}
	if m.Id != "" && wire.ValidateKey(m.Id) == nil {
		return o, m.Id
	}
	if op.body.Stream != nil {
		return o, op.key // a streamed body has no fingerprint before it is sent: the minted key stands
	}
	fp, err := op.body.Fingerprint(req)
	if err != nil {
		return o, op.key // no match possible: the minted key stands
	}
	o.print = fp
	return o, pending.Key(fp, m.Count, op.key, cfg.nanos())
}

// outerStart decides whether a call sends one attempt for an outer loop. It
// decides before the first attempt, from o (the call's outer loop's part,
// nil without marks) and WithOuterRetries' mode. It returns the call's part:
// o, or a new one with WithOuterRetries(true). It returns the number of the
// loop's attempts before this call. For a key of the application's, base is
// the key's recent attempts. outerStart is called only for a marked call, a
// repeated key of the application's, or with WithOuterRetries(true).
func outerStart(o *outerCall, mode outerMode, base int) (*outerCall, int) {
	if o == nil {
		if mode != outerAlways {
			return nil, base
		}
		o = &outerCall{}
	}
	if o.marked && o.mark.Count >= 0 {
		base = o.mark.Count
	}
	switch mode {
	case outerAlways:
		o.single = true
	case outerAuto:
		switch {
		case !o.marked:
			// A repeated key of the application's without marks is left
			// as it was (internal/loops, recent.go): it may be a loop's retry, or the
			// application resolving an unknown outcome, which the
			// Transport retries.
		case o.mark.Count < 0:
			// stripe-go: a retry loop once its key repeats. Its first
			// attempt is retried by the Transport: with stripe-go's
			// retries off, that is how the Transport retries its calls
			// (under stripe-go's key, which makes a re-sent POST safe).
			o.single = base > 0
		default:
			o.single = o.mark.WillRetry()
		}
	}
	return o, base
}

// sendsOne reports whether o's call sends one attempt, an outer loop
// retrying; o is nil for a call without one.
func (o *outerCall) sendsOne() bool { return o != nil && o.single }

// refuses reports whether the gate's refusal of o's call is answered with a
// refusal response (see WithRefusalResponses). It is when the call is an
// outer loop's attempt whose SDK honours a do-not-retry answer (the marks'
// table).
func (o *outerCall) refuses() bool { return o.sendsOne() && o.mark.Respond }

// An SDK that retries on its own (stripe-go, say) calls RoundTrip again
// with the same key after a failure. Each of those calls is a retry of the
// same operation, not a new one: the Transport numbers its attempts after
// the earlier calls' (Retry-Attempt, Report, Events), and the gate admits
// its first attempt as a retry (a retry token, not a first attempt's free
// pass). Attempts are not capped across calls: re-sending a key is also how
// a caller resolves an unknown outcome. When the SDK's marks, or
// WithOuterRetries(true), say a loop retries, each call sends one attempt
// and the loop drives (loops.go).

// A server's delay holds on every path. The Transport's own retries wait
// it (decide.go); a 429's pause holds the host (settle.go). A retry that
// an outer loop sends, an SDK's marked loop or a hand-written one, is a
// call of its own: the time its server named for the operation's next try
// is kept here between the calls. The loop's next try waits what is left
// of it (host.State.outerWait), within the caller's deadline: the one wait
// the Transport adds to a loop, the server's.

// askedBefore returns the time the server named for the next try of the
// operation c, an outer loop's call, continues: 0 if none.
func (c *call) askedBefore(now int64) int64 {
	switch {
	case c.loop != nil && c.loop.From != nil:
		return c.t.asked.Get(c.loop.From, now)
	case c.outer != nil && c.outer.marked && c.op.key != "":
		return c.t.asked.Get(c.op.key, now)
	}
	return 0
}
