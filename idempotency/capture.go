package idempotency

import "net/http"

// capture is the ResponseWriter a wrapped handler writes to: it buffers
// the answer, up to limit bytes of body, until it is stored. It implements
// no optional interface (no Flush, Hijack, ReadFrom, Unwrap), so that
// http.ResponseController and type assertions report http.ErrNotSupported
// or false: an answer that streams cannot be stored whole, nor one whose
// connection was taken over.
type capture struct {
	header   http.Header
	status   int // 0 until WriteHeader or Write
	body     []byte
	limit    int64
	oversize bool // the handler wrote more than limit bytes
}

func newCapture(limit int64) *capture {
	return &capture{header: make(http.Header), limit: limit}
}

func (c *capture) Header() http.Header { return c.header }

// WriteHeader records the first final status; 1xx are ignored (they are
// not part of the stored answer).
func (c *capture) WriteHeader(code int) {
	if c.status != 0 || code < 200 {
		return
	}
	c.status = code
}

// Write buffers p, or drops the rest of the body once past the limit.
func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if c.oversize || int64(len(c.body))+int64(len(p)) > c.limit {
		c.oversize = true
		c.body = nil
		return len(p), nil // the handler need not know; its answer is refused after it returns
	}
	c.body = append(c.body, p...)
	return len(p), nil
}

// response returns the buffered answer with the allow-listed headers only.
func (c *capture) response(allow []string) *Response {
	status := c.status
	if status == 0 {
		status = http.StatusOK
	}
	// One lookup per allowed name; the map made for what was found, plus
	// the principal (ownedClaim) and a sniffed Content-Type: a small map,
	// not one of len(allow).
	type field struct {
		name   string
		values []string
	}
	var buf [16]field
	found := buf[:0]
	if len(c.header) < len(allow) { // the fewer lookups
		for name, v := range c.header {
			if len(v) > 0 && contains(allow, name) {
				found = append(found, field{name, v[:len(v):len(v)]}) // the handler has returned: its header is the record's
			}
		}
	} else {
		for _, name := range allow {
			if v := c.header[name]; len(v) > 0 {
				found = append(found, field{name, v[:len(v):len(v)]})
			}
		}
	}
	h := make(http.Header, len(found)+2)
	for _, f := range found {
		h[f.name] = f.values
	}
	if _, ok := h["Content-Type"]; !ok && len(c.body) > 0 && contains(allow, "Content-Type") {
		// What net/http would have sniffed for the first answer.
		h["Content-Type"] = []string{http.DetectContentType(c.body)}
	}
	return &Response{Status: status, Header: h, Body: c.body}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
