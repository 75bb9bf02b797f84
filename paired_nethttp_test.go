package resilient_test

// Paired tests of the whole RoundTrip surface against net/http's own
// behaviour: each case runs once through a bare client over an
// http.Transport and once through the same client wrapped with default
// options (resilient.Wrap, no option), each side against its own loopback
// server, and compares what the caller and the server observed. The cases
// run on every request shape the Transport treats differently: a GET (a
// plain call sent as is), a POST with a rewindable body (a plain call with
// a minted key), a POST with a streamed body (the loop, with a minted key)
// and a PUT carrying the application's key (the loop, with its own key).
// The observations leave out what the SDK adds by design (the key header);
// what differs by design is said where it is asserted.
// paired_nethttp_cancel_test.go holds the cases of deadlines and
// cancellation.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pnShape is a request shape: a method and a body, and whether the
// caller's header carries a key.
type pnShape struct {
	name   string
	method string
	body   func() io.Reader // nil: no body
	keyed  bool             // the caller sets Idempotency-Key
}

var pnShapes = []pnShape{
	{"GET", http.MethodGet, nil, false},
	{"POST rewindable", http.MethodPost, func() io.Reader { return strings.NewReader("payload") }, false},
	{"POST streamed", http.MethodPost, func() io.Reader { return onlyReader{strings.NewReader("payload")} }, false},
	{"PUT own key", http.MethodPut, func() io.Reader { return strings.NewReader("payload") }, true},
}

// pnPair runs f on both sides and returns the observations: bare, then
// wrapped with default options.
// tune, if any, tunes the base's http.Transport.
func pnPair[T any](t *testing.T, f func(t *testing.T, c *http.Client) T, tune ...func(*http.Transport)) (bare, wrapped T) {
	t.Helper()
	t.Run("bare", func(t *testing.T) { bare = f(t, newBase(t, tune...)) })
	t.Run("wrapped", func(t *testing.T) { wrapped = f(t, resilient.Wrap(newBase(t, tune...))) })
	return bare, wrapped
}

// pnRequest builds a request of shape s to u under ctx.
func pnRequest(t *testing.T, ctx context.Context, s pnShape, u string) *http.Request {
	t.Helper()
	var body io.Reader
	if s.body != nil {
		body = s.body()
	}
	req, err := http.NewRequestWithContext(ctx, s.method, u, body)
	require.NoError(t, err)
	if s.keyed {
		req.Header.Set("Idempotency-Key", "caller-key-1")
	}
	return req
}

// pnCtx is a context for one paired call: a bound on a test that hangs,
// never asserted on.
func pnCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pnEcho is what a server saw of a request, without the key header the
// SDK adds.
func pnEcho(r *http.Request) string {
	b, err := io.ReadAll(r.Body)
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		if k != "Idempotency-Key" && k != "Accept-Encoding" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var h strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&h, "%s=%q ", k, r.Header[k])
	}
	return fmt.Sprintf("%s %s host=%s close=%v cl=%d te=%q body=%q err=%v trailer=%q header=[%s] ae=%q",
		r.Method, r.URL.RequestURI(), r.Host, r.Close, r.ContentLength, r.TransferEncoding, b, err, r.Trailer, h.String(), r.Header.Get("Accept-Encoding"))
}

// pnServerless replaces srv's address in obs: each side has its own
// server.
func pnServerless(obs string, srv *httptest.Server) string {
	return strings.ReplaceAll(obs, srv.Listener.Addr().String(), "SERVER")
}

// A request's features reach the server as a bare client sends them, and
// the answer reaches the caller as a bare client gets it.
func TestPairedRequestFeatures(t *testing.T) {
	for _, mod := range []struct {
		name string
		mod  func(req *http.Request, srvURL string)
	}{
		{"as is", func(*http.Request, string) {}},
		{"Close", func(req *http.Request, _ string) { req.Close = true }},
		{"Host override", func(req *http.Request, _ string) { req.Host = "api.example.test" }},
		{"userinfo", func(req *http.Request, _ string) { req.URL.User = url.UserPassword("alice", "s3cret") }},
		{"trailer", func(req *http.Request, _ string) {
			if req.Body != nil && req.Body != http.NoBody {
				req.Trailer = http.Header{"X-Sum": {"42"}}
			}
		}},
		{"query and escaped path", func(req *http.Request, _ string) {
			req.URL.RawPath, req.URL.Path, req.URL.RawQuery = "/a%2Fb/c", "/a/b/c", "x=1&y=%20"
		}},
		{"repeated fields", func(req *http.Request, _ string) {
			req.Header["X-Multi"] = []string{"one", "two"}
			req.Header.Set("Accept-Encoding", "identity")
		}},
		{"lowercase method", func(req *http.Request, _ string) { req.Method = strings.ToLower(req.Method) }},
		{"custom method", func(req *http.Request, _ string) { req.Method = "PURGE" }},
	} {
		for _, s := range pnShapes {
			t.Run(mod.name+"/"+s.name, func(t *testing.T) {
				bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) string {
					srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
						w.Header().Set("Trailer", "X-Echo")
						w.Header().Set("X-Seen", pnEcho(r))
						w.WriteHeader(http.StatusCreated)
						io.WriteString(w, "answer")
						w.Header().Set("X-Echo", r.Trailer.Get("X-Sum"))
					})
					req := pnRequest(t, pnCtx(t), s, srv.URL+"/x")
					mod.mod(req, srv.URL)
					resp, err := c.Do(req)
					require.NoError(t, err)
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					require.NoError(t, err)
					obs := fmt.Sprintf("%d close=%v cl=%d body=%q trailer=%q seen: %s", resp.StatusCode, resp.Close, resp.ContentLength, b, resp.Trailer, resp.Header.Get("X-Seen"))
					return pnServerless(obs, srv)
				})
				assert.Contains(t, bare, "201 ", "the bare side works")
				assert.Equal(t, bare, wrapped)
			})
		}
	}
}

// pnBodies are request bodies of every framing net/http knows: none, empty,
// known length with and without GetBody, unknown length (chunked).
var pnBodies = []struct {
	name string
	make func(req *http.Request)
}{
	{"nil", func(req *http.Request) {}},
	{"http.NoBody", func(req *http.Request) { req.Body = http.NoBody }},
	{"known length, GetBody", func(req *http.Request) {
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader("abc")), 3
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("abc")), nil }
	}},
	{"unknown length, GetBody", func(req *http.Request) {
		req.Body, req.ContentLength = io.NopCloser(onlyReader{strings.NewReader("abc")}), -1
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(onlyReader{strings.NewReader("abc")}), nil }
	}},
	{"known length, no GetBody", func(req *http.Request) {
		req.Body, req.ContentLength = io.NopCloser(onlyReader{strings.NewReader("abc")}), 3
	}},
	{"length 0 given, no GetBody", func(req *http.Request) {
		req.Body, req.ContentLength = io.NopCloser(onlyReader{strings.NewReader("abc")}), 0
	}},
	{"empty, no GetBody", func(req *http.Request) {
		req.Body, req.ContentLength = io.NopCloser(onlyReader{strings.NewReader("")}), 0
	}},
	{"unknown length, no GetBody", func(req *http.Request) {
		req.Body, req.ContentLength = io.NopCloser(onlyReader{strings.NewReader("abc")}), -1
	}},
}

// Every body framing reaches the server as a bare client frames it
// (Content-Length, chunked, none), for the methods that key and those that
// do not.
func TestPairedBodyFraming(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodGet, http.MethodDelete} {
		for _, b := range pnBodies {
			t.Run(method+"/"+b.name, func(t *testing.T) {
				bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) string {
					srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, pnEcho(r)) })
					req, err := http.NewRequestWithContext(pnCtx(t), method, srv.URL, nil)
					require.NoError(t, err)
					b.make(req)
					resp, err := c.Do(req)
					require.NoError(t, err)
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					require.NoError(t, err)
					return pnServerless(string(got), srv)
				})
				assert.Contains(t, bare, method+" /", "the bare side works")
				assert.Equal(t, bare, wrapped)
			})
		}
	}
}

// pnBody is a request body that counts its Close calls and may fail its
// reads.
type pnBody struct {
	r      io.Reader
	fail   error // returned once r is read, if not nil
	closed *atomic.Int32
}

// newPNBody returns a body of "payload" counting its Close calls in
// closed; with fail, its reads fail after "pay": the request never reaches
// the server whole.
func newPNBody(fail error, closed *atomic.Int32) *pnBody {
	if fail != nil {
		return &pnBody{r: strings.NewReader("pay"), fail: fail, closed: closed}
	}
	return &pnBody{r: strings.NewReader("payload"), closed: closed}
}

func (b *pnBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF && b.fail != nil {
		return n, b.fail
	}
	return n, err
}

func (b *pnBody) Close() error { b.closed.Add(1); return nil }

// errPNBody is the read error of a failing request body.
var errPNBody = errors.New("paired: body read failed")

// The caller's request body is closed exactly once, on every path, as
// net/http closes it: answered, answered 503 (the wrapped side may retry),
// a refused connection, a context done before the call, a body whose read
// fails, a header net/http refuses, a connection closed without an answer.
// A body with GetBody and one without.
func TestPairedBodyClosedOnce(t *testing.T) {
	refused := httptest.NewServer(http.NotFoundHandler())
	refused.Close() // its port now refuses connections
	for _, path := range []struct {
		name    string
		status  int  // the server's answer, 0: it closes the connection
		refused bool // the connection is refused
		done    bool // the context is done before the call
		fail    bool // the body's read fails
		badHdr  bool // the header holds a field net/http refuses
	}{
		{name: "answered", status: 200},
		{name: "answered 503", status: 503},
		{name: "no answer", status: 0},
		{name: "refused", refused: true},
		{name: "context done", status: 200, done: true},
		{name: "body read fails", status: 200, fail: true},
		{name: "bad header", status: 200, badHdr: true},
	} {
		for _, getBody := range []bool{true, false} {
			for _, method := range []string{http.MethodPost, http.MethodPut} {
				t.Run(fmt.Sprintf("%s/GetBody=%v/%s", path.name, getBody, method), func(t *testing.T) {
					bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) string {
						srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
							io.Copy(io.Discard, r.Body)
							if path.status == 0 {
								conn, _, err := http.NewResponseController(w).Hijack()
								if err == nil {
									conn.Close()
								}
								return
							}
							w.WriteHeader(path.status)
						})
						u := srv.URL
						if path.refused {
							u = refused.URL
						}
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						defer cancel()
						if path.done {
							cancel()
						}
						var closed atomic.Int32
						var fail error
						if path.fail {
							fail = errPNBody
						}
						body := newPNBody(fail, &closed)
						req, err := http.NewRequestWithContext(ctx, method, u, body)
						require.NoError(t, err)
						if getBody {
							req.ContentLength = 7
							req.GetBody = func() (io.ReadCloser, error) {
								return newPNBody(fail, new(atomic.Int32)), nil
							}
						}
						if path.badHdr {
							req.Header["Bad Name"] = []string{"x"}
						}
						resp, err := c.Do(req)
						obs := "error"
						if err == nil {
							obs = fmt.Sprint(resp.StatusCode)
							resp.Body.Close()
						}
						require.Eventually(t, func() bool { return closed.Load() > 0 }, 5*time.Second, time.Millisecond, "the body was closed")
						srv.Close() // every connection ends: a second Close would have come by now
						c.CloseIdleConnections()
						return fmt.Sprintf("%s closed=%d", obs, closed.Load())
					})
					assert.Contains(t, bare, "closed=1")
					assert.Equal(t, bare, wrapped)
				})
			}
		}
	}
}

// The caller's httptrace hooks fire as for a bare client: once each for
// one attempt, a 103 included.
func TestPairedTraceHooks(t *testing.T) {
	for _, s := range pnShapes {
		t.Run(s.name, func(t *testing.T) {
			bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) []string {
				srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					w.Header().Set("Link", "</a.css>; rel=preload")
					w.WriteHeader(http.StatusEarlyHints)
					io.WriteString(w, "ok")
				})
				var mu sync.Mutex
				var fired []string
				note := func(name string) {
					mu.Lock()
					fired = append(fired, name)
					mu.Unlock()
				}
				trace := &httptrace.ClientTrace{
					GetConn:              func(string) { note("GetConn") },
					GotConn:              func(httptrace.GotConnInfo) { note("GotConn") },
					ConnectStart:         func(string, string) { note("ConnectStart") },
					ConnectDone:          func(string, string, error) { note("ConnectDone") },
					WroteHeaderField:     func(k string, _ []string) { note("WroteHeaderField " + k) },
					WroteHeaders:         func() { note("WroteHeaders") },
					WroteRequest:         func(httptrace.WroteRequestInfo) { note("WroteRequest") },
					Got1xxResponse:       func(code int, _ textproto.MIMEHeader) error { note(fmt.Sprint("Got1xx ", code)); return nil },
					GotFirstResponseByte: func() { note("GotFirstResponseByte") },
				}
				req := pnRequest(t, httptrace.WithClientTrace(pnCtx(t), trace), s, srv.URL)
				resp, err := c.Do(req)
				require.NoError(t, err)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				defer mu.Unlock()
				// The key field is the SDK's (sent as idempotency-key, see
				// WithKeyHeader): the hook sees it written.
				return slices.DeleteFunc(slices.Clone(fired), func(s string) bool { return strings.EqualFold(s, "WroteHeaderField Idempotency-Key") })
			})
			assert.Contains(t, bare, "WroteRequest")
			assert.Contains(t, bare, "Got1xx 103")
			assert.Equal(t, bare, wrapped)
		})
	}
}

// A response without a body is http.NoBody, and what a body-less answer
// says of its length is kept: HEAD, 204, 304, an empty 200.
func TestPairedBodilessResponses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		status int
	}{
		{"HEAD", http.MethodHead, 200},
		{"204", http.MethodGet, 204},
		{"304", http.MethodGet, 304},
		{"empty 200", http.MethodGet, 200},
		{"POST 204", http.MethodPost, 204},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) string {
				srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
					if tc.method == http.MethodHead {
						w.Header().Set("Content-Length", "1234")
					} else if tc.status == 200 {
						w.Header().Set("Content-Length", "0")
					}
					w.WriteHeader(tc.status)
				})
				req, err := http.NewRequestWithContext(pnCtx(t), tc.method, srv.URL, strings.NewReader("x"))
				require.NoError(t, err)
				resp, err := c.Do(req)
				require.NoError(t, err)
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				return fmt.Sprintf("%d cl=%d nobody=%v read=%q %v", resp.StatusCode, resp.ContentLength, resp.Body == http.NoBody, b, err)
			})
			assert.Equal(t, bare, wrapped)
		})
	}
}

// A gzip answer is decoded transparently on every shape (the transport
// asked for it), and resp.Uncompressed says so.
func TestPairedTransparentGzip(t *testing.T) {
	for _, s := range pnShapes {
		t.Run(s.name, func(t *testing.T) {
			bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) string {
				srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Encoding", "gzip")
					zw := gzip.NewWriter(w)
					io.WriteString(zw, "hello")
					zw.Close()
				})
				resp, err := c.Do(pnRequest(t, pnCtx(t), s, srv.URL))
				require.NoError(t, err)
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				return fmt.Sprintf("%q %v uncompressed=%v ce=%q cl=%d", b, err, resp.Uncompressed, resp.Header.Get("Content-Encoding"), resp.ContentLength)
			})
			assert.Equal(t, `"hello" <nil> uncompressed=true ce="" cl=-1`, bare)
			assert.Equal(t, bare, wrapped)
		})
	}
}

// Over TLS, HTTP/1.1 and HTTP/2: resp.TLS is the connection's state, the
// protocol is the bare client's, a response streams (its first bytes reach
// the caller before the server writes the rest), and the response's
// trailer arrives.
func TestPairedTLSAndStreaming(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		for _, s := range pnShapes {
			t.Run(fmt.Sprintf("h2=%v/%s", h2, s.name), func(t *testing.T) {
				bare, wrapped := pnPair(t, func(t *testing.T, _ *http.Client) string {
					next := make(chan struct{})
					srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						io.Copy(io.Discard, r.Body)
						w.Header().Set("Trailer", "X-End")
						io.WriteString(w, "one\n")
						http.NewResponseController(w).Flush()
						select {
						case <-next:
							io.WriteString(w, "two\n")
							w.Header().Set("X-End", "done")
						case <-r.Context().Done():
						}
					}))
					srv.EnableHTTP2 = h2
					srv.StartTLS()
					t.Cleanup(srv.Close)
					c := srv.Client()
					t.Cleanup(c.CloseIdleConnections)
					if strings.HasSuffix(t.Name(), "/wrapped") {
						c = resilient.Wrap(c)
					}
					resp, err := c.Do(pnRequest(t, pnCtx(t), s, srv.URL))
					require.NoError(t, err)
					defer resp.Body.Close()
					br := bufio.NewReader(resp.Body)
					first, err := br.ReadString('\n') // the server waits for next: the line came alone
					require.NoError(t, err)
					close(next)
					rest, err := io.ReadAll(br)
					require.NoError(t, err)
					return fmt.Sprintf("%s|%s proto=%d tls=%v trailer=%q", first, rest, resp.ProtoMajor,
						resp.TLS != nil && resp.TLS.HandshakeComplete, resp.Trailer.Get("X-End"))
				})
				assert.Equal(t, fmt.Sprintf("one\n|two\n proto=%d tls=true trailer=\"done\"", map[bool]int{false: 1, true: 2}[h2]), bare)
				assert.Equal(t, bare, wrapped)
			})
		}
	}
}

// errPNCause is the cause a caller cancels its context with.
var errPNCause = errors.New("paired: the caller gave up")

// pnErrObs is what a caller's error tests see of an error: the names of
// those that hold.
//
// (*url.Error).Temporary is left out: it holds on a bare client's context
// deadline and http.Transport's timeouts, not on a wrapped one's, since
// *Error has no Temporary method (see the review's note,
// notes/review-paired.md).
func pnErrObs(err error) []string {
	if err == nil {
		return []string{"no error"}
	}
	var ue *url.Error
	var oe *net.OpError
	var ne net.Error
	var got []string
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"url.Error", errors.As(err, &ue)},
		{"Timeout", ue != nil && ue.Timeout()},
		{"os.IsTimeout", os.IsTimeout(err)},
		{"net.Error", errors.As(err, &ne)},
		{"net.Error.Timeout", ne != nil && ne.Timeout()},
		{"*net.OpError", errors.As(err, &oe)},
		{"context.Canceled", errors.Is(err, context.Canceled)},
		{"context.DeadlineExceeded", errors.Is(err, context.DeadlineExceeded)},
		{"the cause", errors.Is(err, errPNCause)},
		{"io.EOF", errors.Is(err, io.EOF)},
		{"io.ErrUnexpectedEOF", errors.Is(err, io.ErrUnexpectedEOF)},
		{"ECONNREFUSED", errors.Is(err, syscall.ECONNREFUSED)},
		{"the body's error", errors.Is(err, errPNBody)},
	} {
		if c.ok {
			got = append(got, c.name)
		}
	}
	return got
}

// pnServer is a test server's handler; release is closed when the test
// ends.
type pnServer func(w http.ResponseWriter, r *http.Request, release <-chan struct{})

// pnHijackClose closes the connection without an answer.
func pnHijackClose(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
	io.Copy(io.Discard, r.Body)
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
	}
}

// pnCutBody answers 200 with a Content-Length of 100 and closes the
// connection after 10 bytes.
func pnCutBody(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
	io.Copy(io.Discard, r.Body)
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
	brw.Flush()
}

// pnHang reads the request and hangs until the client goes away.
func pnHang(_ http.ResponseWriter, r *http.Request, release <-chan struct{}) {
	io.Copy(io.Discard, r.Body)
	hang(r, release)
}

// The errors a caller tests for match as they do on a bare client's: the
// context's errors and cause, timeouts, io.EOF and io.ErrUnexpectedEOF,
// a refused dial, a request body's read error. The POSTs are those the
// wrapped side does not retry (the server did not show that it dedupes),
// so both sides send one attempt; a GET is retried after some of these,
// which is the SDK's purpose, and is checked where its call ends as one
// attempt's would (the caller's context, a body's read error, a response
// cut short).
func TestPairedErrors(t *testing.T) {
	refused := httptest.NewServer(http.NotFoundHandler())
	refused.Close()
	get, post, streamed := pnShapes[0], pnShapes[1], pnShapes[2]
	const (
		plain = iota
		cancelledBefore
		cancelledOnArrival
		shortDeadline
		passedDeadlineCause
		shortDeadlineCause
		refusedDial
		failingBody
	)
	for _, tc := range []struct {
		name      string
		shape     pnShape
		server    pnServer
		call      int
		tune      func(*http.Transport)
		readBody  bool // the error is the response body's
		wantMatch string
	}{
		{name: "no answer POST", shape: post, server: pnHijackClose, wantMatch: "io.EOF"},
		{name: "no answer POST streamed", shape: streamed, server: pnHijackClose, wantMatch: "io.EOF"},
		{name: "refused POST", shape: post, call: refusedDial, wantMatch: "ECONNREFUSED"},
		{name: "cut mid-body GET", shape: get, server: pnCutBody, readBody: true, wantMatch: "io.ErrUnexpectedEOF"},
		{name: "cut mid-body POST", shape: post, server: pnCutBody, readBody: true, wantMatch: "io.ErrUnexpectedEOF"},
		{name: "cause before the call GET", shape: get, call: cancelledBefore, wantMatch: "the cause"},
		{name: "cause before the call POST", shape: post, call: cancelledBefore, wantMatch: "the cause"},
		{name: "cause before the call POST streamed", shape: streamed, call: cancelledBefore, wantMatch: "the cause"},
		{name: "cause awaiting headers GET", shape: get, server: pnHang, call: cancelledOnArrival, wantMatch: "the cause"},
		{name: "cause awaiting headers POST", shape: post, server: pnHang, call: cancelledOnArrival, wantMatch: "the cause"},
		{name: "cause awaiting headers POST streamed", shape: streamed, server: pnHang, call: cancelledOnArrival, wantMatch: "the cause"},
		{name: "deadline awaiting headers GET", shape: get, server: pnHang, call: shortDeadline, wantMatch: "context.DeadlineExceeded"},
		{name: "deadline awaiting headers POST", shape: post, server: pnHang, call: shortDeadline, wantMatch: "context.DeadlineExceeded"},
		{name: "deadline with a cause passed before the call GET", shape: get, call: passedDeadlineCause, wantMatch: "the cause"},
		{name: "deadline with a cause passed before the call POST streamed", shape: streamed, call: passedDeadlineCause, wantMatch: "the cause"},
		{name: "deadline with a cause awaiting headers GET", shape: get, server: pnHang, call: shortDeadlineCause, wantMatch: "the cause"},
		{name: "deadline with a cause awaiting headers POST", shape: post, server: pnHang, call: shortDeadlineCause, wantMatch: "the cause"},
		{name: "ResponseHeaderTimeout POST", shape: post, server: pnHang,
			tune: func(tr *http.Transport) { tr.ResponseHeaderTimeout = 50 * time.Millisecond }, wantMatch: "Timeout"},
		{name: "body read fails GET", shape: get, call: failingBody, wantMatch: "the body's error"},
		{name: "body read fails POST", shape: post, call: failingBody, wantMatch: "the body's error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tune []func(*http.Transport)
			if tc.tune != nil {
				tune = append(tune, tc.tune)
			}
			bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) []string {
				arrived := make(chan struct{})
				var once sync.Once
				srv := hangingServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
					once.Do(func() { close(arrived) })
					if tc.server == nil {
						io.Copy(io.Discard, r.Body)
						return
					}
					tc.server(w, r, release)
				})
				ctx, cancel := context.WithCancelCause(pnCtx(t))
				defer cancel(nil)
				u := srv.URL
				switch tc.call {
				case cancelledBefore:
					cancel(errPNCause)
				case cancelledOnArrival:
					go func() {
						select {
						case <-arrived:
							cancel(errPNCause)
						case <-ctx.Done():
						}
					}()
				case shortDeadline:
					var stop context.CancelFunc
					ctx, stop = context.WithTimeout(ctx, 100*time.Millisecond)
					defer stop()
				case passedDeadlineCause, shortDeadlineCause:
					d := 100 * time.Millisecond
					if tc.call == passedDeadlineCause {
						d = -time.Second
					}
					var stop context.CancelFunc
					ctx, stop = context.WithTimeoutCause(ctx, d, errPNCause)
					defer stop()
				case refusedDial:
					u = refused.URL
				}
				req := pnRequest(t, ctx, tc.shape, u)
				if tc.call == failingBody {
					req.Body, req.GetBody, req.ContentLength = newPNBody(errPNBody, new(atomic.Int32)), nil, 0
				}
				resp, err := c.Do(req)
				if tc.readBody {
					require.NoError(t, err)
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				} else if err == nil {
					resp.Body.Close()
				}
				return pnErrObs(err)
			}, tune...)
			assert.Contains(t, bare, tc.wantMatch)
			assert.Subset(t, wrapped, bare, "every test that holds on the bare side holds wrapped")
			// A caller that gave up with a cause gets, besides it, its
			// context's own error (Error.Reason); nothing else is added.
			extra := []string{}
			switch tc.call {
			case cancelledBefore, cancelledOnArrival:
				extra = append(extra, "context.Canceled")
			case passedDeadlineCause, shortDeadlineCause:
				// Error.Reason is context.DeadlineExceeded, and *Error
				// answers Timeout as a deadline's error does.
				extra = append(extra, "context.DeadlineExceeded", "Timeout", "os.IsTimeout", "net.Error.Timeout")
			}
			assert.Subset(t, append(bare, extra...), wrapped, "nothing but the context's own error is added")
		})
	}
}

// A 101 Switching Protocols answer's body is the connection, readable and
// writable, on every shape (a websocket client writes to resp.Body); a
// CONNECT's answer is a tunnel read to its end.
func TestPairedUpgradeAndConnect(t *testing.T) {
	for _, s := range pnShapes {
		t.Run("101/"+s.name, func(t *testing.T) {
			bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) string {
				srv := compatServer(t, pnEchoUpgrade)
				req := pnRequest(t, pnCtx(t), s, srv.URL)
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "echo")
				resp, err := c.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				rwc, ok := resp.Body.(io.ReadWriteCloser)
				if !ok {
					return fmt.Sprintf("%d body %T is not writable", resp.StatusCode, resp.Body)
				}
				_, err = io.WriteString(rwc, "ping\n")
				require.NoError(t, err)
				line, err := bufio.NewReader(rwc).ReadString('\n')
				return fmt.Sprintf("%d %q %v", resp.StatusCode, line, err)
			})
			assert.Equal(t, `101 "echo ping\n" <nil>`, bare)
			assert.Equal(t, bare, wrapped)
		})
	}
	t.Run("CONNECT", func(t *testing.T) {
		bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) string {
			srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodConnect {
					http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
					return
				}
				conn, brw, err := http.NewResponseController(w).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				brw.WriteString("HTTP/1.1 200 Connection established\r\n\r\ntunnel to " + r.RequestURI)
				brw.Flush()
			})
			u, err := url.Parse(srv.URL)
			require.NoError(t, err)
			req, err := http.NewRequestWithContext(pnCtx(t), http.MethodConnect, "", nil)
			require.NoError(t, err)
			req.URL = &url.URL{Scheme: "http", Host: u.Host}
			req.Host = "origin.test:443"
			resp, err := c.Do(req)
			require.NoError(t, err)
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			return fmt.Sprintf("%d %q %v", resp.StatusCode, b, err)
		})
		assert.Equal(t, `200 "tunnel to origin.test:443" <nil>`, bare)
		assert.Equal(t, bare, wrapped)
	})
}

// pnEchoUpgrade switches to an echo protocol and echoes lines.
func pnEchoUpgrade(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	if r.Header.Get("Upgrade") != "echo" {
		http.Error(w, "upgrade required", http.StatusUpgradeRequired)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
	brw.Flush()
	line, err := brw.ReadString('\n')
	if err != nil {
		return
	}
	brw.WriteString("echo " + line)
	brw.Flush()
}

// resp.Request is the request sent, with the caller's URL, method and
// context values. On a bare client it is the caller's own request (the
// http.Transport sets what it was given). Wrapped, it is the caller's own
// for a request sent as is (a GET); a request the SDK adds its key to is
// sent as a copy, and resp.Request is that copy, as docs/faq.md says:
// http.Client's next redirect hop finds the key it was sent with there.
func TestPairedResponseRequest(t *testing.T) {
	type ctxKey struct{}
	for _, s := range pnShapes {
		t.Run(s.name, func(t *testing.T) {
			var same [2]bool
			bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) string {
				var seenKey atomic.Value
				srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
					seenKey.Store(r.Header.Get("Idempotency-Key"))
					io.Copy(io.Discard, r.Body)
				})
				req := pnRequest(t, context.WithValue(pnCtx(t), ctxKey{}, "v"), s, srv.URL+"/p?q=1")
				resp, err := c.Do(req)
				require.NoError(t, err)
				resp.Body.Close()
				rr := resp.Request
				if strings.HasSuffix(t.Name(), "/wrapped") {
					same[1] = rr == req
				} else {
					same[0] = rr == req
				}
				assert.Equal(t, seenKey.Load(), sentKey(rr.Header), "resp.Request holds the key the server got")
				return pnServerless(fmt.Sprintf("%s %s value=%v host=%q", rr.Method, rr.URL, rr.Context().Value(ctxKey{}), rr.Host), srv)
			})
			assert.Equal(t, bare, wrapped)
			assert.True(t, same[0], "bare: the caller's request")
			assert.Equal(t, s.method == http.MethodGet, same[1], "wrapped: the caller's request when sent as is")
		})
	}
}

// sentKey is the key header in h under any spelling, "" if none.
func sentKey(h http.Header) string {
	for k, v := range h {
		if strings.EqualFold(k, "Idempotency-Key") && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// A keep-alive connection is reused as a bare client reuses it: three
// calls read to the end share one connection; a body closed unread
// costs its connection on both sides.
func TestPairedConnectionReuse(t *testing.T) {
	for _, s := range pnShapes {
		for _, readAll := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/read=%v", s.name, readAll), func(t *testing.T) {
				bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) int32 {
					var conns atomic.Int32
					srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						io.Copy(io.Discard, r.Body)
						w.Write(make([]byte, 256<<10)) // past what Close drains
					}))
					srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
						if st == http.StateNew {
							conns.Add(1)
						}
					}
					srv.Start()
					t.Cleanup(srv.Close)
					for range 3 {
						resp, err := c.Do(pnRequest(t, pnCtx(t), s, srv.URL))
						require.NoError(t, err)
						if readAll {
							io.Copy(io.Discard, resp.Body)
						}
						resp.Body.Close()
					}
					return conns.Load()
				})
				if readAll {
					assert.EqualValues(t, 1, bare)
				}
				assert.Equal(t, bare, wrapped)
			})
		}
	}
}

// pnZeros is a body of n zero bytes that holds none of them: reading it
// allocates nothing.
type pnZeros struct{ n int64 }

func (z *pnZeros) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), z.n)]
	clear(p)
	z.n -= int64(len(p))
	return len(p), nil
}

// Very large bodies go through without being held in memory: a 48 MiB
// upload on every shape (streamed, rewindable, under the application's key)
// and a 48 MiB answer. What the wrapped side allocates beyond the bare
// side's is bounded by what a retry needs (the 1 MiB it may keep of a
// streamed body), far below the body. TotalAlloc counts every allocation
// of the process during the call, servers included: an invariant, not a
// rate.
func TestPairedLargeBodiesAreNotBuffered(t *testing.T) {
	const size = 48 << 20
	shapes := []pnShape{
		{"POST streamed", http.MethodPost, func() io.Reader { return &pnZeros{size} }, false},
		{"PUT streamed own key", http.MethodPut, func() io.Reader { return &pnZeros{size} }, true},
		{"GET answer", http.MethodGet, nil, false},
		{"POST answer", http.MethodPost, func() io.Reader { return strings.NewReader("{}") }, false},
	}
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			var allocs [2]uint64
			bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) string {
				var got atomic.Int64
				srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
					n, _ := io.Copy(io.Discard, r.Body)
					got.Store(n)
					if r.Header.Get("X-Large") != "" {
						io.Copy(w, &pnZeros{size})
					}
				})
				req := pnRequest(t, pnCtx(t), s, srv.URL)
				if strings.HasSuffix(s.name, " answer") {
					req.Header.Set("X-Large", "1")
				}
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				resp, err := c.Do(req)
				require.NoError(t, err)
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				runtime.ReadMemStats(&after)
				side := 0
				if strings.HasSuffix(t.Name(), "/wrapped") {
					side = 1
				}
				allocs[side] = after.TotalAlloc - before.TotalAlloc
				return fmt.Sprintf("%d sent=%d answer=%d %v", resp.StatusCode, got.Load(), n, err)
			})
			assert.Equal(t, bare, wrapped)
			t.Logf("allocated: bare %d KiB, wrapped %d KiB", allocs[0]>>10, allocs[1]>>10)
			assert.Less(t, allocs[1], allocs[0]+16<<20, "the wrapped side holds no more than a retry needs")
		})
	}
}

// Redirects followed by http.Client, on every shape: a 302 turns the
// request into a GET without body; a 307 re-sends it with its body when it
// can be rewound (GetBody), and is returned as is when it cannot (the
// streamed shape), as a bare client does.
func TestPairedRedirectsOnEveryShape(t *testing.T) {
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		for _, s := range pnShapes {
			t.Run(fmt.Sprintf("%d/%s", code, s.name), func(t *testing.T) {
				bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) string {
					var hops atomic.Int32
					srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
						b, _ := io.ReadAll(r.Body)
						if r.URL.Path == "/start" {
							http.Redirect(w, r, "/end", code)
							return
						}
						hops.Add(1)
						fmt.Fprintf(w, "%s %q", r.Method, b)
					})
					resp, err := c.Do(pnRequest(t, pnCtx(t), s, srv.URL+"/start"))
					require.NoError(t, err)
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					return fmt.Sprintf("%d %q %v followed=%d", resp.StatusCode, b, err, hops.Load())
				})
				assert.Equal(t, bare, wrapped)
			})
		}
	}
}

// Expect: 100-continue on every shape with a body: the body follows the
// server's 100 Continue; a server that refuses without reading gets one
// request, and the caller its refusal.
func TestPairedExpectContinueOnEveryShape(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		for _, s := range pnShapes[1:] {
			t.Run(fmt.Sprintf("refuse=%v/%s", refuse, s.name), func(t *testing.T) {
				bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) string {
					var n atomic.Int32
					srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
						n.Add(1)
						if refuse {
							w.WriteHeader(http.StatusForbidden)
							return
						}
						b, _ := io.ReadAll(r.Body)
						w.Write(b)
					})
					var got100 atomic.Bool
					trace := &httptrace.ClientTrace{Got100Continue: func() { got100.Store(true) }}
					req := pnRequest(t, httptrace.WithClientTrace(pnCtx(t), trace), s, srv.URL)
					req.Header.Set("Expect", "100-continue")
					resp, err := c.Do(req)
					require.NoError(t, err)
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					return fmt.Sprintf("%d %q 100=%v requests=%d", resp.StatusCode, b, got100.Load(), n.Load())
				}, func(tr *http.Transport) { tr.ExpectContinueTimeout = 5 * time.Second })
				assert.Contains(t, bare, "requests=1")
				assert.Equal(t, bare, wrapped)
			})
		}
	}
}

// A body that is an *os.File (net/http may send it with sendfile), with its
// length given and without: the same bytes and framing reach the server,
// and the file is closed once.
func TestPairedFileBody(t *testing.T) {
	content := bytes.Repeat([]byte("0123456789abcdef"), (1<<20)/16+1) // past the 1 MiB kept for a retry
	path := filepath.Join(t.TempDir(), "upload")
	require.NoError(t, os.WriteFile(path, content, 0o600))
	for _, method := range []string{http.MethodPost, http.MethodPut} {
		for _, length := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/length=%v", method, length), func(t *testing.T) {
				bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) string {
					srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
						b, err := io.ReadAll(r.Body)
						fmt.Fprintf(w, "cl=%d te=%q same=%v %v", r.ContentLength, r.TransferEncoding, bytes.Equal(b, content), err)
					})
					f, err := os.Open(path)
					require.NoError(t, err)
					defer f.Close()
					req, err := http.NewRequestWithContext(pnCtx(t), method, srv.URL, f)
					require.NoError(t, err)
					if length {
						req.ContentLength = int64(len(content))
					}
					resp, err := c.Do(req)
					require.NoError(t, err)
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					_, rerr := f.Read(make([]byte, 1))
					return fmt.Sprintf("%d %s closed=%v", resp.StatusCode, b, errors.Is(rerr, os.ErrClosed))
				})
				assert.Contains(t, bare, "same=true")
				assert.Equal(t, bare, wrapped)
			})
		}
	}
}

// An unkeyed request of a method that is not idempotent (a custom or
// WebDAV method, a lowercase "post") answered 503, 408 or 425 reaches the
// server once, as from a bare client: nothing can dedupe it, and none of
// these answers proves it was not applied.
func TestPairedUnkeyedUnsafeMethodSentOnce(t *testing.T) {
	for _, method := range []string{"PURGE", "post", "LOCK"} {
		for _, code := range []int{503, 408, 425} {
			t.Run(fmt.Sprint(method, code), func(t *testing.T) {
				bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) int32 {
					var n atomic.Int32
					srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
						n.Add(1)
						io.Copy(io.Discard, r.Body)
						w.WriteHeader(code)
					})
					req, _ := http.NewRequestWithContext(pnCtx(t), method, srv.URL, strings.NewReader("x"))
					if resp, err := c.Do(req); err == nil {
						resp.Body.Close()
					}
					return n.Load()
				})
				assert.Equal(t, bare, wrapped, "requests the server got")
			})
		}
	}
}
