package resilient

import (
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"net/http"
	"strconv"
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
