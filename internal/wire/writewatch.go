package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"
)

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

// seen returns what w saw of its attempt's writes.
func (w *writeWatch) seen() Writes {
	wrote := w.wrote.Load()
	return Writes{Traced: true, Any: wrote >= 1, Again: wrote >= 2, Resends: max(int(w.resent.Load()), int(wrote)-1)}
}

func (w *writeWatch) wroteRequest(info httptrace.WroteRequestInfo) {
	if info.Err != nil && ClientLimit(info.Err) {
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

func (c *watchCtx) Done() <-chan struct{} { return c.parent.Done() }

func (c *watchCtx) Err() error { return c.parent.Err() }

func (c *watchCtx) Value(key any) any {
	if key == traceKey {
		return &c.trace
	}
	return c.parent.Value(key)
}

// traceKey is the key under which httptrace keeps a context's ClientTrace.
// It is learnt once: httptrace looks a trace up in a context that records
// the key it is asked for. Then it is checked: httptrace must find a trace
// put under that key. It is nil if either step fails. The Transport then
// uses httptrace.WithClientTrace.
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

func (k keyedCtx) Done() <-chan struct{} { return nil }

func (k keyedCtx) Err() error { return nil }

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

// clientLimitErrors are the texts of the errors net/http raises for the
// client's own limits and configuration. net/http does not type them. The
// same request fails the same way every time, so they are terminal. This is
// the one place where an error is recognised by its text.
var clientLimitErrors = [...]string{
	"server response headers exceeded",                        // Transport.MaxResponseHeaderBytes (HTTP/1)
	"response header list larger than advertised limit",       // the same, HTTP/2
	"request header list larger than peer's advertised limit", // the server's SETTINGS_MAX_HEADER_LIST_SIZE
	"unsupported protocol scheme",                             // no RoundTripper for the URL's scheme
	"http: ContentLength=",                                    // a body shorter than Request.ContentLength
	"http: Request.ContentLength=",                            // ContentLength set with a nil Body
	"can't write control character in Request.URL",
	"http: no Host in request URL",
	"http: Request.RequestURI can't be set in client requests",
}

// ClientLimit reports whether err is one of clientLimitErrors.
func ClientLimit(err error) bool {
	if isNetError(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return false // a network error (and no text to build)
	}
	msg := err.Error()
	for _, s := range clientLimitErrors {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// isNetError reports whether err's tree has a net.Error.
func isNetError(err error) bool {
	_, ok := errors.AsType[net.Error](err)
	return ok
}
