package fakeserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"syscall"
	"time"
)

// transport serves requests in-process: RoundTrip calls the server's handler
// in the caller's goroutine with a recording ResponseWriter, then turns what
// was recorded into a response or, for a dropped connection, into the error a
// socket would have given. It ignores the URL's scheme and host.
type transport struct{ s *Server }

// inProcessAddr is the address in the errors of the in-process transport.
func inProcessAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// RoundTrip implements http.RoundTripper as documented on Server.Transport.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	closeBody := func() {
		if req.Body != nil {
			_ = req.Body.Close()
		}
	}
	if req.URL == nil {
		closeBody()
		return nil, errors.New("fakeserver: in-process transport: nil Request.URL")
	}
	if err := ctx.Err(); err != nil {
		closeBody()
		return nil, err
	}
	if t.s.closing.Err() != nil {
		closeBody()
		return nil, refusedError()
	}
	sr := req.WithContext(ctx) // shallow copy: the caller's request is not modified
	if sr.Body == nil {
		sr.Body = http.NoBody
	}
	sr.RequestURI = req.URL.RequestURI()
	sr.RemoteAddr = "127.0.0.1:1"
	if sr.Host == "" {
		sr.Host = req.URL.Host
	}
	// The handler reads the header as a server parses it off the wire:
	// field names canonicalized (a client may send any spelling, and
	// resilient sends its key as "idempotency-key").
	sr.Header = wireHeader(req.Header)
	rec := &recorder{header: make(http.Header), status: http.StatusOK}
	aborted := rec.serve(t.s.handler, sr)
	closeBody()
	if !aborted || rec.kind != abortRefused {
		// The server had the request: over a socket it was written,
		// and a client that watches its writes (httptrace) must see
		// it, or it would take a lost answer for a request that never
		// left.
		if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.WroteRequest != nil {
			trace.WroteRequest(httptrace.WroteRequestInfo{})
		}
	}

	if err := ctx.Err(); err != nil {
		return nil, err
	}
	end := io.EOF
	if aborted {
		switch {
		case rec.kind == abortRefused:
			return nil, refusedError()
		case rec.kind == abortReset && !rec.wroteHeader:
			return nil, fmt.Errorf("fakeserver: in-process connection reset by the server: %w",
				&net.OpError{Op: "read", Net: "tcp", Source: inProcessAddr(), Addr: inProcessAddr(),
					Err: os.NewSyscallError("read", syscall.ECONNRESET)})
		case !rec.wroteHeader:
			return nil, fmt.Errorf("fakeserver: in-process connection closed before the response: %w",
				&net.OpError{Op: "read", Net: "tcp", Source: inProcessAddr(), Addr: inProcessAddr(),
					Err: io.ErrUnexpectedEOF})
		}
		end = io.ErrUnexpectedEOF
	}
	resp := &http.Response{
		Status:        strconv.Itoa(rec.status) + " " + http.StatusText(rec.status),
		StatusCode:    rec.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        rec.header,
		ContentLength: int64(len(rec.body)),
		Request:       req,
		Body: &bodyReader{ctx: ctx, b: rec.body, end: end,
			chunks: rec.chunks, delay: rec.delay},
	}
	if n, err := strconv.ParseInt(rec.header.Get("Content-Length"), 10, 64); err == nil {
		resp.ContentLength = n
	}
	return resp, nil
}

func refusedError() error {
	return fmt.Errorf("fakeserver: in-process server is closed: %w",
		&net.OpError{Op: "dial", Net: "tcp", Addr: inProcessAddr(),
			Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
}

// recorder is the in-process http.ResponseWriter. The handler runs in the
// RoundTrip goroutine, so it needs no lock; the header map is handed to the
// response once the handler has returned.
type recorder struct {
	header      http.Header
	status      int
	wroteHeader bool
	body        []byte
	kind        abortKind
	delay       time.Duration // per chunk, for a slow body
	chunks      int
}

// serve runs h and reports whether it aborted with http.ErrAbortHandler; any
// other panic goes on up.
func (rec *recorder) serve(h http.Handler, r *http.Request) (aborted bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler { // net/http compares the same way
				panic(v)
			}
			aborted = true
		}
	}()
	h.ServeHTTP(rec, r)
	return false
}

func (rec *recorder) Header() http.Header { return rec.header }

func (rec *recorder) WriteHeader(code int) {
	if rec.wroteHeader {
		return
	}
	rec.status, rec.wroteHeader = code, true
}

func (rec *recorder) Write(p []byte) (int, error) {
	rec.WriteHeader(http.StatusOK)
	rec.body = append(rec.body, p...)
	return len(p), nil
}

// Flush implements http.Flusher; everything is delivered when the handler
// returns.
func (rec *recorder) Flush() { rec.WriteHeader(http.StatusOK) }

func (rec *recorder) abort(kind abortKind) { rec.kind = kind }

func (rec *recorder) slow(total time.Duration, chunks int) {
	rec.chunks, rec.delay = chunks, total/time.Duration(chunks)
}

// bodyReader is the in-process response body: the recorded bytes, then end
// (io.EOF, or io.ErrUnexpectedEOF for a truncated body). A slow body waits
// delay before each of its chunks, honouring the request's context.
type bodyReader struct {
	ctx    context.Context
	b      []byte
	end    error
	chunks int
	delay  time.Duration
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if len(b.b) == 0 {
		return 0, b.end
	}
	if b.delay > 0 {
		t := time.NewTimer(b.delay)
		select {
		case <-t.C:
		case <-b.ctx.Done():
			t.Stop()
			return 0, b.ctx.Err()
		}
		if chunk := max(1, (len(b.b)+b.chunks-1)/b.chunks); len(p) > chunk {
			p = p[:chunk]
		}
		b.chunks = max(1, b.chunks-1)
	}
	n := copy(p, b.b)
	b.b = b.b[n:]
	return n, nil
}

func (b *bodyReader) Close() error { return nil }

// wireHeader returns a copy of h with its field names canonicalized, as
// net/http's server reads them; the values of fields that differ only in
// case are merged (in no set order: a client that sends both spellings
// sends a field twice).
func wireHeader(h http.Header) http.Header {
	w := make(http.Header, len(h))
	for k, vv := range h {
		ck := http.CanonicalHeaderKey(k)
		w[ck] = append(w[ck], vv...)
	}
	return w
}
