package resilient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"
)

// attempt is one attempt's result, owned by the iteration of the loop that
// sent it.
type attempt struct {
	n    int
	req  *http.Request  // the copy sent, with the key and attempt headers
	resp *http.Response // nil when err is set
	err  error
	took time.Duration // until response headers or error; 0 if not measured
	end  time.Time
	// timed: took is measured for the host's latency average (see
	// reservation.timed); an attempt not timed that is not a plain
	// success is measured all the same, for its end time (an unclocked
	// first attempt, which has no start, gets only its end time).
	timed bool
	// sent is false when the attempt never reached the base transport (its
	// body could not be rewound).
	sent bool
	// rewritten is true when net/http wrote the request more than once
	// (its own re-send on a dead keep-alive connection).
	rewritten bool
	// resends counts the times the base transport sent the attempt again
	// on its own (net/http on a dead keep-alive connection).
	resends int
	// wroteAny is true when the request was written at least once; traced
	// says whether the writes were watched (keyed requests only).
	wroteAny, traced bool
	// stop is why the Transport will not retry a, when it overrode the
	// classifier (ErrUnsafeRetry); nil otherwise.
	stop error
	// replay holds resp's replay headers once replaySeen (see
	// replayHeaders).
	replay     replayHeaders
	replaySeen bool
}

// replayHeaders returns the replay headers of a's response (which must not
// be nil), looked up on first use.
func (a *attempt) replayHeaders() replayHeaders {
	if !a.replaySeen {
		a.replay, a.replaySeen = replayHeadersOf(a.resp.Header), true
	}
	return a.replay
}

// send sends attempt n (the i-th of this call) through the base transport:
// the caller's request itself when nothing is to be added to it (op.asIs),
// else a copy carrying the key and attempt headers. start is when the gate
// admitted it, the start of its duration; timed says to measure it (see
// reservation.timed). The result is written to a (filled in place: a
// returned attempt would be copied). It never mutates the caller's
// request and shares nothing with other attempts.
func (c *call) send(a *attempt, i, n int, start time.Time, timed bool) {
	cfg := &c.t.cfg
	*a = attempt{n: n}
	var (
		areq   *http.Request
		w      *writeWatch
		cancel context.CancelFunc
	)
	if i == 0 && c.op.asIs {
		// An unkeyed first attempt with nothing to add is the caller's
		// request, as a bare client would send it: no copy of it or of its
		// header. The RoundTripper contract forbids changing the request,
		// not sending it; without an attempt header, a server reads a
		// first attempt.
		c.op.body.first = nil // the base transport owns it now
		areq = c.req
	} else {
		var err error
		if areq, w, cancel, err = c.attemptRequest(i, n); err != nil {
			a.err = err // only a retry can get here (GetBody failed); nothing is sent
			return
		}
	}
	a.req = areq
	resp, err := c.t.base.RoundTrip(areq)
	a.sent, a.timed = true, timed
	switch {
	case start.IsZero():
		// An unclocked first attempt (call.unclocked), never timed (a
		// timed one reads the clock at admission): an answer other than
		// a plain success gets its end time, for what reads it (a
		// server's pause, Outcome.Now, the dedupe evidence of a keyed
		// answer).
		if !plainSuccess(resp, err) {
			a.end = cfg.now()
		}
	case timed || !plainSuccess(resp, err):
		// One monotonic clock read: time.Now reads the wall clock too,
		// which the end time can take from start.
		a.took = cfg.since(start)
		a.end = start.Add(a.took)
	default:
		// An untimed success: its end is taken as its start. What reads
		// it (the evidence that a server dedupes, kept for an hour) errs
		// early by the attempt's duration.
		a.end = start
	}
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
	if resp != nil && resp.Body == nil {
		resp.Body = http.NoBody // as http.Client would; callers and discard read it
	}
	if w != nil {
		wrote := w.wrote.Load()
		a.traced, a.wroteAny, a.rewritten = true, wrote >= 1, wrote >= 2
		a.resends = max(int(w.resent.Load()), int(wrote)-1)
	}
	if cancel != nil {
		if resp != nil {
			resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
		} else {
			cancel()
		}
	}
	a.resp, a.err = resp, err
}

// attemptRequest returns attempt n's copy of the caller's request (the
// i-th of this call): its context (the attempt timeout's, and the write
// watch of a keyed attempt), its header (the caller's fields and the key
// and attempt headers), its body. cancel, if not nil, ends the attempt's
// context. It fails only for a retry whose body cannot be had.
func (c *call) attemptRequest(i, n int) (areq *http.Request, w *writeWatch, cancel context.CancelFunc, err error) {
	cfg := &c.t.cfg
	ctx := c.ctx
	if cfg.attemptTimeout > 0 {
		ctx, cancel = context.WithTimeout(c.ctx, cfg.attemptTimeout)
	}
	// http.Transport re-sends a keyed request by itself when a reused
	// connection dies before the response; count the writes to know. A new
	// watch per attempt: a previous attempt's write loop may still report,
	// and WithClientTrace composes the caller's hooks into the trace it is
	// given. Keyed requests only.
	if c.op.key != "" {
		w = &writeWatch{key: [1]string{c.op.key}}
		if simbugs && i > 0 && bugActive("newkey") {
			w.key[0], _ = c.t.keys.mint()
		}
		w.trace.WroteRequest = w.wroteRequest
		ctx = w.context(ctx)
	}
	areq = c.req.WithContext(ctx)
	// A first attempt has no attempt header (absent means 0), unless the
	// caller's header has one to overwrite.
	attempt := cfg.attemptHeader != "" && (n > 0 || c.op.attemptSet)
	extra := 0
	if attempt {
		extra++
	}
	if w != nil && c.op.field == "" {
		extra++ // the key header
	}
	if extra > 0 {
		areq.Header = attemptHeader(c.req.Header, extra, i == 0 && c.op.clipped) // never nil: checkRequest refused a nil Header
	}
	// else (the first attempt of a request whose key the caller set in its
	// header) the attempt shares the caller's header, which nothing writes.
	if w != nil && c.op.field == "" {
		areq.Header[cfg.keyHeader] = w.key[:]
	}
	if attempt {
		areq.Header[cfg.attemptHeader] = attemptValue(n)
	}
	body, err := c.op.body.body(i)
	if err != nil {
		if cancel != nil {
			cancel()
		}
		return nil, nil, nil, err
	}
	if i == 0 {
		c.op.body.first = nil // the base transport owns it now
	}
	areq.Body = body
	areq.GetBody = c.op.body.rewind()
	if w != nil && areq.GetBody != nil && body != http.NoBody && !idempotentMethod(c.req.Method) {
		// net/http re-sends a request with an Idempotency-Key header by
		// itself when a reused connection dies: safe when nothing was
		// written, a second effect otherwise on a server that ignores keys.
		// It rewinds the body first: refuse the rewind once a write is
		// seen, and let the Transport decide with what it knows. A request
		// without a body has nothing to rewind (net/http never calls its
		// GetBody: http.NoBody is sent again as is), so it gets no guard
		// and saves the method value's allocation; its re-sends are still
		// counted by the watch's writes.
		w.rewind = areq.GetBody
		areq.GetBody = w.getBody
	}
	return areq, w, cancel, nil
}

// writeWatch watches the writes of one keyed attempt: it counts the times
// net/http wrote the request (its ClientTrace's WroteRequest) and guards the
// rewind net/http calls before re-sending it on its own (getBody). One
// allocation holds the trace, the counters and the key header's value.
type writeWatch struct {
	parent context.Context // the attempt's context without the trace (watchCtx)
	trace  httptrace.ClientTrace
	wrote  atomic.Int32 // writes of the request, net/http's re-sends included
	resent atomic.Int32 // rewinds allowed: re-sends after nothing was written
	rewind func() (io.ReadCloser, error)
	key    [1]string // the key header's value
}

func (w *writeWatch) wroteRequest(httptrace.WroteRequestInfo) { w.wrote.Add(1) }

// context returns parent carrying w's trace. When parent carries no trace
// of the caller's to compose with, that is w itself (watchCtx), which
// saves the allocation of httptrace.WithClientTrace's context.
func (w *writeWatch) context(parent context.Context) context.Context {
	if traceKey == nil || httptrace.ContextClientTrace(parent) != nil {
		return httptrace.WithClientTrace(parent, &w.trace)
	}
	w.parent = parent
	return (*watchCtx)(w)
}

// watchCtx is a writeWatch seen as the context of its attempt: its parent's,
// with the watch's ClientTrace under httptrace's key.
type watchCtx writeWatch

func (c *watchCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *watchCtx) Done() <-chan struct{}       { return c.parent.Done() }
func (c *watchCtx) Err() error                  { return c.parent.Err() }
func (c *watchCtx) Value(key any) any {
	if key == traceKey {
		return &c.trace
	}
	return c.parent.Value(key)
}

// traceKey is the key under which httptrace keeps a context's ClientTrace,
// learnt once by letting httptrace look a trace up in a context that
// records the key it is asked for, then checked: httptrace must find a
// trace put under that key. nil if either step fails, and the Transport
// then uses httptrace.WithClientTrace.
var traceKey = func() any {
	var p keyProbe
	httptrace.ContextClientTrace(&p)
	if p.key == nil || p.n != 1 {
		return nil
	}
	w := &writeWatch{parent: context.Background()}
	key := p.key
	if got := httptrace.ContextClientTrace(keyedCtx{w, key}); got != &w.trace {
		return nil
	}
	return key
}()

// keyProbe records the key of the one Value call it gets.
type keyProbe struct {
	context.Context
	key any
	n   int
}

func (p *keyProbe) Value(key any) any { p.key, p.n = key, p.n+1; return nil }

// keyedCtx answers key with w's trace, to check traceKey before it is used.
type keyedCtx struct {
	w   *writeWatch
	key any
}

func (k keyedCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (k keyedCtx) Done() <-chan struct{}       { return nil }
func (k keyedCtx) Err() error                  { return nil }
func (k keyedCtx) Value(key any) any {
	if key == k.key {
		return &k.w.trace
	}
	return nil
}

// getBody is the attempt's GetBody: the rewind, unless the request was
// written, in which case the re-send is refused (errResendRefused) and the
// Transport decides with what it knows.
func (w *writeWatch) getBody() (io.ReadCloser, error) {
	if w.wrote.Load() > 0 {
		return nil, errResendRefused
	}
	w.resent.Add(1) // nothing was written: a re-send that costs nothing
	return w.rewind()
}

// attemptHeader returns the header of an attempt: a new map with the
// caller's fields and room for extra more (the key and attempt headers),
// so that the caller's map is never written. The value slices are shared
// with the caller's, their capacity clipped to their length so that an
// append (Header.Add) on the attempt's header copies instead of writing
// into the caller's array; like net/http, which shares the whole map
// between a request and its forks, nothing writes into them in place.
//
// clipped says that the caller's slices have no spare capacity (checkHeader
// saw them, and nothing has written the header since: a first attempt's):
// then a copy of the map made by the runtime (maps.Clone copies its table
// without hashing each field again) is already clipped, and a small map
// has room for the extra fields in its one group.
func attemptHeader(h http.Header, extra int, clipped bool) http.Header {
	if clipped && len(h) > 0 && len(h)+extra <= smallMapSlots {
		return maps.Clone(h)
	}
	h2 := make(http.Header, len(h)+extra)
	if len(h) == 0 {
		return h2 // ranging over an empty map still costs an iterator
	}
	for k, vv := range h {
		h2[k] = vv[:len(vv):len(vv)]
	}
	return h2
}

// smallMapSlots is how many entries a small map holds in its one group
// (Go's swiss-table maps): up to this many, a cloned header takes the
// attempt's fields without growing.
const smallMapSlots = 8

// classify returns the Classifier's decision on a, with what the Transport
// knows better than any classifier: a cancelled caller is terminal, no
// response is no success, and a write that got no answer of its own may
// have been applied.
func (c *call) classify(a *attempt) Decision {
	if !a.sent {
		return Decision{Action: Terminal, Category: CategoryClient}
	}
	var d Decision
	switch {
	case !c.t.cfg.customClassifier && plainSuccess(a.resp, a.err):
		// DefaultClassifier's first case (success), without building
		// its Outcome; the replay headers are kept for guardUnsafe.
		d = Decision{Action: Success, Replayed: c.op.key != "" && a.replayHeaders().replay()}
	case a.err != nil && c.ctx.Err() != nil:
		// The caller gave up; nothing else matters.
		a.err = errors.Join(c.ctx.Err(), a.err)
		d = Decision{Action: Terminal, Category: CategoryCanceled, Ambiguous: true}
	default:
		d = c.t.cfg.classifier(Outcome{Request: a.req, Response: a.resp, Err: a.err, Keyed: c.op.key != "", Now: a.end})
	}
	if a.err != nil && d.Action == Success {
		// No response is no success, whatever a classifier says, and it
		// proves nothing about the effect.
		d.Action, d.Ambiguous = Terminal, true
	}
	// A write that got no answer of its own (an error after a write, or an
	// answer to a re-send net/http made after the first write's connection
	// died) may have been applied, whatever the last error says.
	if (a.err != nil && a.wroteAny) || (a.resp != nil && d.Action != Success && a.rewritten) {
		d.Ambiguous = true
	}
	if c.guardUnsafe(a, &d) {
		a.stop = ErrUnsafeRetry
	}
	return d
}

// errResendRefused is the error of an attempt whose connection died after
// the request was written, when net/http tried to re-send it on its own:
// the outcome is unknown, and the Transport, not net/http, decides whether
// a re-send is safe.
var errResendRefused = errors.New("resilient: connection lost after the request was written (net/http's own re-send refused)")

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

// drainLimit and drainTimeout bound what discard reads of a response the
// caller will not see: enough to reuse a keep-alive connection after a
// short error page, never long enough to hold the retry loop.
const (
	drainLimit   = 64 << 10
	drainTimeout = 100 * time.Millisecond
)

// keep drains (at most drainLimit bytes, for at most drainTimeout) and closes
// the body of a response that a retry replaces, so that its connection is
// free during the backoff, and keeps what was read: if the retry is then
// not sent, the caller still gets that response. It returns nil when the
// body was too long or too slow to keep (it is closed either way).
func keep(resp *http.Response) *http.Response {
	if resp.Body == nil || resp.Body == http.NoBody {
		return resp
	}
	stop := time.AfterFunc(drainTimeout, func() { resp.Body.Close() })
	b, err := io.ReadAll(io.LimitReader(resp.Body, drainLimit+1))
	stopped := stop.Stop()
	resp.Body.Close()
	if err != nil || !stopped || len(b) > drainLimit {
		return nil
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp
}

// discard drains (at most drainLimit bytes, for at most drainTimeout) and
// closes a response the caller will not see, so its connection can be
// reused. A body that stalls is closed when the timeout fires, which ends a
// read blocked on the network.
func discard(resp *http.Response) {
	if resp.Body == nil || resp.Body == http.NoBody {
		return
	}
	stop := time.AfterFunc(drainTimeout, func() { resp.Body.Close() })
	io.CopyN(io.Discard, resp.Body, drainLimit)
	stop.Stop()
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
