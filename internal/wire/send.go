// Package wire is one attempt of the Transport on the wire: the check of
// the caller's request and header, its idempotency key, its replayable
// body, the copy that is sent and its send, the watch of its writes, the
// answers kept while a retry waits, preconditions and SDK marks. It knows
// nothing of the Transport's decisions; the root drives it.
package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/resilienthttp/resilient/internal/clock"
)

// Attempt is one attempt's result, owned by the iteration of the loop that
// sent it.
type Attempt struct {
	N    int
	Req  *http.Request  // the copy sent, with the key and attempt headers
	Resp *http.Response // nil when err is set
	Err  error
	Took time.Duration // until response headers or error; 0 if never sent
	End  int64         // Unix ns, by the Transport's clock
	// Sent is false when the attempt never reached the base transport (its
	// body could not be rewound).
	Sent   bool
	Writes Writes
}

// Writes is what the write watch of a keyed attempt saw (writeWatch).
type Writes struct {
	// Traced says whether the writes were watched (keyed requests only);
	// any is true when the request was written at least once.
	Traced, Any bool
	// Again is true when net/http wrote the request more than once (its
	// own re-send on a dead keep-alive connection).
	Again bool
	// Resends counts the times the base transport sent the attempt again
	// on its own (net/http on a dead keep-alive connection).
	Resends int
}

// Plan is what one attempt is sent with:
//
//   - its context;
//   - its place: the i-th of this call, attempt n of the operation;
//   - its body: the operation's, or why it could not be had;
//   - when the gate admitted it: the start of its duration;
//   - the answer it replaces, dropped once it is on its way.
type Plan struct {
	Ctx     context.Context
	I, N    int
	Body    io.ReadCloser
	BodyErr error
	Start   int64 // Unix ns, by the Transport's clock
	Held    *http.Response
	// Rewind is the GetBody of a copy of the caller's request (ReplayBody.Rewind).
	Rewind func() (io.ReadCloser, error)
}

// Settings is what sending needs of the Transport: its base transport,
// its clock and the options that shape an attempt's copy of the request.
// A Transport has one, made once (NewTransport).
type Settings struct {
	Base           http.RoundTripper
	Clock          *clock.Clock
	AttemptTimeout time.Duration
	AttemptHeader  string // "" for none
	KeyWire        string // the key header's spelling on the wire (wireKey)
	TimeBudget     bool   // WithTimeBudgetHeader
}

// Sender sends the attempts of one operation. It holds what send needs of
// the Transport, the caller's request and the operation. It is a value of
// its own, so that hedged copies send at once: a pointer to the operation
// would have the call escape to the heap with the copies' goroutines.
type Sender struct {
	Cfg   *Settings // the Transport's
	Req   *http.Request
	Key   string // the operation's key, "" if none
	Field string // the caller's spelling of the key header, "" if the Transport adds it
	// Clipped, attemptSet: see operation.
	Clipped, AttemptSet bool
}

// SendAsIs sends the first attempt of an operation, numbered n and
// admitted at start, when nothing is to be added to the caller's request
// req (operation.asIs): the attempt is req itself, as a bare client would
// send it, with no copy of it or of its header. The RoundTripper contract
// forbids changing the request, not sending it; without an attempt header,
// a server reads a first attempt. The base transport owns req's body from
// then on: body, the operation's, hands it over first (ReplayBody.Take).
// The result is written to a, as send's.
func SendAsIs(cfg *Settings, body *ReplayBody, req *http.Request, a *Attempt, n int, start int64) {
	body.Take()
	*a = Attempt{N: n, Req: req}
	resp, err := cfg.Base.RoundTrip(req)
	a.answer(resp, err, start, cfg.Clock.Nanos(), nil)
}

// answer records the base transport's answer to a, sent at start and
// answered at end (Unix ns): as the RoundTripper contract has it
// (asContract), its error as a bare client's caller would see it
// (sendError). w is a's write watch, nil if none.
func (a *Attempt) answer(resp *http.Response, err error, start, end int64, w *writeWatch) {
	a.Sent, a.End = true, end
	a.Took = max(time.Duration(end-start), 0)
	a.Resp, a.Err = asContract(resp, err)
	if a.Err != nil {
		a.Err = sendError(a.Req, a.Err, w)
	}
}

// Send sends attempt p through the base transport: a copy of the caller's
// request carrying the key and attempt headers (a first attempt with
// nothing to add is sendAsIs's). The result is written
// to a, filled in place: a returned attempt would be copied. send never
// mutates the caller's request and writes nothing but a. It shares nothing
// with other attempts, so that hedged copies are sent at once.
func (s *Sender) Send(a *Attempt, p *Plan) {
	*a = Attempt{N: p.N, Err: p.BodyErr}
	if p.BodyErr != nil {
		return // only a retry can get here (GetBody failed); nothing is sent
	}
	var (
		w      *writeWatch
		cancel context.CancelFunc
	)
	a.Req, w, cancel = s.attemptRequest(p)
	if p.Held != nil {
		// The retry is on its way: the answer it replaces goes now, so
		// that its connection is free for it.
		Drop(p.Held)
	}
	resp, err := s.Cfg.Base.RoundTrip(a.Req)
	a.answer(resp, err, p.Start, s.Cfg.Clock.Nanos(), w)
	if w != nil {
		a.Writes = w.seen()
	}
	if cancel != nil {
		if a.Resp != nil {
			a.Resp.Body = CancelOnClose(a.Resp.Body, cancel)
		} else {
			cancel()
		}
	}
}

// asContract returns what the base transport returned as the RoundTripper
// contract has it. That is a response or an error, never both, never
// neither. A response's body is never nil.
func asContract(resp *http.Response, err error) (*http.Response, error) {
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
	return resp, err
}

// sendError returns the error of an attempt as a bare client's caller would
// see it. http.Client turns an HTTPS request answered in plain HTTP into
// http.ErrSchemeMismatch. It does so only when the transport's error is
// exactly a tls.RecordHeaderError. A write that failed on the client's own
// limit says so, whatever error net/http returned for the attempt.
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

// Wrap returns an error said as first: first's text, and both in its tree.
func Wrap(first, err error) error { return wrapped{first, err} }

func (e wrapped) Error() string   { return e.first.Error() }
func (e wrapped) Unwrap() []error { return []error{e.first, e.err} }

// attemptRequest returns attempt p's copy of the caller's request. The copy
// has its own context: the attempt timeout's, and the write watch of a
// keyed attempt. It has its own header: the caller's fields and the key and
// attempt headers. It has its own body. cancel, if not nil, ends the
// attempt's context.
func (s *Sender) attemptRequest(p *Plan) (areq *http.Request, w *writeWatch, cancel context.CancelFunc) {
	cfg := s.Cfg
	ctx := p.Ctx
	if cfg.AttemptTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, cfg.AttemptTimeout)
	}
	// http.Transport re-sends a keyed request by itself when a reused
	// connection dies before the response; count the writes to know. A new
	// watch per attempt: a previous attempt's write loop may still report,
	// and WithClientTrace composes the caller's hooks into the trace it is
	// given. Keyed requests only.
	if s.Key != "" {
		// One allocation holds the copy and its watch: WithContext's copy
		// is made on the stack (it is inlined and does not escape), then
		// copied into it.
		wr := &watchedRequest{w: writeWatch{key: [1]string{s.Key}}}
		w = &wr.w
		w.trace.WroteRequest = w.wroteRequest
		wr.req = *s.Req.WithContext(w.context(ctx))
		areq = &wr.req
	} else {
		areq = s.Req.WithContext(ctx)
	}
	s.attemptFields(areq, p, w)
	areq.Body = p.Body
	areq.GetBody = p.Rewind
	if w != nil && areq.GetBody != nil && p.Body != http.NoBody {
		// Count the rewinds net/http makes to re-send the attempt on its
		// own (nothing written on a reused connection, an HTTP/2 stream
		// the server refused): Report.Resends. A bodyless request is
		// re-sent without one; its re-sends are counted by the writes.
		w.rewind = areq.GetBody
		areq.GetBody = w.getBody
	}
	return areq, w, cancel
}

// watchedRequest is a keyed attempt's copy of the caller's request and the
// watch of its writes, in one allocation: each lives as long as the other.
type watchedRequest struct {
	req http.Request
	w   writeWatch
}

// attemptFields gives areq, attempt p's copy of the caller's request, a
// header of its own. It adds the key header, watched by w (nil for an
// unkeyed request), the attempt header and the time budget header.
func (s *Sender) attemptFields(areq *http.Request, p *Plan, w *writeWatch) {
	cfg := s.Cfg
	// A first attempt has no attempt header (absent means 0), unless the
	// caller's header has one to overwrite.
	attempt := cfg.AttemptHeader != "" && (p.N > 0 || s.AttemptSet)
	key := w != nil && s.Field == ""
	if !attempt && !key {
		// The first attempt of a request whose key the caller set in its
		// header shares the caller's header, which nothing writes.
		if cfg.TimeBudget {
			s.budgetField(areq, p, false)
		}
		return
	}
	extra := 0
	if attempt {
		extra++
	}
	if key {
		extra++
	}
	areq.Header = attemptHeader(s.Req.Header, extra, p.I == 0 && s.Clipped) // never nil: CheckRequest refused a nil Header
	if key {
		// Under the spelling net/http does not take for a mark of
		// idempotence (see config.keyWire): it then re-sends the request
		// on its own only when a bare client's would be.
		areq.Header[cfg.KeyWire] = w.key[:]
	}
	if attempt {
		areq.Header[cfg.AttemptHeader] = attemptValue(p.N)
	}
	if cfg.TimeBudget {
		s.budgetField(areq, p, true)
	}
}

// attemptHeader returns the header of an attempt. It is a new map with the
// caller's fields and room for extra more (the key and attempt headers). So
// the caller's map is never written. The value slices are shared with the
// caller's. Their capacity is clipped to their length, so an append
// (Header.Add) on the attempt's header copies instead of writing into the
// caller's array. Nothing writes into them in place, as in net/http, which
// shares the whole map between a request and its forks.
//
// clipped says that the caller's slices have no spare capacity. checkHeader
// saw them, and nothing has written the header since (a first attempt's).
// Then a copy of the map made by the runtime is already clipped. maps.Clone
// copies its table without hashing each field again. A small map has room
// for the extra fields in its one group.
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
// (Go's swiss-table maps). Up to this many, a cloned header takes the
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

// timeBudgetHeader is the header that carries the caller's remaining time
// (WithTimeBudgetHeader), in milliseconds.
const timeBudgetHeader = "X-Request-Timeout"

// budgetField adds the time budget header to areq, attempt p's copy of
// the caller's request, if timeBudget has a value for it. own says that
// areq's header is its own already (attemptHeader); otherwise it is given
// one first.
func (s *Sender) budgetField(areq *http.Request, p *Plan, own bool) {
	v := timeBudget(areq, s.Req.Header)
	if v == nil {
		return
	}
	if !own {
		areq.Header = attemptHeader(s.Req.Header, 1, p.I == 0 && s.Clipped)
	}
	areq.Header[timeBudgetHeader] = v
}

// timeBudget returns the value of the time budget header for areq, an
// attempt about to be sent: the milliseconds left before its context's
// deadline, rounded down, at least 0. It returns nil when the attempt has
// no deadline, or when the caller's header, h, has the field under any
// spelling.
func timeBudget(areq *http.Request, h http.Header) []string {
	dl, ok := areq.Context().Deadline()
	if !ok || callerSet(h, timeBudgetHeader) {
		return nil
	}
	ms := max(time.Until(dl).Milliseconds(), 0)
	return []string{strconv.FormatInt(ms, 10)}
}

// callerSet reports whether header h has the field name, canonical, under
// its own spelling or another.
func callerSet(h http.Header, name string) bool {
	if _, ok := h[name]; ok {
		return true
	}
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}
