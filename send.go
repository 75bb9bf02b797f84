package resilient

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
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
	took time.Duration // until response headers or error; 0 if never sent
	end  time.Time
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
// admitted it, the start of its duration. The result is written to a (filled in place: a
// returned attempt would be copied). It never mutates the caller's
// request and shares nothing with other attempts.
func (c *call) send(a *attempt, i, n int, start time.Time) {
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
	if c.held != nil {
		// The retry is on its way: the answer it replaces goes now, so
		// that its connection is free for it.
		drop(c.held)
		c.held = nil
	}
	resp, err := c.t.base.RoundTrip(areq)
	// One monotonic clock read: time.Now reads the wall clock too, which
	// the end time can take from start.
	a.sent, a.took = true, cfg.since(start)
	a.end = start.Add(a.took)
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
	if err != nil {
		err = sendError(areq, err, w)
	}
	if w != nil {
		wrote := w.wrote.Load()
		a.traced, a.wroteAny, a.rewritten = true, wrote >= 1, wrote >= 2
		a.resends = max(int(w.resent.Load()), int(wrote)-1)
	}
	if cancel != nil {
		if resp != nil {
			resp.Body = cancelOnClose(resp.Body, cancel)
		} else {
			cancel()
		}
	}
	a.resp, a.err = resp, err
}

// sendError returns the error of an attempt as a bare client's caller would
// see it: http.Client turns an HTTPS request answered in plain HTTP into
// http.ErrSchemeMismatch, and only when the transport's error is exactly a
// tls.RecordHeaderError; and a write that failed on the client's own limit
// says so, whatever error net/http returned for the attempt.
func sendError(req *http.Request, err error, w *writeWatch) error {
	if rh, ok := errors.AsType[tls.RecordHeaderError](err); ok && string(rh.RecordHeader[:]) == "HTTP/" && req.URL.Scheme == "https" {
		return wrapped{http.ErrSchemeMismatch, err}
	}
	if w != nil {
		if limit := w.limit.Load(); limit != nil && !errors.Is(err, *limit) {
			return wrapped{*limit, err}
		}
	}
	return err
}

// wrapped is an error said as another: first's text, and both in its tree.
type wrapped struct{ first, err error }

func (e wrapped) Error() string   { return e.first.Error() }
func (e wrapped) Unwrap() []error { return []error{e.first, e.err} }

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
		// Under the spelling net/http does not take for a mark of
		// idempotence (see config.keyWire): it then re-sends the request
		// on its own only when a bare client's would be.
		areq.Header[cfg.keyWire] = w.key[:]
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
	areq.Body = body
	areq.GetBody = c.op.body.rewind()
	if w != nil && areq.GetBody != nil && body != http.NoBody {
		// Count the rewinds net/http makes to re-send the attempt on its
		// own (nothing written on a reused connection, an HTTP/2 stream
		// the server refused): Report.Resends. A bodyless request is
		// re-sent without one; its re-sends are counted by the writes.
		w.rewind = areq.GetBody
		areq.GetBody = w.getBody
	}
	return areq, w, cancel, nil
}

// writeWatch watches the writes of one keyed attempt: it counts the times
// net/http wrote the request (its ClientTrace's WroteRequest) and the
// rewinds it made to re-send it on its own (getBody). One allocation holds
// the trace, the counters and the key header's value.
type writeWatch struct {
	parent context.Context // the attempt's context without the trace (watchCtx)
	trace  httptrace.ClientTrace
	wrote  atomic.Int32 // writes of the request, net/http's re-sends included
	resent atomic.Int32 // rewinds: net/http's re-sends of a request with a body
	// limit is the error of a write that failed on the client's own limit
	// (a body shorter than its ContentLength): net/http may return another
	// error for the attempt (the connection it then closed).
	limit  atomic.Pointer[error]
	rewind func() (io.ReadCloser, error)
	key    [1]string // the key header's value
}

func (w *writeWatch) wroteRequest(info httptrace.WroteRequestInfo) {
	if info.Err != nil && clientLimit(info.Err) {
		w.limit.CompareAndSwap(nil, &info.Err)
	}
	w.wrote.Add(1)
}

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

// getBody is the attempt's GetBody: the rewind, counted. net/http calls
// it only to re-send what a bare client's request would be re-sent for: the
// key is sent under a spelling that does not make the request replayable
// (config.keyWire).
func (w *writeWatch) getBody() (io.ReadCloser, error) {
	w.resent.Add(1)
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
		a.err = withCause(c.ctx.Err(), a.err)
		d = Decision{Action: Terminal, Category: CategoryCanceled, Unknown: true}
	default:
		d = c.t.cfg.classifier(Outcome{Request: a.req, Response: a.resp, Err: a.err, Keyed: c.op.key != "", Now: a.end})
	}
	if a.err != nil && d.Action == Success {
		// No response is no success, whatever a classifier says, and it
		// proves nothing about the effect.
		d.Action, d.Unknown = Terminal, true
	}
	// A write that got no answer of its own (an error after a write, or an
	// answer to a re-send net/http made after the first write's connection
	// died) may have been applied, whatever the last error says.
	// A request cut short by its own body (the caller's reader failed)
	// never reached the server whole.
	if (a.err != nil && a.wroteAny && !errors.Is(a.err, ErrBodyNotReplayable)) || (a.resp != nil && d.Action != Success && a.rewritten) {
		d.Unknown = true
	}
	if c.guardUnsafe(a, &d) {
		a.stop = ErrUnsafeRetry
	}
	return d
}

// withCause returns err, the error of an attempt cut short by the
// caller's context, so that errors.Is finds ctxErr in it too; its text is
// err's alone (the context's error is the Reason beside it).
func withCause(ctxErr, err error) error {
	if errors.Is(err, ctxErr) {
		return err
	}
	return wrapped{err, ctxErr}
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

// drainLimit and drainTimeout bound what discard reads of a response the
// caller will not see: enough to reuse a keep-alive connection after a
// short error page, never long enough to hold the retry loop. keep drains
// drainLimit too, in the background.
const (
	drainLimit   = 64 << 10
	drainTimeout = 100 * time.Millisecond
)

// keep holds the response of an attempt that a retry may replace: its
// body is drained in the background (at most drainLimit bytes), so that a
// short error page frees its connection during the backoff, and nothing of
// it is lost: if the retry is then not sent, the caller reads the whole
// body, what was drained and then the rest, each byte as soon as it has
// come. If the retry is sent, drop closes it, before the retry goes out
// (call.held): its connection may be the one the retry needs.
func keep(resp *http.Response) *http.Response {
	if resp.Body == nil || resp.Body == http.NoBody {
		return resp
	}
	hb := &heldBody{rc: resp.Body, draining: true}
	hb.wake = sync.NewCond(&hb.mu)
	go hb.drain()
	resp.Body = hb
	return resp
}

// drop closes the body of a response kept (keep) for a retry that is
// sent: the caller will not see it.
func drop(resp *http.Response) {
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
}

// heldBody is the body of a kept response: drained in the background up to
// drainLimit bytes while nobody reads it; once the caller reads, the drain
// stops after the read it is in, and the caller reads what was drained,
// then the rest.
type heldBody struct {
	rc   io.ReadCloser
	mu   sync.Mutex
	wake *sync.Cond // signalled when buf, err or draining change
	buf  []byte     // drained, not yet read by the caller
	err  error      // rc's end as the drain saw it (io.EOF, a read error)
	// draining: the drain is running; handed: the caller reads (the
	// drain stops); closed: Close was called.
	draining, handed, closed bool
}

func (b *heldBody) drain() {
	p := make([]byte, 16<<10)
	total := 0
	for {
		n, err := b.rc.Read(p)
		total += n
		b.mu.Lock()
		b.buf = append(b.buf, p[:n]...)
		if err != nil {
			b.err = err
		}
		stop := err != nil || b.handed || b.closed || total >= drainLimit
		if stop {
			b.draining = false
		}
		b.wake.Broadcast()
		b.mu.Unlock()
		if stop {
			return
		}
	}
}

// Read returns what the drain read, then reads on from the body once the
// drain has stopped.
func (b *heldBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	b.handed = true
	for len(b.buf) == 0 && b.draining {
		b.wake.Wait()
	}
	if len(b.buf) > 0 {
		n := copy(p, b.buf)
		b.buf = b.buf[n:]
		b.mu.Unlock()
		return n, nil
	}
	err := b.err
	b.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return b.rc.Read(p) // the drain has stopped: the caller reads alone
}

// Close closes the body (a drain still reading ends); closing again does
// nothing.
func (b *heldBody) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	return b.rc.Close()
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

// cancelOnClose returns body, which cancels the attempt's context when the
// caller closes it. The body of a 101 Switching Protocols answer is the
// upgraded connection, an io.ReadWriteCloser: it stays one.
func cancelOnClose(body io.ReadCloser, cancel context.CancelFunc) io.ReadCloser {
	if rw, ok := body.(io.ReadWriteCloser); ok {
		return &cancelRWBody{cancelBody{rw, cancel}, rw}
	}
	return &cancelBody{body, cancel}
}

// cancelRWBody is a cancelBody that can be written to.
type cancelRWBody struct {
	cancelBody
	w io.Writer
}

func (b *cancelRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }

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
