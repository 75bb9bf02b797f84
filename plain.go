package resilient

import (
	"net/http"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/resilienthttp/resilient/internal/wire"
)

// A plain call is the common request: one the Transport sends as is, or
// with only the key it mints added, and that nothing watches (no
// Observer, Report, hedging, custom Classifier or named operation). It has
// no key of the application's, no attempt header, no outer retry loop in
// sight, and a body that is none or the caller's to rewind (GetBody). Its
// host has no pause, rate limiter or breaker to pass. Its first attempt is
// the loop's first attempt (call.run), step for step: the same operation
// (resolved as call.resolve resolves it), the same admission (reservation
// reset and sizes), the same send (sendAsIs, or the plan and the sender),
// and on a plain success the same settlement (operation.succeeded). What
// it skips is the loop's state, which a plain success never reads: the
// call, the loop and the ledger are built only for any other answer. That
// answer is handed to the loop at its settle step, with the state the loop
// would have built (Transport.resume), as if the loop had sent it.
// plain_internal_test.go checks the two paths against each other.

// plainBody reports whether req's body may be a plain call's: none, or one
// the caller can rewind (GetBody), which nothing is read from before the
// send.
func plainBody(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// sendPlain sends req as a plain call, if it is one. ok is false when it
// is not; nothing was sent then, and the loop sends it, with *hs, the scan
// of req's header if sendPlain made one (hs.checked). Else sendPlain
// returns the call's outcome, the loop's if the first answer was not a
// plain success. (RoundTrip tries it when t.plain, for a plainBody.)
func (t *Transport) sendPlain(req *http.Request, hs *wire.HeaderScan) (resp *http.Response, err error, ok bool) {
	ctx := req.Context()
	if name, _ := operationFromContext(ctx); name != "" || req.Response != nil || outerContexts.Load() || t.loopsKnown() {
		return nil, nil, false // a named operation, a redirect hop, a loop in sight
	}
	if _, keyed := keyFromContext(ctx); keyed || reportFromContext(ctx) != nil {
		return nil, nil, false
	}
	if *hs, err = wire.CheckRequest(req, t.cfg.keyHeader, t.cfg.attemptHeader); err != nil || hs.Alt != "" || hs.Marked || hs.AttemptSet {
		return nil, nil, false // the loop's to refuse, or to send with what it carries
	}
	now := t.cfg.nanos() // the first attempt's admission
	h := t.hosts.Host(req.URL.Host, now)
	if h.Pauses.PauseUntil.Load() != 0 || h.Limiter != nil || h.Breaker != nil || ctx.Err() != nil {
		return nil, nil, false
	}
	// The operation, as call.resolve resolves it (operation.prepare): a
	// key minted for the key methods, the body as it is.
	var op operation
	if t.cfg.keyMethods.HasBit(hs.Method, req.Method) {
		k, err := t.keys.Mint()
		if err != nil {
			return nil, nil, false // the loop mints again, and refuses the call if that fails too
		}
		op = operation{key: k, unsafe: !idempotentMethod(req.Method)}
	}
	if req.Body != nil {
		op.body.Init(ctx, req, t.cfg.maxBodyBuffer, false) // http.NoBody, or GetBody's: nothing to read, so no error
	}
	op.asIs, op.clipped = op.key == "", hs.Clipped // a plainBody is the caller's own (replayBody.callers)
	g := host.Applicant{Cfg: &t.hc, Ctx: ctx, Req: req}
	var (
		a wire.Attempt
		r host.Reservation
	)
	r.Reset(h, now, false, true, false)
	r.Sizes()
	if op.asIs {
		op.body.Take() // the base transport owns it now
		wire.SendAsIs(&t.wire, req, &a, 0, now)
	} else {
		var p wire.Plan
		op.plan(&p, ctx, 0, 0, now, nil)
		s := op.sender(t, req)
		s.Send(&a, &p)
	}
	if plainSuccess(a.Resp, a.Err) {
		if op.asIs {
			h.Succeeded(&g, &a, &r) // operation.succeeded's part: the body went with the request, and no key was sent
		} else {
			op.succeeded(&t.cfg, h, &g, &a, &r)
		}
		return a.Resp, nil, true
	}
	resp, err = t.resume(&g, h, &op, &a, &r)
	return resp, err, true
}

// resume hands a plain call of op whose first attempt a, admitted by r to
// h, got another answer than a plain success to the loop. The call is as
// call.resolve and Transport.roundTrip build it for the request: unnamed,
// unobserved, keyed by the Transport if at all, its own first attempt
// (numbered 0), with no outer loop.
func (t *Transport) resume(g *host.Applicant, h *host.State, op *operation, a *wire.Attempt, r *host.Reservation) (*http.Response, error) {
	c := &call{t: t, cfg: &t.cfg, Applicant: *g, h: h, op: *op}
	c.led.start(&t.cfg, g.Ctx, g.Req, "", nil)
	c.led.resolved(op.key, !op.body.Replayable())
	var l loop
	l.cur, l.res = *a, *r
	return c.run(&l, r.At, true)
}
