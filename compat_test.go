package resilient_test

// Paired compatibility tests: each scenario runs once through a bare
// *http.Client and once through the same client wrapped (resilient.Wrap),
// each side against its own loopback server, and asserts the same
// expectations on both: the bare side's assertions keep a broken scenario
// from passing vacuously, the wrapped side's say it is never worse. The
// numbered cases of issue 23 are marked "(#23.N)" with the numbers.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// compatSides are the two sides of a paired test.
var compatSides = []struct {
	name string
	wrap bool
}{{"bare", false}, {"wrapped", true}}

// bothSides runs f once per side, as subtests.
func bothSides(t *testing.T, f func(t *testing.T, wrap bool)) {
	for _, s := range compatSides {
		t.Run(s.name, func(t *testing.T) { f(t, s.wrap) })
	}
}

// sideClient returns base as is for the bare side and wrapped (with fast
// retries and opts) for the other.
func sideClient(base *http.Client, wrap bool, opts ...resilient.Option) *http.Client {
	if !wrap {
		return base
	}
	return resilient.Wrap(base, fast(opts...)...)
}

// newBase returns a client over a new http.Transport (no proxy from the
// environment) whose idle connections are closed when the test ends.
func newBase(t *testing.T, tune ...func(*http.Transport)) *http.Client {
	tr := &http.Transport{}
	for _, f := range tune {
		f(tr)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// compatServer starts a loopback server with h, closed when the test ends.
func compatServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// hangingServer is compatServer for a handler that may hang (see hang):
// release is closed when the test ends, before the server is.
func hangingServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request, release <-chan struct{})) *httptest.Server {
	release := make(chan struct{})
	srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) { h(w, r, release) })
	t.Cleanup(func() { close(release) })
	return srv
}

// hang blocks a handler until the client goes away or the test ends.
func hang(r *http.Request, release <-chan struct{}) {
	select {
	case <-r.Context().Done():
	case <-release:
	}
}

// within runs f and waits at most d for it; on timeout it calls unblock (which
// must make f return) and fails the test. It never leaves f running.
func within(t *testing.T, d time.Duration, unblock func(), f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		unblock()
		<-done
		t.Errorf("no return within %v", d)
	}
}

// onlyReader hides its reader's type, so that http.NewRequest sets no
// GetBody and no ContentLength: a body net/http cannot rewind.
type onlyReader struct{ io.Reader }

// protocolFunc is a RoundTripper for a registered scheme.
type protocolFunc func(*http.Request) (*http.Response, error)

func (f protocolFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// ---- #23.1, #23.2: streamed request bodies ----

// (#23.1) A body without GetBody, fed slowly, is streamed on the first
// attempt, so the call returns by its deadline as the bare one does.
func TestCompatSlowStreamedBodyReturnsByTheDeadline(t *testing.T) {
	const deadline = 600 * time.Millisecond
	bothSides(t, func(t *testing.T, wrap bool) {
		srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusNoContent)
		})
		c := sideClient(newBase(t), wrap)
		pr, pw := io.Pipe()
		stop, fed := make(chan struct{}), make(chan struct{})
		var chunks atomic.Int32
		go func() { // 3 s worth of chunks, until stopped
			defer close(fed)
			defer pw.Close()
			for range 30 {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := pw.Write([]byte("chunk\n")); err != nil {
					return
				}
				chunks.Add(1)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, pr)
		require.NoError(t, err)
		resp, err := c.Do(req)
		written := chunks.Load()
		close(stop)
		<-fed
		if resp != nil {
			resp.Body.Close()
		}
		require.Error(t, err, "the body takes 3 s to feed: no answer by the 600 ms deadline")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		// Not a timing: the call ended while the body was still being fed
		// (30 chunks take 3 s; the deadline is 600 ms). A call that read
		// the body before sending ended after the last chunk.
		assert.Less(t, written, int32(30), "returned before the body was fed: by its deadline")
	})
}

// (#23.2) Full duplex, over HTTP/1.1 and HTTP/2: the server answers before
// reading the whole body and the client writes the rest only after reading
// that answer.
func TestCompatFullDuplex(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("HTTP/%d", map[bool]int{false: 1, true: 2}[h2]), func(t *testing.T) {
			bothSides(t, func(t *testing.T, wrap bool) {
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					rc := http.NewResponseController(w)
					if err := rc.EnableFullDuplex(); err != nil {
						http.Error(w, err.Error(), http.StatusInternalServerError)
						return
					}
					w.WriteHeader(http.StatusOK)
					io.WriteString(w, "ready\n")
					rc.Flush()
					line, _ := bufio.NewReader(r.Body).ReadString('\n')
					fmt.Fprintf(w, "echo %d %s", r.ProtoMajor, line)
				}))
				base := newBase(t)
				if h2 {
					srv.EnableHTTP2 = true
					srv.StartTLS()
					base = srv.Client()
				} else {
					srv.Start()
				}
				t.Cleanup(srv.Close)
				c := sideClient(base, wrap)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				pr, pw := io.Pipe()
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, pr)
				require.NoError(t, err)
				var resp *http.Response
				within(t, 2*time.Second, func() { pw.CloseWithError(errors.New("test: no answer before the body ended")) }, func() {
					resp, err = c.Do(req)
				})
				require.NoError(t, err, "the answer comes before the body ends")
				defer resp.Body.Close()
				br := bufio.NewReader(resp.Body)
				first, err := br.ReadString('\n')
				require.NoError(t, err)
				assert.Equal(t, "ready\n", first)
				_, err = io.WriteString(pw, "ping\n")
				require.NoError(t, err)
				pw.Close()
				rest, err := io.ReadAll(br)
				require.NoError(t, err)
				want := "echo 1 ping\n"
				if h2 {
					want = "echo 2 ping\n"
				}
				assert.Equal(t, want, string(rest))
			})
		})
	}
}

// (#23.1) A body without GetBody that a failed first attempt read to the end
// can still be retried: bare returns the 503, wrapped the retry's 200, and
// the server got the whole body both times.
func TestCompatUnrewindableBodyRetriedAfterA503(t *testing.T) {
	const payload = `{"name":"x"}`
	bothSides(t, func(t *testing.T, wrap bool) {
		var mu sync.Mutex
		var bodies []string
		srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, string(b))
			n := len(bodies)
			mu.Unlock()
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		c := sideClient(newBase(t), wrap)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL, onlyReader{strings.NewReader(payload)})
		require.NoError(t, err)
		require.Nil(t, req.GetBody)
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		if !wrap {
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			assert.Equal(t, []string{payload}, bodies)
			return
		}
		assert.Equal(t, http.StatusOK, resp.StatusCode, "a PUT is retried")
		assert.Equal(t, []string{payload, payload}, bodies, "the retry carries the whole body")
	})
}

// A streamed upload without a deadline arrives whole.
func TestCompatStreamedUpload(t *testing.T) {
	bothSides(t, func(t *testing.T, wrap bool) {
		srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%d %v", len(b), r.TransferEncoding)
		})
		c := sideClient(newBase(t), wrap)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		pr, pw := io.Pipe()
		go func() {
			for range 3 {
				pw.Write(bytes.Repeat([]byte("x"), 1000))
			}
			pw.Close()
		}()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, pr)
		require.NoError(t, err)
		resp, err := c.Do(req)
		if err != nil {
			pr.CloseWithError(err)
		}
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, "3000 [chunked]", string(b))
	})
}

// ---- #23.4: a keep-alive connection that dies after the server applied ----

// rawListener records the bytes each accepted connection read.
type rawListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*bytes.Buffer
}

func (l *rawListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	b := new(bytes.Buffer)
	l.mu.Lock()
	l.conns = append(l.conns, b)
	l.mu.Unlock()
	return &rawConn{Conn: c, l: l, buf: b}, nil
}

// heads returns the header blocks of the requests read whose request line
// starts with prefix, in the order of the connections.
func (l *rawListener) heads(prefix string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, b := range l.conns {
		s := b.String()
		for {
			i := strings.Index(s, prefix)
			if i < 0 {
				break
			}
			s = s[i:]
			head, rest, _ := strings.Cut(s, "\r\n\r\n")
			out = append(out, head)
			s = rest
		}
	}
	return out
}

// conn returns what connection i read.
func (l *rawListener) conn(i int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i >= len(l.conns) {
		return ""
	}
	return l.conns[i].String()
}

type rawConn struct {
	net.Conn
	l   *rawListener
	buf *bytes.Buffer
}

func (c *rawConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.mu.Lock()
	c.buf.Write(p[:n])
	c.l.mu.Unlock()
	return n, err
}

// framing returns a request head's fields as "name: value" lines with the
// names in lower case, sorted, without the key and attempt headers (and
// the host, whose port differs between the two sides).
func framing(head string) []string {
	lines := strings.Split(head, "\r\n")
	var out []string
	for _, l := range lines[1:] {
		name, value, _ := strings.Cut(l, ":")
		name = strings.ToLower(name)
		if name == "idempotency-key" || name == "retry-attempt" || name == "host" {
			continue
		}
		out = append(out, name+":"+strings.TrimSpace(value))
	}
	slices.Sort(out)
	return append([]string{lines[0]}, out...)
}

// (#23.4) A keyed POST on a reused connection that the server closes after
// applying it, without answering: the bare client makes one effect and
// returns an error; the wrapped one makes no more, and puts the same
// framing on the wire (Content-Length: 0 for an empty POST, no chunking).
func TestCompatConnectionDiesAfterApply(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   func() io.Reader
		length string
	}{
		{"no body", func() io.Reader { return nil }, "content-length:0"},
		{"http.NoBody", func() io.Reader { return http.NoBody }, "content-length:0"},
		{"body", func() io.Reader { return strings.NewReader(`{"a":1}`) }, "content-length:7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			heads := map[bool][]string{}
			bothSides(t, func(t *testing.T, wrap bool) {
				var effects atomic.Int32
				var key atomic.Value
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/warm" {
						w.WriteHeader(http.StatusNoContent)
						return
					}
					key.Store(r.Header.Get("Idempotency-Key"))
					io.Copy(io.Discard, r.Body)
					effects.Add(1) // applied; the answer is lost
					conn, _, err := http.NewResponseController(w).Hijack()
					if err == nil {
						conn.Close()
					}
				}))
				raw := &rawListener{Listener: srv.Listener}
				srv.Listener = raw
				srv.Start()
				t.Cleanup(srv.Close)
				c := sideClient(newBase(t), wrap)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				warm, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/warm", nil)
				require.NoError(t, err)
				resp, err := c.Do(warm)
				require.NoError(t, err)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()

				req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/apply", tc.body())
				require.NoError(t, err)
				resp, err = c.Do(req)
				if resp != nil {
					resp.Body.Close()
				}
				require.Error(t, err, "the answer was lost")
				if !wrap {
					assert.EqualValues(t, 1, effects.Load(), "bare: applied once")
				} else {
					assert.LessOrEqual(t, effects.Load(), int32(1), "wrapped: never more effects than bare")
					assert.EqualValues(t, 1, effects.Load(), "wrapped: sent")
					assert.NotEmpty(t, key.Load(), "wrapped: the POST carries its key")
				}
				first := raw.conn(0)
				assert.True(t, strings.Contains(first, "GET /warm ") && strings.Contains(first, "POST /apply "),
					"the POST went on the reused connection")
				h := raw.heads("POST /apply ")
				require.NotEmpty(t, h)
				f := framing(h[0])
				assert.Contains(t, f, tc.length)
				assert.NotContains(t, strings.ToLower(h[0]), "transfer-encoding")
				heads[wrap] = f
			})
			assert.Equal(t, heads[false], heads[true], "the same request on the wire but for the key")
		})
	}
}

// ---- #23.5: a retryable answer whose retry is not sent ----

// (#23.5) A 503 (or a GET's 500) whose body is over 64 KiB or slow, then a
// retry that cannot be sent (its GetBody fails): the caller gets the
// answer with its whole body, as bare does, not an *Error.
func TestCompatRetryableAnswerKeptWhenTheRetryIsNotSent(t *testing.T) {
	big := strings.Repeat("e", 100<<10)
	for _, tc := range []struct {
		name   string
		method string
		code   int
		slow   bool
	}{
		{"PUT 503 over 64 KiB", http.MethodPut, http.StatusServiceUnavailable, false},
		{"GET 500 over 64 KiB", http.MethodGet, http.StatusInternalServerError, false},
		{"PUT 503 slow body", http.MethodPut, http.StatusServiceUnavailable, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bothSides(t, func(t *testing.T, wrap bool) {
				var n atomic.Int32
				srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
					n.Add(1)
					io.Copy(io.Discard, r.Body)
					w.WriteHeader(tc.code)
					if !tc.slow {
						io.WriteString(w, big)
						return
					}
					io.WriteString(w, big[:1000])
					http.NewResponseController(w).Flush()
					time.Sleep(300 * time.Millisecond) // slower than anything drains
					io.WriteString(w, big[1000:2000])
				})
				c := sideClient(newBase(t), wrap, resilient.WithMaxAttempts(2))
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, tc.method, srv.URL, strings.NewReader("payload"))
				require.NoError(t, err)
				req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("test: body gone") }
				resp, err := c.Do(req)
				require.NoError(t, err, "the answer, not an error")
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.NoError(t, err)
				assert.Equal(t, tc.code, resp.StatusCode)
				want := len(big)
				if tc.slow {
					want = 2000
				}
				assert.Len(t, b, want, "the whole body")
				assert.EqualValues(t, 1, n.Load(), "the retry could not be sent")
			})
		})
	}
}

// ---- #23.6: deadline errors are timeouts ----

// (#23.6) Errors on a deadline (a context's, http.Client.Timeout) satisfy
// os.IsTimeout and url.Error.Timeout on both sides, every time.
func TestCompatDeadlineErrorsAreTimeouts(t *testing.T) {
	const calls = 6
	for _, tc := range []struct {
		name          string
		method        string
		clientTimeout bool
	}{
		{"context GET", http.MethodGet, false},
		{"context POST", http.MethodPost, false},
		{"Client.Timeout GET", http.MethodGet, true},
		{"Client.Timeout POST", http.MethodPost, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bothSides(t, func(t *testing.T, wrap bool) {
				srv := hangingServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) { hang(r, release) })
				base := newBase(t)
				if tc.clientTimeout {
					base.Timeout = 80 * time.Millisecond
				}
				c := sideClient(base, wrap)
				errs := make([]error, calls)
				var wg sync.WaitGroup
				for i := range calls {
					wg.Go(func() {
						d := 80 * time.Millisecond
						if tc.clientTimeout {
							d = 5 * time.Second // the client's Timeout fires first
						}
						ctx, cancel := context.WithTimeout(context.Background(), d)
						defer cancel()
						req, _ := http.NewRequestWithContext(ctx, tc.method, srv.URL, strings.NewReader("{}"))
						resp, err := c.Do(req)
						if resp != nil {
							resp.Body.Close()
						}
						errs[i] = err
					})
				}
				wg.Wait()
				var notTimeout []string
				for i, err := range errs {
					require.Error(t, err, "call %d", i)
					var ue *url.Error
					var ne net.Error
					if !os.IsTimeout(err) || !errors.As(err, &ue) || !ue.Timeout() || !errors.As(err, &ne) || !ne.Timeout() {
						notTimeout = append(notTimeout, err.Error())
					}
					if !tc.clientTimeout {
						assert.ErrorIs(t, err, context.DeadlineExceeded, "call %d", i)
					}
				}
				assert.Empty(t, notTimeout, "errors that are not timeouts (os.IsTimeout, url.Error.Timeout)")
			})
		})
	}
}

// ---- #23.7: the client's own limits and configuration are terminal ----

// (#23.7) Errors raised by the client's own limits and configuration fail
// the same way every time: the wrapped client sends no more than bare.
func TestCompatClientSideErrorsAreTerminal(t *testing.T) {
	quiet := log.New(io.Discard, "", 0)
	for _, tc := range []struct {
		name string
		// start starts a server and returns it, the URL to ask and the
		// client's base.
		start func(t *testing.T) (*httptest.Server, string, *http.Client)
		check func(t *testing.T, err error)
	}{
		{"MaxResponseHeaderBytes", func(t *testing.T) (*httptest.Server, string, *http.Client) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Big", strings.Repeat("h", 8<<10))
				w.WriteHeader(http.StatusOK)
			}))
			srv.Start()
			return srv, srv.URL, newBase(t, func(tr *http.Transport) { tr.MaxResponseHeaderBytes = 1 << 10 })
		}, func(t *testing.T, err error) { assert.ErrorContains(t, err, "header") }},
		{"http.ErrSchemeMismatch", func(t *testing.T) (*httptest.Server, string, *http.Client) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			srv.Config.ErrorLog = quiet
			srv.Start()
			return srv, "https://" + srv.Listener.Addr().String(), newBase(t)
		}, func(t *testing.T, err error) { assert.ErrorIs(t, err, http.ErrSchemeMismatch) }},
		{"TLS verification", func(t *testing.T) (*httptest.Server, string, *http.Client) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			srv.Config.ErrorLog = quiet
			srv.StartTLS()
			return srv, srv.URL, newBase(t) // no root for the test certificate
		}, func(t *testing.T, err error) {
			var ve *tls.CertificateVerificationError
			assert.ErrorAs(t, err, &ve)
		}},
		{"body shorter than ContentLength", func(t *testing.T) (*httptest.Server, string, *http.Client) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
			}))
			srv.Config.ErrorLog = quiet
			srv.Start()
			return srv, srv.URL, newBase(t)
		}, func(t *testing.T, err error) {
			// net/http returns the write's error ("http: ContentLength=10
			// with Body length 3") or, when its read loop sees the closed
			// connection first, a read error: the request's writer still
			// knows (httptrace's WroteRequestInfo.Err).
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conns := map[bool]int32{}
			bothSides(t, func(t *testing.T, wrap bool) {
				srv, u, base := tc.start(t)
				// Connections are counted where they are dialled: every one is
				// dialled before Do returns (the server may not have
				// accepted it yet), and each attempt that fails so closes its own.
				var n atomic.Int32
				var d net.Dialer
				base.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
					n.Add(1)
					return d.DialContext(ctx, network, addr)
				}
				t.Cleanup(srv.Close)
				c := sideClient(base, wrap)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, strings.NewReader("abc"))
				require.NoError(t, err)
				if tc.name == "body shorter than ContentLength" {
					req.ContentLength = 10
				}
				resp, err := c.Do(req)
				if resp != nil {
					resp.Body.Close()
				}
				require.Error(t, err)
				tc.check(t, err)
				conns[wrap] = n.Load()
				assert.NotZero(t, conns[wrap], "a connection was made")
			})
			assert.Equal(t, conns[false], conns[true], "connections: wrapped tried as often as bare")
		})
	}
}

// ---- #23.8: schemes registered with RegisterProtocol ----

// (#23.8) A scheme registered with http.Transport.RegisterProtocol works
// wrapped as bare.
func TestCompatRegisteredProtocol(t *testing.T) {
	bothSides(t, func(t *testing.T, wrap bool) {
		base := newBase(t)
		base.Transport.(*http.Transport).RegisterProtocol("test", protocolFunc(func(r *http.Request) (*http.Response, error) {
			if r.Body != nil {
				r.Body.Close()
			}
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: r,
				Body: io.NopCloser(strings.NewReader("test:" + r.URL.Path))}, nil
		}))
		c := sideClient(base, wrap)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "test://host/thing", nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "test:/thing", string(b))
	})
}

// ---- #23.9: 101 Switching Protocols ----

// (#23.9) A 101's body is an io.ReadWriteCloser, also under an attempt
// timeout and hedging, and the upgraded connection outlives the attempt
// timeout.
func TestCompatUpgrade(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []resilient.Option
	}{
		{"defaults", nil},
		{"WithAttemptTimeout", []resilient.Option{resilient.WithAttemptTimeout(50 * time.Millisecond)}},
		{"WithHedging", []resilient.Option{resilient.WithHedging(resilient.HedgingConfig{Delay: 2 * time.Second})}},
		{"both", []resilient.Option{resilient.WithAttemptTimeout(50 * time.Millisecond),
			resilient.WithHedging(resilient.HedgingConfig{Delay: 50 * time.Millisecond})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bothSides(t, func(t *testing.T, wrap bool) {
				srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
					if r.Header.Get("Upgrade") != "echo" {
						http.Error(w, "upgrade required", http.StatusUpgradeRequired)
						return
					}
					conn, brw, err := http.NewResponseController(w).Hijack()
					if err != nil {
						return
					}
					defer conn.Close()
					conn.SetDeadline(time.Now().Add(5 * time.Second))
					brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
					brw.Flush()
					for {
						line, err := brw.ReadString('\n')
						if err != nil {
							return
						}
						brw.WriteString("echo " + line)
						brw.Flush()
					}
				})
				c := sideClient(newBase(t), wrap, tc.opts...)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				require.NoError(t, err)
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "echo")
				resp, err := c.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
				rwc, ok := resp.Body.(io.ReadWriteCloser)
				require.True(t, ok, "the body of a 101 is an io.ReadWriteCloser, got %T", resp.Body)
				br := bufio.NewReader(rwc)
				for i, msg := range []string{"one", "two"} {
					if i > 0 {
						time.Sleep(150 * time.Millisecond) // past the attempt timeout
					}
					_, err = io.WriteString(rwc, msg+"\n")
					require.NoError(t, err)
					line, err := br.ReadString('\n')
					require.NoError(t, err)
					assert.Equal(t, "echo "+msg+"\n", line)
				}
			})
		})
	}
}

// ---- #23.10: the Error's text and key ----

// (#23.10) On a cancelled or timed-out call the error is one line and says
// "context deadline exceeded" at most once, on both sides.
func TestCompatCancelledErrorIsOneLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		cancel bool
	}{
		{"GET deadline", http.MethodGet, false},
		{"POST deadline", http.MethodPost, false},
		{"GET cancel", http.MethodGet, true},
		{"POST cancel", http.MethodPost, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bothSides(t, func(t *testing.T, wrap bool) {
				srv := hangingServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) { hang(r, release) })
				c := sideClient(newBase(t), wrap)
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				if tc.cancel {
					ctx, cancel = context.WithCancel(context.Background())
					time.AfterFunc(100*time.Millisecond, cancel)
				}
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, tc.method, srv.URL, strings.NewReader("{}"))
				require.NoError(t, err)
				resp, err := c.Do(req)
				if resp != nil {
					resp.Body.Close()
				}
				require.Error(t, err)
				msgs := []string{err.Error()}
				if wrap {
					var re *resilient.Error
					require.ErrorAs(t, err, &re)
					msgs = append(msgs, re.Error())
				}
				for _, m := range msgs {
					assert.NotContains(t, m, "\n", "one line: %q", m)
					assert.LessOrEqual(t, strings.Count(m, "context deadline exceeded"), 1, "%q", m)
					assert.LessOrEqual(t, strings.Count(m, "context canceled"), 1, "%q", m)
				}
				if tc.cancel {
					assert.ErrorIs(t, err, context.Canceled)
				} else {
					assert.ErrorIs(t, err, context.DeadlineExceeded)
				}
			})
		})
	}
}

// (#23.10) Error.Key is empty when the key was never sent: the Store failed
// (ErrStore), or the operation was claimed with another request
// (ErrOperationMismatch). Error() is one line there too.
func TestCompatErrorKeyEmptyWhenNothingWasSent(t *testing.T) {
	var n atomic.Int32
	srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusCreated)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	postOp := func(c *http.Client, op, body string) error {
		req, err := http.NewRequestWithContext(resilient.ContextWithOperation(ctx, op), http.MethodPost, srv.URL, strings.NewReader(body))
		require.NoError(t, err)
		resp, err := c.Do(req)
		if resp != nil {
			resp.Body.Close()
		}
		return err
	}

	down := sideClient(newBase(t), true, resilient.WithStore(downStore{}))
	err := postOp(down, "op-down", "{}")
	require.ErrorIs(t, err, resilient.ErrStore)
	var re *resilient.Error
	require.ErrorAs(t, err, &re)
	assert.Empty(t, re.Key, "ErrStore: no key was sent")
	assert.NotContains(t, err.Error(), "\n")

	mem := sideClient(newBase(t), true, resilient.WithStore(persist.NewMemory()))
	require.NoError(t, postOp(mem, "op", `{"a":1}`))
	err = postOp(mem, "op", `{"a":2}`)
	require.ErrorIs(t, err, resilient.ErrOperationMismatch)
	require.ErrorAs(t, err, &re)
	assert.Empty(t, re.Key, "ErrOperationMismatch: the key was never sent with this request")
	assert.NotContains(t, err.Error(), "\n")
	assert.EqualValues(t, 1, n.Load(), "only the first operation was sent")
}

// ---- #23.11: behind a load balancer ----

// (#23.11) One server where about one answer in four is a 503 with
// Retry-After: 1 and the rest 200s. The bare client gets those 503s at
// once. A wrapped call may wait and retry, or return the 503 at once, but
// never waits and then returns without sending its retry: a call that
// returns a 503 does so soon after that 503 came, with its whole body.
func TestCompatRetryAfterBehindALoadBalancer(t *testing.T) {
	const waves, perWave = 3, 4
	page := strings.Repeat("p", 100<<10)
	bothSides(t, func(t *testing.T, wrap bool) {
		var n atomic.Int32
		var mu sync.Mutex
		last := map[string]time.Time{} // call → when its last request was answered
		srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
			code := http.StatusOK
			if n.Add(1)%4 == 1 {
				w.Header().Set("Retry-After", "1")
				code = http.StatusServiceUnavailable
			}
			mu.Lock()
			last[r.Header.Get("X-Call")] = time.Now()
			mu.Unlock()
			w.WriteHeader(code)
			if code != http.StatusOK {
				io.WriteString(w, page) // over 64 KiB (#23.5)
			}
		})
		c := sideClient(newBase(t), wrap)
		type result struct {
			code int
			body int // bytes
			err  error
			end  time.Time
		}
		results := make(map[string]result)
		var rmu sync.Mutex
		var wg sync.WaitGroup
		for wave := range waves {
			for i := range perWave {
				id := fmt.Sprintf("%d-%d", wave, i)
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
					req.Header.Set("X-Call", id)
					resp, err := c.Do(req)
					r := result{err: err, end: time.Now()}
					if resp != nil {
						r.code = resp.StatusCode
						n, _ := io.Copy(io.Discard, resp.Body)
						r.body = int(n)
						resp.Body.Close()
					}
					rmu.Lock()
					results[id] = r
					rmu.Unlock()
				})
			}
			time.Sleep(300 * time.Millisecond)
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		var got503 int
		for id, r := range results {
			if !assert.NoError(t, r.err, "call %s", id) {
				continue
			}
			if r.code != http.StatusServiceUnavailable {
				assert.Equal(t, http.StatusOK, r.code, "call %s", id)
				continue
			}
			got503++
			assert.Equal(t, len(page), r.body, "call %s: the 503 with its whole body", id)
			// A retry slept for would take at least the Retry-After (1 s)
			// before the 503 came back: the gap tells the two apart
			// whatever the machine's load.
			gap := r.end.Sub(last[id])
			assert.Less(t, gap, time.Second, "call %s waited %v after its 503, then returned it without sending its retry", id, gap)
		}
		if !wrap {
			assert.Equal(t, waves*perWave/4, got503, "bare: one call in four gets the 503")
		}
	})
}
