package resilient

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/resilienthttp/resilient/internal/reason"
	"github.com/resilienthttp/resilient/internal/wire"

	"github.com/resilienthttp/resilient/internal/clock"
)

// role is what else is in flight when an attempt is settled: a hedged
// round's copies (hedge.go) credit the host less than an attempt alone.
type role uint8

const (
	alone  role = iota // no other copy in flight
	racing             // other copies in flight: a refusal sheds this copy only
	loser              // another copy won: this one is cut short
)

// settle is the one settle step of every attempt: the loop's, a hedged
// round's copy (racing, or alone once the others have ended) and a loser.
// a was admitted by res and sent after wait; hedge says it was a hedge.
// It returns a's verdict; done says that a, a plain success, ended the
// call already (its response is the caller's). In order:
//
//  1. a plain success that ends an unobserved call (call.succeeded);
//  2. a loser cut short without an answer: cancelled, not classified;
//  3. the verdict (decide.go: classify, then the unsafe-retry guard);
//  4. res released with what a says of the host, the host observes a;
//  5. before, if not nil, given the verdict (a hedged round settles its
//     losers then, when a wins);
//  6. the ledger notes a.
//
// ro lowers the credit of a hedged round's copies. A loser earns no
// token; the round's one healthy answer does, so hedges cannot pay for
// themselves. A copy the server sheds (pushback) while another is in
// flight says nothing of the host. A loser cut short without an answer
// counts its time until then for the host's quantile, as a lower bound of
// what it would have taken. So the slow answers hedging cuts short are
// not forgotten.
func (c *call) settle(a *wire.Attempt, res *host.Reservation, ro role, wait time.Duration, hedge bool, before func(verdict)) (v verdict, done bool) {
	if c.endsOnSuccess && res.First && plainSuccess(a.Resp, a.Err) {
		c.succeeded(a, res)
		return verdict{}, true
	}
	if ro == loser && a.Resp == nil {
		res.Release(&c.Applicant, host.HealthNeutral)
		c.h.Latency.Cut(a)
		v = verdict{d: Decision{Action: Terminal, Category: CategoryCanceled}, err: a.Err}
		c.led.note(a, v.d, wait, hedge)
		return v, false
	}
	v = c.verdict(a)
	a.Err = v.err
	if a.Sent {
		hl := healthOf(a.Resp, a.Err, v.d)
		switch {
		case ro == loser && hl == host.HealthOK, ro == racing && v.d.Pushback && shed(a, v.d):
			hl = host.HealthNeutral
		}
		res.Release(&c.Applicant, hl)
		if !res.Retry && hl != host.HealthNeutral {
			c.h.NoteFirst(a.End, hl == host.HealthOK)
		}
		c.observe(a, v)
	} else {
		res.Cancel()
	}
	if before != nil {
		before(v)
	}
	c.led.note(a, v.d, wait, hedge)
	return v, false
}

// observe tells the host what attempt a showed of it: its latency, a
// server-directed pause, and evidence that the server dedupes. A 429 with
// a delay holds back every request to the host, whether or not this
// request retries; pushback holds back its retries (for at most the
// Retry-After maximum).
//
// A 503 with a delay depends on the host's recent first attempts
// (firsts): two buckets of at most 200 each and 10 s each. They may show
// that the host sheds: as many failed as a healthy host, failing 1 in 7,
// shows less than 1 % of the time (in the current bucket too, once it
// holds 20). Then its retries are refused at once for the delay, never
// waited out: an overloaded host looks so. Otherwise it pauses this
// operation only. Its retry waits the delay if the deadline and the retry
// control allow, then goes out. One bad backend of many behind a balancer
// looks so. So does a cold host: one or two failed calls are no evidence
// that it sheds. A cold host (fewer than 20 first attempts) has one such
// wait at a time: a second 503 with a delay while one is waited out is
// taken as the host shedding (host.Firsts.ColdWait). When the wait ends, the
// host is judged again (host.Reservation.Wait): if the first attempts sent
// meanwhile show that it sheds, the retry is not sent and the 503
// stands. A single call of a cold client sends nothing meanwhile, and
// retries. A fleet of cold per-client Transports on a shedding server
// sends few retries into the overload. The attempt of a declared outer
// loop without marks pauses the host's retries: its loop's next try is a
// call the Transport cannot tie to this operation.
func (c *call) observe(a *wire.Attempt, v verdict) {
	d := v.d
	if a.Err == nil {
		c.h.Latency.Observe(a.Took)
	}
	if v.shown {
		c.noteShown(a.End)
	}
	if d.Pushback && a.Resp != nil {
		c.h.Pauses.PushBack(a.End, min(d.Delay, c.cfg.retryAfterMax))
	}
	if a.Resp == nil || d.Delay <= 0 || d.Delay > c.cfg.retryAfterMax {
		return
	}
	c.Asked = max(c.Asked, clock.Later(a.End, d.Delay)) // for a loop's next try (loops.go, internal/loops asked.go)
	switch a.Resp.StatusCode {
	case http.StatusTooManyRequests:
		c.h.Pauses.Pause(a.End, d.Delay, true)
	case http.StatusServiceUnavailable:
		switch f := &c.h.Pauses.Firsts; {
		case c.unlinkedOuter() || c.h.FirstsShedding(a.End) || !f.ColdWait(a.End, d.Delay):
			c.h.Pauses.Pause(a.End, d.Delay, false)
		case !f.Warm(a.End):
			c.Cold = true // judged again when the wait ends (host.Reservation.Wait)
		}
	}
}

// unlinkedOuter reports whether c is an attempt of a declared outer loop
// (WithOuterRetries(true)) without marks: the loop's next try cannot be
// tied to c's operation (askedBefore), so a 503's delay holds the host's
// retries, every outer loop's next try among them.
func (c *call) unlinkedOuter() bool {
	return c.outer != nil && c.outer.single && !c.outer.marked
}

// unobserved reports whether only a few learn from c's first attempt when
// it is a plain success. They are the host, the key's evidence and an own
// key's attempt count (Transport.recent). There must be no Report, no
// Observer, no custom Classifier and no hedging (config.observed). There
// must be no Store record to finish. Such an attempt ends the call
// (call.succeeded).
func (c *call) unobserved() bool {
	return !c.cfg.observed && c.led.rep == nil && (c.op.name == "" || c.cfg.store == nil)
}

// succeeded ends c after its first attempt a, a plain success, when
// nothing observes c (call.unobserved). It does what classify, observe,
// note and finish would do for it that anything reads afterwards. It
// builds no Decision, Report or Events. The classifier's answer is a
// success. The host hears a healthy answer and its latency. The answer to
// a minted key on an unsafe request may show that the server dedupes.
// call.noteShown records it, as observe would. An own key needs no
// evidence, nor does a route whose evidence noting would not renew. The
// attempt is counted, for the recent attempts of an own key. The resends
// count, which only a Report or an Event would show, is not kept. a's
// response is the caller's.
func (c *call) succeeded(a *wire.Attempt, res *host.Reservation) {
	c.op.succeeded(c.cfg, c.h, &c.Applicant, a, res)
	c.led.attempts++
}

// succeeded is what a plain success of op, attempt a of g admitted by res
// to h, does to the operation and its host (call.succeeded). A plain call
// (transport.go, the plain call) ends so too.
func (op *operation) succeeded(cfg *config, h *host.State, g *host.Applicant, a *wire.Attempt, res *host.Reservation) {
	h.Succeeded(g, a, res)
	if op.unsafe && !op.own && h.Evidence.Renews(g.Req, a.End) &&
		showsDedupe(a.Resp.Header, replayHeadersOf(a.Resp.Header), cfg.keyHeader, op.key, Decision{Action: Success}) {
		op.noteShown(cfg, h, g.Req, a.End) // all the guard does on a success
	}
	op.body.Close()
}

// shed reports whether attempt a, decided d, is a server's refusal: a 5xx
// or 429 it says not to retry.
func shed(a *wire.Attempt, d Decision) bool {
	return a.Resp != nil && d.Action == Terminal && (a.Resp.StatusCode >= 500 || a.Resp.StatusCode == http.StatusTooManyRequests)
}

// healthOf judges an attempt's outcome for the breaker and the tokens: only
// outcomes that say the host is unhealthy count against it.
func healthOf(resp *http.Response, err error, d Decision) host.Health {
	if d.Category == "" && plainSuccess(resp, err) {
		return host.HealthOK // the common case, as the status switch below has it
	}
	switch {
	case d.Category == CategoryCanceled:
		return host.HealthNeutral
	case err != nil:
		if errors.Is(err, reason.ErrInvalidRequest) || errors.Is(err, context.Canceled) {
			return host.HealthNeutral // refused locally, or our own cancellation
		}
		return host.HealthFailure
	case d.Category == CategoryInProgress:
		return host.HealthNeutral // the host is fine; the operation is busy
	}
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests && (d.Delay > 0 || headerValue(resp.Header, "Retry-After") != ""):
		return host.HealthNeutral // the pause handles it
	case code == http.StatusRequestTimeout || code == http.StatusTooEarly:
		return host.HealthNeutral
	case code == http.StatusNotImplemented || code == http.StatusHTTPVersionNotSupported:
		return host.HealthOK // a permanent answer from a working host
	case code >= 500, code == http.StatusTooManyRequests:
		return host.HealthFailure
	}
	return host.HealthOK
}
