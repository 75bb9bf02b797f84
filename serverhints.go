package resilient

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/resilienthttp/resilient/internal/retryafter"
)

// peekLimit bounds how much of a 400/409/422 body the classifier reads.
const peekLimit = 4 << 10

// PeekBody returns the first bytes (at most 4 KiB) of resp's body without
// consuming it: it replaces resp.Body with a reader that yields the same
// bytes, then the rest, and closes the original. A second call on the same
// response returns the same bytes and reads nothing. Classifiers use it to
// look at a problem body; a read error is kept for the caller after the
// bytes that came.
func PeekBody(resp *http.Response) []byte { return peek(resp) }

func peek(resp *http.Response) []byte {
	if p, ok := resp.Body.(*peekedBody); ok {
		return p.head
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	size := peekLimit
	if resp.ContentLength >= 0 && resp.ContentLength < peekLimit {
		// Read no more than announced; a body longer than its length
		// still reaches the caller whole, after the head.
		size = int(resp.ContentLength)
	}
	buf := make([]byte, size)
	n, err := io.ReadFull(resp.Body, buf)
	buf = buf[:n]
	var rest io.Reader = resp.Body
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		rest = eofReader{}
	case err != nil:
		// Keep the read error for the caller, after the bytes that came.
		rest = errReader{err: err}
	}
	resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(buf), rest), c: resp.Body, head: buf}
	return buf
}

// peekedBody is a body whose head was peeked: the head, then the rest.
type peekedBody struct {
	io.Reader
	c    io.Closer
	head []byte
}

func (p *peekedBody) Close() error { return p.c.Close() }

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// ServerDelay returns the delay a response's headers direct before the
// next request, as DefaultClassifier reads it into Decision.Delay. It reads
// the first present and valid of:
//
//   - Retry-After-Ms (Stainless APIs);
//   - x-ms-retry-after-ms (Azure);
//   - Retry-After: delay-seconds, or an HTTP-date measured against the
//     response's Date;
//   - the IETF RateLimit fields when a quota is spent;
//   - X-Amz-Retry-After (at most 5 s).
//
// It returns 0 when none directs a delay. Malformed values are ignored;
// huge ones are clamped to a year. The result is not capped by
// WithRetryAfterMax.
//
// It is public for a Classifier that does not wrap DefaultClassifier, so
// that its Decision.Delay honours the server as the default does, and for
// retry libraries that compute their own waits (retryablehttpadapter).
func ServerDelay(h http.Header, now time.Time) time.Duration { return retryafter.Delay(h, now) }
