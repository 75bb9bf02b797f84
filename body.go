package resilient

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
)

// replayBody produces the request body of each attempt.
//
// Three shapes: no body; a body the caller can rewind (GetBody) or that was
// buffered because it fit in the limit; a body over the limit without
// GetBody, sent once as a stream (replayable false).
type replayBody struct {
	buf        []byte                        // buffered body, when getBody is nil and replayable
	getBody    func() (io.ReadCloser, error) // the caller's GetBody
	first      io.ReadCloser                 // body of attempt 0 when it comes from the caller
	replayable bool
}

// init prepares req's body for several attempts. It reads at most
// limit+1 bytes of a body without GetBody. A read error is returned wrapped in
// ErrBodyNotReplayable and the body is closed: nothing is sent.
func (rb *replayBody) init(req *http.Request, limit int64) error {
	rb.buf, rb.getBody, rb.first, rb.replayable = nil, nil, nil, true // a literal would be copied from a template
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	if req.GetBody != nil {
		rb.getBody = req.GetBody
		rb.first = req.Body
		return nil
	}
	var b bytes.Buffer
	if req.ContentLength > 0 && req.ContentLength <= limit {
		b.Grow(int(req.ContentLength))
	}
	n, err := io.Copy(&b, io.LimitReader(req.Body, limit+1))
	if err != nil {
		req.Body.Close()
		return fmt.Errorf("%w: reading body: %w", ErrBodyNotReplayable, err)
	}
	if n <= limit {
		req.Body.Close()
		rb.buf = b.Bytes()
		return nil
	}
	// Over the limit: stream what was read, then the rest, once.
	rb.replayable = false
	rb.buf = b.Bytes()
	rb.first = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(rb.buf), req.Body), req.Body}
	return nil
}

// none reports whether the request has no body.
func (rb *replayBody) none() bool { return rb.first == nil && rb.getBody == nil && rb.buf == nil }

// callers reports whether the first attempt carries the request's body as
// the caller made it: none, or the caller's own with its GetBody (init
// keeps both as they are). A buffered body is not: the attempt reads the
// buffer.
func (rb *replayBody) callers() bool { return rb.none() || rb.getBody != nil }

// body returns the body for attempt n (0 for the first). It fails only for a
// retry whose GetBody fails, or for a retry of a body that is not replayable.
func (rb *replayBody) body(n int) (io.ReadCloser, error) {
	switch {
	case rb.none():
		return http.NoBody, nil
	case n == 0 && rb.first != nil:
		return rb.first, nil
	case !rb.replayable:
		return nil, ErrBodyNotReplayable
	case rb.getBody != nil:
		r, err := rb.getBody()
		if err != nil {
			return nil, fmt.Errorf("%w: GetBody: %w", ErrBodyNotReplayable, err)
		}
		return r, nil
	}
	return io.NopCloser(bytes.NewReader(rb.buf)), nil
}

// rewind is the GetBody set on each attempt's request, so that
// http.Transport can rewind the body itself when it re-sends on a dead
// keep-alive connection. nil when the body cannot be replayed.
func (rb *replayBody) rewind() func() (io.ReadCloser, error) {
	switch {
	case rb.none():
		return func() (io.ReadCloser, error) { return http.NoBody, nil }
	case !rb.replayable:
		return nil
	case rb.getBody != nil:
		return rb.getBody
	}
	buf := rb.buf // captured by value: the func outlives the call, rb does not
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
}

// close releases the caller's body if no attempt consumed it.
func (rb *replayBody) close() {
	if rb.first != nil {
		rb.first.Close()
	}
}

// fingerprint is a hex SHA-256 over method, URL and body, identifying the
// request an operation was claimed with. For a body that is not replayable
// it covers the buffered prefix only.
func (rb *replayBody) fingerprint(req *http.Request) (string, error) {
	h := sha256.New()
	io.WriteString(h, req.Method)
	h.Write([]byte{0})
	io.WriteString(h, req.URL.String())
	h.Write([]byte{0})
	switch {
	case rb.getBody != nil:
		r, err := rb.getBody()
		if err != nil {
			return "", fmt.Errorf("%w: GetBody: %w", ErrBodyNotReplayable, err)
		}
		_, err = io.Copy(h, r)
		r.Close()
		if err != nil {
			return "", fmt.Errorf("%w: reading body: %w", ErrBodyNotReplayable, err)
		}
	default:
		h.Write(rb.buf)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
