package resilient

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/resilienthttp/resilient/internal/wire"
)

// HedgingConfig configures hedged requests (WithHedging). The zero value
// hedges once, at the host's recent p95 latency.
type HedgingConfig struct {
	// Delay is how long the Transport waits for an answer before it sends
	// a hedge. With Quantile set, it is the delay used until the host has
	// enough recent latencies for the quantile (0: no hedge until then).
	// Negative means 0.
	Delay time.Duration

	// Quantile, in (0, 1), hedges after that quantile of the host's recent
	// attempt latencies (0.95: after the p95). They are tracked per host in
	// a small histogram that follows the last thousand or so answers.
	// Default 0.95 when Delay is 0 too; 0 with a Delay hedges after the
	// fixed Delay. Outside [0, 1) it is the default. The quantile is used
	// once the host has 5/(1−Quantile) samples (100 for the p95).
	Quantile float64

	// MaxHedges is the number of extra copies a request may send in all,
	// each after another Delay (default 1; below 1 is 1). Hedges count
	// against WithMaxAttempts like retries.
	MaxHedges int
}

// hedging is a resolved HedgingConfig.
type hedging struct {
	delay    time.Duration
	quantile float64 // 0: fixed delay
	max      int
}

func (hc HedgingConfig) resolve() hedging {
	h := hedging{delay: max(hc.Delay, 0), quantile: hc.Quantile, max: max(hc.MaxHedges, 1)}
	if !(h.quantile >= 0 && h.quantile < 1) || (h.quantile == 0 && h.delay == 0) {
		h.quantile = 0.95
	}
	return h
}

// WithHedging makes the Transport hedge requests that are safe to send
// twice at once: when the first answer is slow, it sends another copy of
// the request and returns whichever copy answers first. Hedging is off by
// default.
//
// Only some requests are hedged. Their method is idempotent (GET, HEAD,
// OPTIONS, PUT, DELETE). They carry no idempotency key, and their body can
// be replayed. Two copies of a keyed request in flight at once would meet
// the server's "in progress" conflict. An unsafe request without a key
// could take effect twice.
//
// A hedge is admitted by the host's gate like a retry. It takes a retry
// token and the budget's share. It is not sent:
//
//   - while the server pushes back or the host is paused by a Retry-After,
//     or before the time a copy's answer named for the operation;
//   - while the host's breaker is open;
//   - when the rate limiter has no token at hand;
//   - when attempts (WithMaxAttempts) are used up;
//   - when it could not finish before the deadline.
//
// A refused hedge is simply not sent: the copies in flight go on. Each
// hedge is a new attempt, numbered in the attempt header (Retry-Attempt: n)
// and in the Report.
//
// The first definitive answer wins: a success or an answer not worth
// retrying. The other copies are cancelled and their bodies closed.
// RoundTrip returns only once their goroutines have ended. A retryable
// answer while another copy is in flight does not trigger a retry. The
// Transport waits for that copy, which is the retry already under way. It
// retries (with backoff, through the gate) only when every copy has failed.
// The caller's context bounds every copy.
func WithHedging(hc HedgingConfig) Option {
	return func(c *config) {
		h := hc.resolve()
		c.hedge = &h
	}
}

// hedgeMethod reports whether requests with method m may be hedged.
func hedgeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete, "":
		return true
	}
	return false
}

// hedgeCopy is one copy of a hedged round, owned by the round: its
// admission, its context's cancel, its number.
type hedgeCopy struct {
	res    host.Reservation
	cancel context.CancelFunc
	n      int
	hedge  bool
	wait   time.Duration // before it was sent: the gate's delay, or the hedge delay
	done   bool
}

// hedgeResult is what a copy's goroutine hands back.
type hedgeResult struct {
	k int // index in the round's copies
	a wire.Attempt
}

// hedgeRound is a hedged round: its copies, their goroutines, and the
// timer that sends the next copy. It owns them; the loop decides what
// each copy's answer means (call.hedged).
type hedgeRound struct {
	results  chan hedgeResult
	copies   []hedgeCopy
	wg       sync.WaitGroup
	inflight int
	delay    time.Duration // between copies
	timer    *time.Timer
	tick     <-chan time.Time // the timer's, nil when it is not armed
}

// newHedgeRound returns a round of at most copies copies, delay apart.
func newHedgeRound(copies int, delay time.Duration) *hedgeRound {
	return &hedgeRound{results: make(chan hedgeResult, copies), copies: make([]hedgeCopy, 0, copies), delay: delay}
}

// launch sends copy cp in a goroutine of its own: s sends p, a plan
// with a context of the copy's own.
func (hr *hedgeRound) launch(cp hedgeCopy, s wire.Sender, p *wire.Plan) {
	k := len(hr.copies)
	hr.copies = append(hr.copies, cp)
	job := struct {
		s wire.Sender
		p wire.Plan
	}{s, *p} // the goroutine's one allocation
	hr.inflight++
	hr.wg.Add(1)
	go func() {
		defer hr.wg.Done()
		var a wire.Attempt
		job.s.Send(&a, &job.p)
		hr.results <- hedgeResult{k, a}
	}()
}

// arm starts the timer of the next copy.
func (hr *hedgeRound) arm() {
	if hr.timer == nil {
		hr.timer = time.NewTimer(hr.delay)
	} else {
		hr.timer.Reset(hr.delay)
	}
	hr.tick = hr.timer.C
}

// next waits for the timer (tick) or for a copy's result.
func (hr *hedgeRound) next() (res hedgeResult, tick bool) {
	select {
	case <-hr.tick:
		hr.tick = nil
		return res, true
	case res = <-hr.results:
		return hr.arrived(res), false
	}
}

// result waits for a copy's result.
func (hr *hedgeRound) result() hedgeResult { return hr.arrived(<-hr.results) }

// arrived counts out the copy whose result res has come.
func (hr *hedgeRound) arrived(res hedgeResult) hedgeResult {
	hr.inflight--
	hr.copies[res.k].done = true
	return res
}

// cancelRest cancels the copies still in flight.
func (hr *hedgeRound) cancelRest() {
	for k := range hr.copies {
		if !hr.copies[k].done {
			hr.copies[k].cancel()
		}
	}
}

// end stops the timer and waits for every goroutine of the round.
func (hr *hedgeRound) end() {
	hr.timer.Stop()
	hr.wg.Wait()
}

// after returns the hedge delay for a host whose recent latencies are l
// (l.hist nil if it keeps none): the quantile's when the host has enough
// of them, else the fixed delay.
func (hg *hedging) after(l *host.Latency) time.Duration {
	if hg.quantile > 0 && l.Hist != nil {
		if d, ok := l.Hist.Quantile(hg.quantile); ok {
			return d
		}
	}
	return hg.delay
}

// hedgeDelay returns how long to wait before hedging the call's next
// attempt, having sent hedges so far. It returns 0 if the attempt is not to
// be hedged.
func (c *call) hedgeDelay(hedges int) time.Duration {
	hg := c.cfg.hedge
	if hg == nil || hedges >= hg.max || c.op.key != "" || !c.op.body.Replayable() || !hedgeMethod(c.Req.Method) {
		return 0
	}
	return hg.after(&c.h.Latency)
}

// hedged sends attempt n, the i-th of the call, admitted by res, as a
// hedged round, the call having sent hedges so far. While no definitive
// answer has come, it sends the hedges left (HedgingConfig.MaxHedges), numbered n+1, n+2…. Each goes delay after the previous copy.
// Each copy runs in its own goroutine with its own context, a child of the
// caller's. hedged returns the answer that ends the round, its verdict and
// the number of hedges sent. In order, as each copy answers:
//
//   - a hedge whose body could not be rewound never left: it gives back
//     what it took (withdraw), and the copies in flight go on;
//   - the copy is settled (settle), racing the copies still in flight;
//   - the first definitive answer wins: the other copies are cancelled,
//     waited for and settled as losers, their answers discarded;
//   - a retryable answer, or a server's refusal (a 5xx or 429 it says not
//     to retry, such as pushback) while another copy is in flight, is
//     discarded and the round waits for the other copy;
//   - the last copy's answer ends the round when every copy failed and the
//     timer has not sent another.
//
// Every goroutine of the round has ended when hedged returns. The winner's
// context is cancelled when its body is closed.
func (c *call) hedged(res *host.Reservation, i, n, hedges int, delay time.Duration) (wire.Attempt, verdict, int) {
	hg := c.cfg.hedge
	budget := hg.max - hedges
	round := newHedgeRound(1+budget, delay)
	c.launch(round, *res, i, n, false, res.Delay)
	round.arm()
	defer round.end()
	sent := 0
	var (
		last  wire.Attempt
		lastV verdict
	)
	for round.inflight > 0 {
		got, tick := round.next()
		if tick {
			if c.hedge(round, i+sent+1, n+sent+1, delay) {
				sent++
				if sent < budget {
					round.arm()
				}
			} // else not sent; the copies in flight go on
			continue
		}
		cp, a := &round.copies[got.k], got.a
		if !a.Sent && round.inflight > 0 {
			c.withdraw(cp)
			last, lastV = a, verdict{}
			continue
		}
		ro := alone
		if round.inflight > 0 {
			ro = racing
		}
		// A winning copy has the others settled as losers before the
		// ledger notes it, so that the Report lists them first.
		v, _ := c.settle(&a, &cp.res, ro, cp.wait, cp.hedge, func(v verdict) {
			if wins(ro, &a, v) {
				c.settleLosers(round)
			}
		})
		if wins(ro, &a, v) {
			c.keepCopy(&a, cp.cancel)
			return a, v, sent
		}
		if round.inflight > 0 {
			if a.Resp != nil {
				wire.Discard(a.Resp)
			}
			cp.cancel()
		} else {
			c.keepCopy(&a, cp.cancel)
		}
		last, lastV = a, v
	}
	return last, lastV, sent
}

// wins reports whether copy a of a hedged round, in role ro, decided v,
// ends the round: a definitive answer, and not a server's refusal while
// another copy is in flight. A server's refusal (a 5xx or 429 it will not
// have us retry, pushback above all) to one copy says nothing of the copy
// it is still serving. A hedge is a retry to the server, the first to be
// shed.
func wins(ro role, a *wire.Attempt, v verdict) bool {
	return v.d.Action != Retry && !(ro == racing && shed(a, v.d))
}

// launch sends copy n of a hedged round, the i-th of the call, admitted by
// res. The copy runs in a goroutine and a context of its own.
func (c *call) launch(round *hedgeRound, res host.Reservation, i, n int, hedge bool, wait time.Duration) {
	ctx, cancel := context.WithCancel(c.Ctx)
	var p wire.Plan
	c.op.plan(&p, ctx, i, n, res.At, nil)
	round.launch(hedgeCopy{res: res, cancel: cancel, n: n, hedge: hedge, wait: wait}, c.op.sender(c.t, c.Req), &p)
}

// hedge sends hedge n, the i-th attempt of the call, of round. It goes
// delay after the copy before it, if attempts are left and the gate admits
// it.
func (c *call) hedge(round *hedgeRound, i, n int, delay time.Duration) bool {
	if c.led.attempts+round.inflight >= c.cfg.maxAttempts {
		return false
	}
	res, err := c.h.ReserveHedge(&c.Applicant, c.cfg.nanos())
	if err != nil {
		return false
	}
	c.launch(round, res, i, n, true, delay)
	c.led.hedgeSent(n, delay)
	return true
}

// withdraw gives back what copy cp took: it never left (its body could
// not be rewound), and is not counted.
func (c *call) withdraw(cp *hedgeCopy) {
	cp.res.Cancel()
	cp.cancel()
	c.led.hedgeWithdrawn(cp.n)
}

// keepCopy ties the copy's context to what the caller gets: cancelled when
// the response body is closed, at once when there is no response.
func (c *call) keepCopy(a *wire.Attempt, cancel context.CancelFunc) {
	if a.Resp == nil {
		cancel()
		return
	}
	a.Resp.Body = wire.CancelOnClose(a.Resp.Body, cancel)
}

// settleLosers cancels the copies of round still in flight once another
// has won. It waits for each and settles it as a loser. A copy cancelled
// because another answered is CategoryCanceled, neutral for the host. An
// answer that came anyway is discarded. Its failure counts against the
// host; its healthy answer earns no token.
func (c *call) settleLosers(round *hedgeRound) {
	round.cancelRest()
	for round.inflight > 0 {
		got := round.result()
		cp, a := &round.copies[got.k], got.a
		if !a.Sent {
			c.withdraw(cp)
			continue
		}
		c.settle(&a, &cp.res, loser, cp.wait, cp.hedge, nil)
		if a.Resp != nil {
			wire.Discard(a.Resp)
		}
		cp.cancel()
	}
}
