package wire

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"github.com/resilienthttp/resilient/internal/reason"
)

// ReplayBody produces the request body of each attempt.
//
// It has four shapes:
//
//   - no body;
//   - a body the caller can rewind (GetBody);
//   - stream: a body without GetBody, streamed to the first attempt as the
//     caller produces it, and kept, up to the limit, for the attempts after;
//   - buf: a body without GetBody read before the first attempt, within
//     the caller's context. That is when the operation is claimed in a
//     Store, which needs the body's fingerprint before anything is sent.
//     first streams the rest of a body over the limit, once.
type ReplayBody struct {
	Buf     []byte                        // a body read before the first attempt
	getBody func() (io.ReadCloser, error) // the caller's GetBody
	first   io.ReadCloser                 // body of attempt 0 when it comes from the caller
	Stream  *streamBody                   // a body without GetBody, read as it is sent
	// over: a body read before the first attempt went over the limit; it
	// is sent once.
	over bool
	// length and limit: the request's ContentLength and the replay
	// buffer's size, for hold.
	length, limit int64
	// tried: hold found a body it cannot hold; it reads it no more.
	tried bool
	// spent: the caller's body of the first attempt, not sent because a
	// fingerprint read through GetBody (fingerprintLarge); closed on release.
	spent io.Closer
}

// Init prepares req's body for several attempts. A body without GetBody is
// streamed (see streamBody), unless whole says the body is needed before
// the first attempt. Then init reads at most limit+1 bytes of it, and gives
// up with ctx. Giving up closes the body, which ends a read blocked on a
// pipe. A read error is returned wrapped in reason.ErrBodyNotReplayable, and the
// body is closed: nothing is sent.
func (rb *ReplayBody) Init(ctx context.Context, req *http.Request, limit int64, whole bool) error {
	if req.Body == nil {
		*rb = ReplayBody{}
		return nil
	}
	return rb.initBody(ctx, req, limit, whole)
}

// initBody is init for a request with a body, http.NoBody included.
func (rb *ReplayBody) initBody(ctx context.Context, req *http.Request, limit int64, whole bool) error {
	*rb = ReplayBody{}
	switch {
	case req.Body == http.NoBody:
		return nil
	case req.GetBody != nil:
		// Field by field: a composite literal would be built aside and
		// copied (bench/README.md).
		rb.getBody = req.GetBody
		rb.setFirst(req.Body)
		rb.length, rb.limit = req.ContentLength, limit
		return nil
	case !whole && !inMemory(req.Body):
		rb.Stream = newStreamBody(req.Body, req.ContentLength, limit)
		return nil
	}
	// Read whole: for a Store, or a body in memory, which a read never
	// blocks on.
	var b bytes.Buffer
	if req.ContentLength > 0 && req.ContentLength <= limit {
		b.Grow(int(req.ContentLength))
	}
	stop := context.AfterFunc(ctx, func() { req.Body.Close() })
	n, err := io.Copy(&b, io.LimitReader(req.Body, limit+1))
	if !stop() && err != nil {
		err = context.Cause(ctx) // the read failed because the caller gave up
	}
	if err != nil {
		req.Body.Close()
		return fmt.Errorf("%w: reading body: %w", reason.ErrBodyNotReplayable, err)
	}
	if n <= limit {
		req.Body.Close()
		rb.Buf = b.Bytes()
		if req.ContentLength > 0 && n != req.ContentLength {
			// Not ContentLength long: sent once, in memory as the
			// caller's was, so that net/http refuses it as it would
			// the caller's, sending no more of it than bare.
			rb.over = true
			rb.setFirst(io.NopCloser(bytes.NewReader(rb.Buf)))
		}
		return nil
	}
	// Over the limit: stream what was read, then the rest, once.
	rb.over = true
	rb.Buf = b.Bytes()
	rb.readOn(rb.Buf, req.Body)
	return nil
}

// nopClosers are the types of io.NopCloser's results.
var nopClosers = [2]reflect.Type{reflect.TypeOf(io.NopCloser(nil)), reflect.TypeOf(io.NopCloser(strings.NewReader("")))}

// inMemory reports whether net/http takes r for a body in memory, which a
// read never blocks on (its isKnownInMemoryReader). It then writes the
// request's header and body in one go: nothing reaches the server of a
// body that is not ContentLength long.
func inMemory(r io.Reader) bool {
	switch r.(type) {
	case *bytes.Reader, *bytes.Buffer, *strings.Reader:
		return true
	}
	if t := reflect.TypeOf(r); t == nopClosers[0] || t == nopClosers[1] {
		inner, _ := reflect.ValueOf(r).Field(0).Interface().(io.Reader)
		return inMemory(inner)
	}
	return false
}

// readOn makes the first attempt's body read, what was read of src, then
// the rest of src.
func (rb *ReplayBody) readOn(read []byte, src io.ReadCloser) {
	rb.setFirst(struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(read), src), src})
}

// setFirst sets the body of the first attempt.
func (rb *ReplayBody) setFirst(r io.ReadCloser) { rb.first = r }

// none reports whether the request has no body.
func (rb *ReplayBody) none() bool {
	return rb.first == nil && rb.getBody == nil && rb.Buf == nil && rb.Stream == nil
}

// Replayable reports whether an attempt after the first can still be sent
// with the whole body: false once a body over the limit has been sent.
func (rb *ReplayBody) Replayable() bool {
	if rb.Stream != nil {
		return rb.Stream.replayable()
	}
	return !rb.over
}

// Callers reports whether the first attempt carries the request's body as
// the caller made it: none, or the caller's own with its GetBody (init
// keeps both as they are). A buffered or streamed body is not.
func (rb *ReplayBody) Callers() bool { return rb.none() || rb.getBody != nil }

// Body returns the body for attempt n (0 for the first). It fails only for a
// retry whose GetBody fails, or for a retry of a body that is not replayable.
func (rb *ReplayBody) Body(n int) (io.ReadCloser, error) {
	switch {
	case rb.none():
		return http.NoBody, nil
	case rb.Stream != nil:
		return rb.Stream.reader()
	case n == 0 && rb.first != nil:
		return rb.Take(), nil // the base transport owns it now
	case rb.over:
		return nil, reason.ErrBodyNotReplayable
	case rb.getBody != nil:
		held, err := rb.holdBody()
		switch {
		case err != nil:
			return nil, fmt.Errorf("%w: GetBody: %w", reason.ErrBodyNotReplayable, err)
		case held:
			return io.NopCloser(bytes.NewReader(rb.Buf)), nil // a retry is sent from the Transport's copy
		case rb.over:
			return nil, fmt.Errorf("%w: GetBody's body is not ContentLength's %d bytes", reason.ErrBodyNotReplayable, rb.length)
		}
		r, err := rb.getBody()
		if err != nil {
			return nil, fmt.Errorf("%w: GetBody: %w", reason.ErrBodyNotReplayable, err)
		}
		return r, nil
	}
	return io.NopCloser(bytes.NewReader(rb.Buf)), nil
}

// Rewind is the GetBody set on each attempt's request, so that
// http.Transport can rewind the body itself when it re-sends on a dead
// keep-alive connection. nil when the body cannot be replayed.
func (rb *ReplayBody) Rewind() func() (io.ReadCloser, error) {
	switch {
	case rb.none():
		return func() (io.ReadCloser, error) { return http.NoBody, nil }
	case rb.Stream != nil:
		return rb.Stream.reader
	case rb.over:
		return nil
	case rb.getBody != nil:
		return rb.getBody
	}
	buf := rb.Buf // captured by value: the func outlives the call, rb does not
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
}

// Close releases the caller's body once the call has ended. It does so at
// once if no attempt holds it. Else the attempt that holds it closes it: a
// response can come before its request's body is sent (full duplex).
func (rb *ReplayBody) Close() {
	if rb.Stream != nil || rb.first != nil || rb.spent != nil {
		rb.release()
	}
}

// release is close when rb holds something to release.
func (rb *ReplayBody) release() {
	if rb.Stream != nil {
		rb.Stream.end()
		return
	}
	if f := rb.Take(); f != nil {
		f.Close()
	}
	if rb.spent != nil {
		rb.spent.Close()
		rb.spent = nil
	}
}

// Take hands over the caller's body of the first attempt, nil if rb holds
// none: the taker closes it.
func (rb *ReplayBody) Take() io.ReadCloser {
	f := rb.first
	rb.first = nil
	return f
}

// Fingerprint is a hex SHA-256 over method, URL and body, identifying the
// request an operation was claimed with. For a body over the limit it
// covers the buffered prefix only.
func (rb *ReplayBody) Fingerprint(req *http.Request) (string, error) {
	h := sha256.New()
	io.WriteString(h, req.Method)
	h.Write([]byte{0})
	io.WriteString(h, req.URL.String())
	h.Write([]byte{0})
	switch {
	case rb.Hold():
		h.Write(rb.Buf)
	case rb.getBody != nil:
		if err := rb.fingerprintLarge(h); err != nil {
			return "", err
		}
	default:
		h.Write(rb.Buf)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fingerprintLarge hashes into h a body the caller can rewind that hold
// could not hold (over the limit), read through a new GetBody. The
// caller's body of the first attempt, if not yet sent, is then not sent:
// GetBody's result may share its state (azcore's seeks one ReadSeeker
// back), so every attempt gets a reader obtained after this read.
func (rb *ReplayBody) fingerprintLarge(h io.Writer) error {
	r, err := rb.getBody()
	if err != nil {
		return fmt.Errorf("%w: GetBody: %w", reason.ErrBodyNotReplayable, err)
	}
	_, err = io.Copy(h, r)
	r.Close()
	if err != nil {
		return fmt.Errorf("%w: reading body: %w", reason.ErrBodyNotReplayable, err)
	}
	if f := rb.Take(); f != nil {
		rb.spent = f
	}
	return nil
}

// Hold makes the Transport the one owner of a body the caller can rewind
// (GetBody) of at most limit bytes. It reads the body once, from the
// reader the next attempt would send: the caller's Body before the first
// attempt, a new GetBody's after. Every attempt after is sent from that
// copy. So the reader read to inspect the body (print, fingerprint) is
// never one sent after: GetBody's result may share its state with Body or
// with an earlier result. hold reports whether rb holds the whole body
// (none, or a copy). It is on the failure and recognition paths only.
//
// A body it cannot hold is left as the caller's: one over the limit
// (never read to inspect it), one whose read fails (the attempt gets the
// same error), one whose GetBody fails. A GetBody whose body is not
// ContentLength long is not re-sent (over): it would fail in net/http.
func (rb *ReplayBody) Hold() bool {
	held, _ := rb.holdBody()
	return held
}

// holdBody is hold; err is GetBody's error, when GetBody failed.
func (rb *ReplayBody) holdBody() (bool, error) {
	switch {
	case rb.getBody == nil:
		return rb.Stream == nil && !rb.over, nil
	case rb.tried || rb.length > rb.limit:
		return false, nil
	}
	rb.tried = true
	src, first := rb.Take(), true
	for {
		if src == nil {
			r, err := rb.getBody()
			if err != nil {
				return false, err
			}
			src, first = r, false
		}
		var b bytes.Buffer
		b.Grow(int(max(min(rb.length, rb.limit), 0)))
		n, err := io.Copy(&b, io.LimitReader(src, rb.limit+1))
		whole := err == nil && n <= rb.limit && (rb.length <= 0 || n == rb.length)
		switch {
		case whole:
			src.Close()
			rb.Buf, rb.getBody = b.Bytes(), nil
			return true, nil
		case first && err == nil && n <= rb.limit:
			// The caller's Body is not ContentLength long: most often
			// spent by an earlier call, the same request sent again
			// unrewound. net/http fails to write it, having written
			// nothing, and on a kept-alive connection sends a body
			// from GetBody instead. So does hold.
			src.Close()
			src = nil
			continue
		case first:
			rb.readOn(b.Bytes(), src) // as read: what is left of it follows what hold read
		default:
			src.Close()
			rb.over = err == nil && n <= rb.limit // GetBody's body is not ContentLength long
		}
		return false, nil
	}
}

// streamBody is a request body without GetBody, such as an io.Pipe or a
// streamed upload. It is read from the caller only as an attempt sends it.
// The first attempt gets each byte as soon as the caller produces it, as a
// bare client's request would. Nothing is read ahead. So a body the caller
// writes in answer to the response (full duplex) works. What is read is
// kept, up to the limit. A later attempt replays it and then reads on from
// the caller: a retry, a hedge, net/http's own re-send. A body longer than
// the limit is sent whole once. After that no attempt can be sent with it
// (replayable is false).
//
// Each attempt reads through its own streamReader. One of them at a time
// reads from the caller's body; the others wait for what it gets. The
// caller's body is closed once the call has ended and no attempt's reader
// is open (net/http closes a request body when it is done with it).
type streamBody struct {
	src   io.ReadCloser
	limit int64

	mu      sync.Mutex
	wake    *sync.Cond // signalled when kept, err, filling or a reader's state changes
	kept    []byte     // what was read from src, while within limit
	read    int64      // bytes read from src
	err     error      // src's end: io.EOF, or its read error
	filling bool       // a reader is in src.Read
	open    int        // readers not yet closed
	latest  int        // the number of the newest reader (reader)
	ended   bool       // the call has ended
	closed  bool       // src was closed
}

// errBodyClosed is what a stream reader returns once closed.
var errBodyClosed = errors.New("resilient: read on closed request body")

func newStreamBody(src io.ReadCloser, length, limit int64) *streamBody {
	s := &streamBody{src: src, limit: limit}
	s.wake = sync.NewCond(&s.mu)
	if length > 0 && length <= limit {
		s.kept = make([]byte, 0, length)
	}
	return s
}

// replayable reports whether a new reader can replay the body from its
// start: no byte read from the caller was left out of kept.
func (s *streamBody) replayable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.kept)) == s.read
}

// reader returns a new reader of the body from its start, or
// reason.ErrBodyNotReplayable once bytes past the limit were sent and not kept.
func (s *streamBody) reader() (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int64(len(s.kept)) != s.read {
		return nil, fmt.Errorf("%w: body over %d bytes already sent", reason.ErrBodyNotReplayable, s.limit)
	}
	if s.closed {
		return nil, fmt.Errorf("%w: body closed", reason.ErrBodyNotReplayable)
	}
	s.open++
	s.latest++
	return &streamReader{s: s, n: s.latest}, nil
}

// end records that the call has ended: the caller's body is closed now if
// no reader is open, else when the last one is closed.
func (s *streamBody) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	s.closeIfDone()
}

// closeIfDone closes src once the call has ended and no reader is open. It
// requires that s.mu is held. Closing may run while a reader is still in
// src.Read (its attempt closed it): the close ends that read.
func (s *streamBody) closeIfDone() {
	if s.ended && s.open == 0 && !s.closed {
		s.closed = true
		s.src.Close()
		s.wake.Broadcast()
	}
}

// streamReader is one attempt's reader of a streamBody.
type streamReader struct {
	s      *streamBody
	n      int // its number: the newest reader reads on from the caller
	pos    int64
	closed bool
}

// errBodySuperseded is what an attempt's reader returns when a newer
// attempt reads the body. net/http may still be writing an attempt it has
// had an answer to. That write must not take from the caller what the
// newer attempt needs.
var errBodySuperseded = errors.New("resilient: request body taken over by a newer attempt")

func (r *streamReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s := r.s
	s.mu.Lock()
	for {
		switch {
		case r.closed:
			s.mu.Unlock()
			return 0, errBodyClosed
		case r.pos < int64(len(s.kept)):
			n := copy(p, s.kept[r.pos:])
			r.pos += int64(n)
			s.mu.Unlock()
			return n, nil
		case r.pos < s.read:
			// Bytes past the limit went to another attempt and were
			// not kept (reader refuses such a reader; a hedge may
			// still be here).
			s.mu.Unlock()
			return 0, fmt.Errorf("%w: body over %d bytes already sent", reason.ErrBodyNotReplayable, s.limit)
		case s.err != nil:
			s.mu.Unlock()
			return 0, s.err
		case s.closed:
			s.mu.Unlock()
			return 0, errBodyClosed
		case r.n != s.latest:
			s.mu.Unlock()
			return 0, errBodySuperseded
		case !s.filling:
			s.filling = true
			s.mu.Unlock()
			return r.fill(p)
		}
		s.wake.Wait() // another attempt is reading from the caller
	}
}

// fill reads from the caller's body into p, for r, and keeps what fits.
func (r *streamReader) fill(p []byte) (int, error) {
	s := r.s
	n, err := s.src.Read(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.filling = false
	if n > 0 {
		// Kept while within the limit; and past it when a newer reader
		// came while this one was reading (its attempt had an answer):
		// those bytes are the newer attempt's, which waits for them (one
		// read past the limit at most).
		if int64(len(s.kept)) == s.read && (s.read+int64(n) <= s.limit || r.n != s.latest) {
			s.kept = append(s.kept, p[:n]...)
		}
		s.read += int64(n)
		r.pos += int64(n)
	}
	if err != nil {
		if err != io.EOF {
			// The caller's body failed: every attempt would fail the
			// same way.
			err = fmt.Errorf("%w: reading body: %w", reason.ErrBodyNotReplayable, err)
		}
		s.err = err
	}
	s.wake.Broadcast()
	return n, err
}

// Close closes the attempt's reader; the caller's body is closed if the
// call has ended and no other attempt reads it.
func (r *streamReader) Close() error {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	s.open--
	s.closeIfDone()
	s.wake.Broadcast()
	return nil
}
