package fakeserver

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"
)

// slowChunks is the number of pieces a FaultSlowBody body is sent in.
const slowChunks = 10

// abortKind says how a dropped connection looked, for the in-process
// transport (on a socket, the connection is simply gone).
type abortKind uint8

const (
	abortLost      abortKind = iota // closed before any byte of the response (the zero value)
	abortReset                      // reset (RST) before any byte of the response
	abortTruncated                  // closed in the middle of the body
	abortGone                       // the client gave up, or the server is closing
	abortRefused                    // the server was closed before the request was served
)

// aborter is implemented by the in-process response writer, which records how
// the connection was dropped.
type aborter interface{ abort(abortKind) }

// slowWriter is implemented by the in-process response writer: instead of the
// handler sleeping between chunks, the response body it returns does.
type slowWriter interface {
	slow(total time.Duration, chunks int)
}

// abortConn drops the connection and does not return: it panics with
// http.ErrAbortHandler, which net/http answers by closing the connection and
// the in-process transport by returning an error. A reset on a socket first
// hijacks the connection and closes it with SO_LINGER 0, so the peer sees RST.
func abortConn(w http.ResponseWriter, kind abortKind) {
	if a, ok := w.(aborter); ok {
		a.abort(kind)
	} else if kind == abortReset {
		resetSocket(w)
	}
	panic(http.ErrAbortHandler)
}

func resetSocket(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return // HTTP/2: the panic resets the stream
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// sleep waits d, or until ctx is done or the server closes; it reports whether
// the whole d elapsed.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.closing.Done():
		return false
	}
}

// pre carries out the part of f before the effect: its latency, then a status
// (returned, to be sent instead of executing), a reset or a hang (neither
// returns). It returns nil when the request goes on.
func (s *Server) pre(w http.ResponseWriter, r *http.Request, f Fault) *response {
	resp, abort, ok := s.preFault(r.Context(), f)
	if !ok {
		abortConn(w, abort)
	}
	return resp
}

// preFault is pre without the abort: ok is false when the connection must be
// dropped the way abort says, which the caller does once it has settled the
// request's claim, so that a client that sees the reset finds the key
// released, not still in progress.
func (s *Server) preFault(ctx context.Context, f Fault) (resp *response, abort abortKind, ok bool) {
	if f.Kind == FaultLatency {
		s.stats.fault(string(FaultLatency))
	}
	if !s.sleep(ctx, time.Duration(f.Latency)) {
		return nil, abortGone, false
	}
	switch f.Kind {
	case FaultStatus:
		s.stats.fault(string(FaultStatus))
		return s.statusResponse(f), 0, true
	case FaultReset:
		s.stats.fault(string(FaultReset))
		return nil, abortReset, false
	case FaultHang:
		s.stats.fault(string(FaultHang))
		select {
		case <-ctx.Done():
		case <-s.closing.Done():
		}
		return nil, abortGone, false
	}
	return nil, 0, true
}

// statusResponse is the answer of a FaultStatus.
func (s *Server) statusResponse(f Fault) *response {
	status := orInt(f.Status, http.StatusServiceUnavailable)
	p := problemResponse(status, "injected-fault", statusTitle(status),
		"fakeserver: injected fault "+strconv.Itoa(status), "")
	if d := time.Duration(f.RetryAfter); d > 0 {
		if f.RetryAfterDate {
			// Round up to the next whole second: an HTTP date has no fraction.
			at := s.now().Add(d + time.Second - 1).Truncate(time.Second)
			p.header.Set("Retry-After", at.UTC().Format(http.TimeFormat))
		} else {
			p.header.Set("Retry-After", retryAfterSeconds(d))
		}
	}
	for k, v := range f.Headers {
		p.header.Set(k, v)
	}
	return p
}

// send writes resp (a copy of its headers, so a stored response stays intact)
// with the Idempotency-Status idem, if any, and carries out the part of f that
// acts on the transmission.
func (s *Server) send(w http.ResponseWriter, r *http.Request, resp *response, idem string, f Fault) {
	h := w.Header()
	for k, v := range resp.header {
		h[k] = append([]string(nil), v...)
	}
	if idem != "" {
		h.Set("Idempotency-Status", idem)
	}
	if idem == statusReplayed {
		h.Set("Idempotent-Replayed", "true")
	}
	body := resp.body
	switch f.Kind {
	case FaultLostResponse:
		s.stats.fault(string(FaultLostResponse))
		abortConn(w, abortLost)
	case FaultMalformedBody:
		s.stats.fault(string(FaultMalformedBody))
		body = malformed(body)
	case FaultTruncatedBody:
		s.stats.fault(string(FaultTruncatedBody))
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(resp.status)
		_, _ = w.Write(body[:len(body)/2])
		flush(w)
		abortConn(w, abortTruncated)
	case FaultSlowBody:
		s.stats.fault(string(FaultSlowBody))
		s.sendSlowly(w, r, resp.status, body, orDuration(time.Duration(f.BodyDuration), defaultBodyDuration))
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.status)
	_, _ = w.Write(body)
}

// sendSlowly sends the headers at once and the body in slowChunks pieces
// spread over total.
func (s *Server) sendSlowly(w http.ResponseWriter, r *http.Request, status int, body []byte, total time.Duration) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if sw, ok := w.(slowWriter); ok {
		sw.slow(total, slowChunks)
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	w.WriteHeader(status)
	flush(w)
	chunk := max(1, (len(body)+slowChunks-1)/slowChunks)
	for off := 0; off < len(body); off += chunk {
		if !s.sleep(r.Context(), total/slowChunks) {
			abortConn(w, abortGone)
		}
		_, _ = w.Write(body[off:min(off+chunk, len(body))])
		flush(w)
	}
}

// malformed returns a body that is not valid JSON: the first half of body and
// a fragment that no JSON text can contain there (either a stray '<' or, when
// the cut falls inside a string, an unterminated string).
func malformed(body []byte) []byte {
	out := append([]byte(nil), body[:len(body)/2]...)
	return append(out, "<!-- malformed by fakeserver -->"...)
}

func flush(w http.ResponseWriter) {
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}
