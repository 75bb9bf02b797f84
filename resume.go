package resilient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/resilienthttp/resilient/internal/host"
	"github.com/resilienthttp/resilient/internal/wire"
)

// Range resume: the body of a GET's answer that breaks mid-read continues
// where it stopped (docs/resume.md). RoundTrip wraps the body of an answer
// that can be resumed (resumable); the wrapper (resumeBody) asks for the
// rest with Range and If-Range when a read ends early, checks that the
// 206 continues the same representation at the same offset, and reads on
// to the end of its Content-Range, never past it (rangeBody).
// Anything else ends the read with the error a bare client would have
// returned, wrapped (resumeError).
//
// A resume is admitted by the gate as a retry is (admitResume, then
// host.Reservation.Wait): the caller's deadline and cancellation, the server's
// pushback and pauses, the rate limiter and the breaker apply to it. A
// resume after bytes is free: no backoff, no retry token, no attempt. A
// resume after one that brought no byte is a retry: it waits the backoff
// and takes a retry token, and none is sent once MaxAttempts attempts
// were made since the last byte.
//
// RoundTrip has returned when a resume happens: the Report and the
// EventOutcome are final. Each resume is an EventResume to the observers,
// from the goroutine that reads the body.

// maxResumes bounds the resumes of one body, whatever their progress.
const maxResumes = 1000

// minResumable is the smallest length of an answer that is resumed. A
// shorter one costs its caller little to fetch again, and RoundTrip checks
// no header of it: the answers of most API calls cost the wrapper one
// comparison.
const minResumable = 64 << 10

// resumable wraps resp's body to resume (resumeBody) when resp is an
// answer to req, a GET, that may be resumed. These may: a 200, or a 206
// to the caller's own Range (a single range, not multipart/byteranges).
// It must have a known length and a body net/http did not decompress, and
// req no body. Any other answer is left as it is. Its header is read at
// the first cut (resumeBody.validate): it is resumed only with
// Accept-Ranges: bytes and a strong validator (a strong ETag, or a
// Last-Modified at least 1 s before its Date). A caller that edits the
// answer's header before the cut edits what is read then.
// RoundTrip calls it for a GET answered with a length of at least
// minResumable.
func (t *Transport) resumable(req *http.Request, resp *http.Response) {
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent || resp.Uncompressed ||
		req.Body != nil && req.Body != http.NoBody {
		return // a GET with a body is not sent again
	}
	// The header is read at the first cut (resumeBody.validate): an
	// answer that is never cut costs its wrapper only.
	b := &resumeBody{reconnecting: reconnecting{rc: resp.Body}, t: t, req: req, header: resp.Header, end: resp.ContentLength, total: resp.ContentLength}
	if resp.StatusCode == http.StatusPartialContent {
		first, last, total, ok := contentRange(resp)
		if !ok || last-first+1 != resp.ContentLength || headerValue(req.Header, "Range") == "" {
			return
		}
		b.off, b.from, b.end, b.total = first, first, last+1, total
	}
	resp.Body = b
}

// validate returns the state of b's resumes, if b can be resumed: its
// answer's header has Accept-Ranges: bytes and a strong validator.
func (b *resumeBody) validate() *resumeState {
	if ar := b.header["Accept-Ranges"]; len(ar) != 1 || !strings.EqualFold(strings.TrimSpace(ar[0]), "bytes") {
		return nil
	}
	v, etag := validator(b.header)
	if v == "" {
		return nil
	}
	return &resumeState{ifr: ifRange{v, etag}}
}

// validator returns what If-Range may carry of a response's header h: its
// ETag if strong (etag), else its Last-Modified if strong (RFC 9110,
// 13.1.3: at least one second before its Date). It returns "" if neither
// is.
func validator(h http.Header) (v string, etag bool) {
	if e := h["Etag"]; len(e) == 1 {
		s := e[0]
		if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
			return s, true
		}
		return "", false // a weak ETag, or not one: nothing else is trusted
	}
	lm, date := headerValue(h, "Last-Modified"), headerValue(h, "Date")
	if lm == "" || date == "" {
		return "", false
	}
	m, err1 := http.ParseTime(lm)
	d, err2 := http.ParseTime(date)
	if err1 != nil || err2 != nil || d.Sub(m) < time.Second {
		return "", false
	}
	return lm, false
}

// contentRange parses resp's Content-Range, "bytes first-last/total", a
// single range of a known total. ok is false for anything else, and for a
// multipart/byteranges answer.
func contentRange(resp *http.Response) (first, last, total int64, ok bool) {
	if strings.HasPrefix(strings.ToLower(headerValue(resp.Header, "Content-Type")), "multipart/byteranges") {
		return 0, 0, 0, false
	}
	cr, found := strings.CutPrefix(headerValue(resp.Header, "Content-Range"), "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, tot, found := strings.Cut(cr, "/")
	f, l, found2 := strings.Cut(rng, "-")
	if !found || !found2 {
		return 0, 0, 0, false
	}
	var err [3]error
	first, err[0] = strconv.ParseInt(f, 10, 64)
	last, err[1] = strconv.ParseInt(l, 10, 64)
	total, err[2] = strconv.ParseInt(tot, 10, 64)
	if errors.Join(err[:]...) != nil || first < 0 || last < first || last >= total {
		return 0, 0, 0, false
	}
	return first, last, total, true
}

// resumeBody is the body of a resumable answer: it reads the answer's
// body, and resumes it when it ends early.
//
// Read is the caller's, from one goroutine. Close may come from another:
// mu guards rc's replacement, closed and cancel against it.
type resumeBody struct {
	reconnecting
	t      *Transport
	req    *http.Request // the caller's: each resume is a copy of it
	header http.Header   // the first answer's
	// off is the offset of the next byte in the representation; from
	// where the body read now started; end where the caller's answer
	// ends (exclusive), total the representation's length.
	off, from, end, total int64
	st                    *resumeState // nil until the first cut
}

// resumeState is what a resumable body holds once it was cut.
type resumeState struct {
	ifr ifRange
	n   resumeCount
	// err is the error the read ended with when it was not resumed: later
	// reads return it again, as net/http's body does, and resume nothing.
	err error
}

// ifRange is what a resume's If-Range carries: the strong ETag (etag) or
// the Last-Modified of the first answer.
type ifRange struct {
	value string
	etag  bool
}

// resumeCount counts a body's reads and resumes.
type resumeCount struct {
	got     int64         // bytes read since the last resume (or the first answer)
	tries   int           // resumes since the last byte
	resumes int           // all resumes
	delay   time.Duration // the server's delay for the next resume
}

// progressed notes n bytes (or events) read.
func (c *resumeCount) progressed(n int64) { c.got += n }

// next starts the count of a resume: one after progress is free again.
func (c *resumeCount) next() {
	if c.got > 0 {
		c.got, c.tries, c.delay = 0, 0, 0
	}
}

// sent notes a resume sent.
func (c *resumeCount) sent() {
	c.tries++
	c.resumes++
}

// failed notes a resume that failed, and the server's delay for the next.
func (c *resumeCount) failed(delay time.Duration) { c.delay = delay }

// Read reads the body, resuming it when it ends before end.
func (b *resumeBody) Read(p []byte) (int, error) {
	if b.st != nil && b.st.err != nil {
		return 0, b.st.err
	}
	for {
		n, err := b.rc.Read(p)
		b.advance(int64(n))
		if err == nil || b.off >= b.end {
			return n, err
		}
		if rerr := b.resume(err); rerr != nil {
			return n, rerr
		}
		if n > 0 {
			return n, nil
		}
	}
}

// advance notes n bytes read.
func (b *resumeBody) advance(n int64) { b.off += n }

// WriteTo writes the body to w, resuming it when it ends before end. It
// copies as io.Copy copies the answer's own body, with no call of b's per
// chunk: an io.Copy of a resumable body costs what the bare body's does.
func (b *resumeBody) WriteTo(w io.Writer) (total int64, err error) {
	if b.st != nil && b.st.err != nil {
		return 0, b.st.err
	}
	for {
		n, err := copyTo(w, b.rc)
		b.advance(n)
		total += n
		if b.off >= b.end {
			return total, err
		}
		if err == nil {
			err = io.EOF // an early end without an error
		} else if !b.readFailed() {
			return total, err // w's error
		}
		if rerr := b.resume(err); rerr != nil {
			if rerr == io.EOF {
				rerr = nil // io.Copy's end, as the bare body's
			}
			return total, rerr
		}
	}
}

// copyTo copies rc to w as io.Copy(w, rc) does: w's ReadFrom if it has
// one (net/http's bodies have no WriteTo), io.Copy's loop otherwise.
func copyTo(w io.Writer, rc io.Reader) (int64, error) {
	if rf, ok := w.(io.ReaderFrom); ok {
		return rf.ReadFrom(rc)
	}
	return io.Copy(w, rc)
}

// readFailed reports whether the body read failed, after io.Copy returned
// an error: net/http's bodies (HTTP/1 and HTTP/2) return their read error
// again, and an empty read of a body that did not fail returns nil. A body
// that does otherwise is not resumed by WriteTo: its error stands.
func (b *resumeBody) readFailed() bool {
	_, err := b.rc.Read(nil)
	return err != nil
}

// resume continues the body after cut, the error that ended it early, and
// returns nil once rc reads on at off. Otherwise it returns the error the
// caller gets: cut as is when the caller gave up or closed the body, or
// when the first answer's body read a premature io.EOF (a bare client's
// reader reads it as the end); else cut wrapped with why it was not
// resumed.
func (b *resumeBody) resume(cut error) error {
	if b.st == nil {
		if b.st = b.validate(); b.st == nil {
			return cut // not resumable: the bare body's error, as is
		}
	}
	b.st.err = b.resumeOrWhy(cut)
	return b.st.err
}

// resumeOrWhy is resume's work: nil once rc reads on, else the error the
// caller gets.
func (b *resumeBody) resumeOrWhy(cut error) error {
	b.rc.Close()
	g := host.Applicant{Cfg: &b.t.hc, Ctx: b.req.Context(), Req: b.req}
	if b.isClosed() || g.Gone() != nil || cut == io.EOF && b.st.n.resumes == 0 {
		return cut
	}
	if cut == io.EOF {
		cut = io.ErrUnexpectedEOF // a resume's range ended short
	}
	var why error
	for why == nil {
		if b.isClosed() {
			return cut // the caller closed the body while a resume failed
		}
		b.st.n.progressed(b.off - b.from)
		b.from = b.off
		b.st.n.next()
		if b.st.n.resumes >= maxResumes {
			why = ErrRetriesExhausted
			break
		}
		var done bool
		if done, why = b.attempt(&g); done {
			return nil
		}
	}
	return &resumeError{cut: cut, why: why}
}

// attempt sends one resume of b, admitted by the gate for g. done says
// that rc now reads on at off; else why, if not nil, is why no resume
// follows.
func (b *resumeBody) attempt(g *host.Applicant) (done bool, why error) {
	cfg := &b.t.cfg
	now := cfg.nanos()
	h := b.t.hosts.Host(b.req.URL.Host, now)
	var r host.Reservation
	if err := admitResume(&r, cfg, g, h, &b.st.n, b.st.n.delay, now); err != nil {
		return false, err
	}
	b.st.n.sent()
	start := r.At
	resp, err := b.send(g.Ctx)
	end := cfg.nanos()
	v := b.check(g, resp, err)
	r.Release(g, healthOf(resp, err, v.d))
	if err == nil {
		h.Latency.Observe(time.Duration(end - start))
	}
	b.event(g, resp, err, v, time.Duration(end-start), r.Delay)
	if v.d.Action == Success {
		// The body is read to its range's end, not past it: a 206 without
		// a length (chunked) may bring more.
		first, last, _, _ := contentRange(resp)
		if err := b.take(&rangeBody{ReadCloser: resp.Body, left: last - first + 1}); err != nil {
			return false, err
		}
		return true, nil
	}
	wire.Drop(resp)
	b.st.n.failed(v.d.Delay)
	return false, v.stop
}

// looped reports whether an outer retry loop drives req (WithOuterRetries,
// ContextWithOuterRetries, an SDK's marks): a resume without progress is
// then not sent. The loop retries as it chooses; the Transport adds no
// retry to it.
func looped(cfg *config, req *http.Request) bool {
	switch cfg.scopedOuterMode(req.Context(), req) {
	case outerAlways:
		return true
	case outerNever:
		return false
	}
	hs, err := wire.CheckRequest(req, cfg.keyHeader, cfg.attemptHeader)
	return err == nil && (hs.Marked || hs.AttemptSet)
}

// errResumeClosed is why a resume is dropped when the caller closed the body
// while it was sent.
var errResumeClosed = errors.New("resilient: the body was closed")

// send sends the resume of b: the caller's request, for the bytes from
// off to end, if the representation is still the one b reads (If-Range).
// Its context is the caller's; Close ends it.
func (b *resumeBody) send(parent context.Context) (*http.Response, error) {
	req := b.req.Clone(parent)
	for _, k := range [...]string{"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"} {
		delete(req.Header, k) // If-Range decides
	}
	rng := "bytes=" + strconv.FormatInt(b.off, 10) + "-"
	if b.end < b.total {
		rng += strconv.FormatInt(b.end-1, 10)
	}
	req.Header.Set("Range", rng)
	req.Header.Set("If-Range", b.st.ifr.value)
	return b.reconnecting.send(b.t.base, req)
}

// check judges the answer to a resume of b, sent for g: resp or err. Its
// decision is Success when resp continues b, Retry when another resume
// may follow (after Delay, the server's), and Terminal when none does:
// stop then says why.
func (b *resumeBody) check(g *host.Applicant, resp *http.Response, err error) verdict {
	switch {
	case g.Gone() != nil:
		return verdict{d: Decision{Action: Terminal, Category: CategoryCanceled}, stop: g.Gone()}
	case err != nil:
		return verdict{d: Decision{Action: Retry, Category: CategoryTransient}}
	}
	switch code := resp.StatusCode; code {
	case http.StatusPartialContent:
		if b.continues(resp) {
			return verdict{d: Decision{Action: Success}}
		}
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		d := Decision{Action: Retry, Category: CategoryUnavailable, Delay: ServerDelay(resp.Header, b.t.cfg.now())}
		if d.Delay > b.t.cfg.retryAfterMax {
			return verdict{d: terminal(d, true), stop: ErrDelayTooLong}
		}
		return verdict{d: d}
	}
	return verdict{d: Decision{Action: Terminal, Category: CategoryTerminal},
		stop: fmt.Errorf("%w: %s", errChanged, resp.Status)}
}

// errChanged is why a resume is not spliced: its answer is not the rest
// of the representation the caller reads.
var errChanged = errors.New("resilient: the resume's answer does not continue the body")

// continues reports whether resp, a 206, continues b: the same validator,
// one range starting at off and ending by end, of the same total.
func (b *resumeBody) continues(resp *http.Response) bool {
	first, last, total, ok := contentRange(resp)
	if !ok || first != b.off || last >= b.end || total != b.total || resp.Uncompressed ||
		resp.ContentLength >= 0 && resp.ContentLength != last-first+1 {
		return false
	}
	if b.st.ifr.etag {
		e := resp.Header["Etag"]
		return len(e) == 1 && e[0] == b.st.ifr.value
	}
	return headerValue(resp.Header, "Last-Modified") == b.st.ifr.value
}

// event tells the observers of a resume of b for g, answered resp or err
// after took, and judged v. wait is how long the gate held it.
func (b *resumeBody) event(g *host.Applicant, resp *http.Response, err error, v verdict, took, wait time.Duration) {
	obs := b.t.cfg.observers
	if len(obs) == 0 {
		return
	}
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	e := Event{Kind: EventResume, Host: b.req.URL.Host, Method: b.req.Method, Delay: wait,
		Attempt: AttemptReport{Attempt: b.st.n.resumes, Wait: wait, StatusCode: status, Err: err,
			Action: v.d.Action, Category: v.d.Category, Duration: took}}
	e.Operation, _ = operationFromContext(g.Ctx)
	for _, o := range obs {
		o(g.Ctx, e)
	}
}

// rangeBody is the body of a resume's 206: left is what is left of its
// Content-Range. It reads no byte past the range, whatever the connection
// brings, as net/http's body reads none past its Content-Length; a body
// that ends before is cut (resumeBody.resume resumes it again).
type rangeBody struct {
	io.ReadCloser
	left int64
}

func (r *rangeBody) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.ReadCloser.Read(p)
	r.left -= int64(n)
	if r.left <= 0 {
		err = io.EOF // the whole range: what follows is not read
	}
	return n, err
}

// resumeError is the error a resumable body's read ends with when it was
// not resumed: the read's own error (cut), as a bare client would have
// returned it, and why it was not resumed. errors.Is finds either.
type resumeError struct {
	cut, why error
}

func (e *resumeError) Error() string {
	return e.cut.Error() + " (not resumed: " + e.why.Error() + ")"
}

func (e *resumeError) Unwrap() []error { return []error{e.cut, e.why} }

// Timeout reports whether the read's own error was a timeout.
func (e *resumeError) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.cut, &t) && t.Timeout()
}

// reconnecting is what a resumed body (resume.go) and a reconnected event
// stream (eventstream.go) share: the body read now, and the caller's
// Close against a resume in flight. Read is the caller's, from one
// goroutine; Close may come from another: mu guards rc's replacement,
// closed and cancel against it.
type reconnecting struct {
	rc     io.ReadCloser // the body read now
	mu     sync.Mutex
	closed bool
	cancel context.CancelFunc // the resume in flight's, nil if none
}

// Close closes the body, and ends a resume in flight.
func (c *reconnecting) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.cancel != nil {
		c.cancel()
	}
	return c.rc.Close()
}

// isClosed reports whether the caller closed the body.
func (c *reconnecting) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// send sends req, a copy of the caller's request, over base. Its context
// ends at req's or at the caller's Close.
func (c *reconnecting) send(base http.RoundTripper, req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel()
		return nil, errResumeClosed
	}
	c.cancel = cancel
	c.mu.Unlock()
	resp, err := base.RoundTrip(req.WithContext(ctx))
	c.mu.Lock()
	c.cancel = nil
	c.mu.Unlock()
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &wire.CancelBody{ReadCloser: resp.Body, Cancel: cancel}
	return resp, nil
}

// take makes rc the body read now, unless the caller closed it meanwhile:
// then rc is closed and take returns errResumeClosed.
func (c *reconnecting) take(rc io.ReadCloser) error {
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.rc = rc
	}
	c.mu.Unlock()
	if closed {
		rc.Close()
		return errResumeClosed
	}
	return nil
}

// admitResume admits, for g, the next resume (or reconnect) to h whose
// count is n, after at least floor, and waits for it. The first since
// the last progress is free: no backoff, no retry token (a Budget, set
// by the application, still pays for it). Later ones are retries: they
// back off and stop at MaxAttempts, and none is sent under an outer retry
// loop (looped).
func admitResume(r *host.Reservation, cfg *config, g *host.Applicant, h *host.State, n *resumeCount, floor time.Duration, now int64) error {
	free := n.tries == 0
	backoff := floor
	if !free {
		if n.tries+1 >= cfg.maxAttempts || looped(cfg, g.Req) {
			return ErrRetriesExhausted
		}
		if cfg.backoff != nil {
			backoff = max(backoff, cfg.backoff.Delay(n.tries, 0))
		}
	}
	var err error
	if *r, err = h.Reserve(g, 1, 1, backoff, free, now); err != nil {
		return err
	}
	return r.Wait(g)
}
