package resilient_test

// The rest of net/http's surface that a caller relies on, paired bare and
// wrapped as in compat_test.go: streaming, trailers, 1xx answers, proxies,
// cookies and redirects, Client.Timeout, CloseIdleConnections, HTTP/2, HEAD,
// Expect: 100-continue and cancellation.

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A streaming response is read as it comes: the first chunk before the
// server writes the second.
func TestCompatStreamingResponse(t *testing.T) {
	bothSides(t, func(t *testing.T, wrap bool) {
		next := make(chan struct{})
		srv := hangingServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
			io.WriteString(w, "one\n")
			http.NewResponseController(w).Flush()
			select {
			case <-next:
				io.WriteString(w, "two\n")
			case <-time.After(3 * time.Second):
				io.WriteString(w, "the client did not see the first chunk\n")
			case <-release:
			}
		})
		c := sideClient(newBase(t), wrap)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "one\n", line)
		close(next)
		rest, err := io.ReadAll(br)
		require.NoError(t, err)
		assert.Equal(t, "two\n", string(rest))
	})
}

// Request and response trailers.
func TestCompatTrailers(t *testing.T) {
	bothSides(t, func(t *testing.T, wrap bool) {
		srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("Trailer", "X-Echo")
			w.WriteHeader(http.StatusOK)
			w.Write(b)
			w.Header().Set("X-Echo", r.Trailer.Get("X-Sum"))
		})
		c := sideClient(newBase(t), wrap)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, onlyReader{strings.NewReader("data")})
		require.NoError(t, err)
		req.Trailer = http.Header{"X-Sum": {"42"}}
		resp, err := c.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, "data", string(b))
		assert.Equal(t, "42", resp.Trailer.Get("X-Echo"), "the request's trailer reached the server, the response's the client")
	})
}

// 1xx answers: a 103 Early Hints reaches the caller's Got1xxResponse hook,
// once, keyed or not, and the final answer follows.
func TestCompatEarlyHints(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			bothSides(t, func(t *testing.T, wrap bool) {
				srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Link", "</style.css>; rel=preload")
					w.WriteHeader(http.StatusEarlyHints)
					w.WriteHeader(http.StatusOK)
					io.WriteString(w, "done")
				})
				c := sideClient(newBase(t), wrap)
				var mu sync.Mutex
				var hints []string
				trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
					mu.Lock()
					hints = append(hints, fmt.Sprint(code, " ", h.Get("Link")))
					mu.Unlock()
					return nil
				}}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), method, srv.URL, strings.NewReader("{}"))
				require.NoError(t, err)
				resp, err := c.Do(req)
				require.NoError(t, err)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, "done", string(b))
				mu.Lock()
				defer mu.Unlock()
				assert.Equal(t, []string{"103 </style.css>; rel=preload"}, hints)
			})
		})
	}
}

// Through an HTTP forward proxy (Transport.Proxy).
func TestCompatProxy(t *testing.T) {
	bothSides(t, func(t *testing.T, wrap bool) {
		origin := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %s", r.Method, b)
		})
		var proxied atomic.Int32
		forward := &http.Transport{}
		t.Cleanup(forward.CloseIdleConnections)
		proxy := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
			proxied.Add(1)
			out := r.Clone(r.Context())
			out.RequestURI = ""
			resp, err := forward.RoundTrip(out)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			w.WriteHeader(resp.StatusCode)
			io.Copy(w, resp.Body)
		})
		pu, err := url.Parse(proxy.URL)
		require.NoError(t, err)
		c := sideClient(newBase(t, func(tr *http.Transport) { tr.Proxy = http.ProxyURL(pu) }), wrap)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, origin.URL+"/x", strings.NewReader("body"))
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "POST body", string(b))
		assert.EqualValues(t, 1, proxied.Load(), "through the proxy, once")
	})
}

// Cookies from a jar and redirects: 301/302/303 turn a POST into a GET
// without body; 307/308 re-send the body (with the same key when wrapped).
func TestCompatCookiesAndRedirects(t *testing.T) {
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			seen := map[bool]string{}
			bothSides(t, func(t *testing.T, wrap bool) {
				var startKey, endKey string
				srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					if r.URL.Path == "/start" {
						startKey = r.Header.Get("Idempotency-Key")
						http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1", Path: "/"})
						http.Redirect(w, r, "/end", code)
						return
					}
					endKey = r.Header.Get("Idempotency-Key")
					cookie, _ := r.Cookie("session")
					val := "none"
					if cookie != nil {
						val = cookie.Value
					}
					fmt.Fprintf(w, "%s body=%q cookie=%s", r.Method, b, val)
				})
				jar, err := cookiejar.New(nil)
				require.NoError(t, err)
				base := newBase(t)
				base.Jar = jar
				c := sideClient(base, wrap)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/start", strings.NewReader("payload"))
				require.NoError(t, err)
				resp, err := c.Do(req)
				require.NoError(t, err)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				want := `GET body="" cookie=s1`
				if code == 307 || code == 308 {
					want = `POST body="payload" cookie=s1`
					if wrap {
						assert.NotEmpty(t, startKey)
						assert.Equal(t, startKey, endKey, "the same operation, the same key")
					}
				}
				assert.Equal(t, want, string(b))
				seen[wrap] = string(b)
			})
			assert.Equal(t, seen[false], seen[true])
		})
	}
}

// http.Client.Timeout also bounds reading the body, with a timeout error.
func TestCompatClientTimeoutBoundsTheBody(t *testing.T) {
	bothSides(t, func(t *testing.T, wrap bool) {
		srv := hangingServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
			io.WriteString(w, "start")
			http.NewResponseController(w).Flush()
			hang(r, release)
		})
		base := newBase(t)
		base.Timeout = 400 * time.Millisecond
		c := sideClient(base, wrap)
		resp := compatGet(t, c, http.MethodGet, srv.URL)
		defer resp.Body.Close()
		_, err := io.ReadAll(resp.Body)
		require.Error(t, err)
		assert.True(t, os.IsTimeout(err), "os.IsTimeout(%v)", err)
	})
}

// Client.CloseIdleConnections reaches the base transport.
func TestCompatCloseIdleConnections(t *testing.T) {
	bothSides(t, func(t *testing.T, wrap bool) {
		closed := make(chan struct{}, 1)
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "ok")
		}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				select {
				case closed <- struct{}{}:
				default:
				}
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		c := sideClient(newBase(t), wrap)
		resp := compatGet(t, c, http.MethodGet, srv.URL)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.CloseIdleConnections()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("the idle connection was not closed")
		}
	})
}

// HTTP/2 over TLS: GET and a keyed POST, both answered over HTTP/2.
func TestCompatHTTP2(t *testing.T) {
	bothSides(t, func(t *testing.T, wrap bool) {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %d %s", r.Method, r.ProtoMajor, b)
		}))
		srv.EnableHTTP2 = true
		srv.StartTLS()
		t.Cleanup(srv.Close)
		c := sideClient(srv.Client(), wrap)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			req, err := http.NewRequestWithContext(ctx, m, srv.URL, strings.NewReader("b"))
			require.NoError(t, err)
			resp, err := c.Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, 2, resp.ProtoMajor)
			assert.Equal(t, m+" 2 b", string(b))
		}
	})
}

// HEAD: the length of the body that a GET would have, and no body.
func TestCompatHead(t *testing.T) {
	bothSides(t, func(t *testing.T, wrap bool) {
		srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1234")
			if r.Method != http.MethodHead {
				w.Write(make([]byte, 1234))
			}
		})
		c := sideClient(newBase(t), wrap)
		resp := compatGet(t, c, http.MethodHead, srv.URL)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.EqualValues(t, 1234, resp.ContentLength)
		assert.Empty(t, b)
	})
}

// Expect: 100-continue: the body follows the server's 100 Continue, and a
// server that refuses without reading gets one request.
func TestCompatExpectContinue(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refuse=%v", refuse), func(t *testing.T) {
			bothSides(t, func(t *testing.T, wrap bool) {
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
				c := sideClient(newBase(t, func(tr *http.Transport) { tr.ExpectContinueTimeout = 5 * time.Second }), wrap)
				var got100 atomic.Bool
				trace := &httptrace.ClientTrace{Got100Continue: func() { got100.Store(true) }}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, srv.URL, strings.NewReader("payload"))
				require.NoError(t, err)
				req.Header.Set("Expect", "100-continue")
				resp, err := c.Do(req)
				require.NoError(t, err)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if refuse {
					assert.Equal(t, http.StatusForbidden, resp.StatusCode)
					assert.False(t, got100.Load())
				} else {
					assert.Equal(t, http.StatusOK, resp.StatusCode)
					assert.Equal(t, "payload", string(b))
					assert.True(t, got100.Load(), "the 100 Continue reached the caller's trace")
				}
				assert.EqualValues(t, 1, n.Load())
			})
		})
	}
}

// Cancelling the context while reading the body ends the read with the
// context's error.
func TestCompatCancelMidBody(t *testing.T) {
	bothSides(t, func(t *testing.T, wrap bool) {
		srv := hangingServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
			io.WriteString(w, "first\n")
			http.NewResponseController(w).Flush()
			hang(r, release)
		})
		c := sideClient(newBase(t), wrap)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "first\n", line)
		cancel()
		within(t, 5*time.Second, func() { resp.Body.Close() }, func() {
			_, err = io.ReadAll(br)
		})
		assert.ErrorIs(t, err, context.Canceled)
	})
}

// compatGet sends a GET or HEAD with a 5 s deadline.
func compatGet(t *testing.T, c *http.Client, method, url string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	return resp
}

// A gzip answer is decompressed transparently (the transport asked for it).
func TestCompatTransparentGzip(t *testing.T) {
	bothSides(t, func(t *testing.T, wrap bool) {
		srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
			if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				io.WriteString(w, "not asked")
				return
			}
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, "hello")
			zw.Close()
		})
		resp := compatGet(t, sideClient(newBase(t), wrap), http.MethodGet, srv.URL)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, "hello", string(b))
		assert.True(t, resp.Uncompressed)
	})
}

// CheckRedirect returning http.ErrUseLastResponse gives the caller the 3xx
// itself; the redirect is not followed.
func TestCompatUseLastResponse(t *testing.T) {
	bothSides(t, func(t *testing.T, wrap bool) {
		var followed atomic.Int32
		srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/end" {
				followed.Add(1)
				return
			}
			http.Redirect(w, r, "/end", http.StatusFound)
		})
		base := newBase(t)
		base.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp := compatGet(t, sideClient(base, wrap), http.MethodGet, srv.URL+"/start")
		resp.Body.Close()
		assert.Equal(t, http.StatusFound, resp.StatusCode)
		assert.Equal(t, "/end", resp.Header.Get("Location"))
		assert.Zero(t, followed.Load())
	})
}

// The caller's request is not modified (its header gets no key or attempt
// field; Host and URL stay), also across a retry, and its Host override
// reaches the server.
func TestCompatRequestNotModified(t *testing.T) {
	for _, method := range []string{http.MethodPut, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			bothSides(t, func(t *testing.T, wrap bool) {
				var n atomic.Int32
				var host atomic.Value
				srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
					host.Store(r.Host)
					io.Copy(io.Discard, r.Body)
					if n.Add(1) == 1 {
						w.WriteHeader(http.StatusServiceUnavailable)
					}
				})
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, method, srv.URL+"/x?y=1", strings.NewReader("{}"))
				require.NoError(t, err)
				req.Header.Set("X-Caller", "1")
				req.Host = "example.test"
				header, u := req.Header.Clone(), req.URL.String()
				resp, err := sideClient(newBase(t), wrap).Do(req)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, header, req.Header)
				assert.Equal(t, u, req.URL.String())
				assert.Equal(t, "example.test", req.Host)
				assert.Equal(t, "example.test", host.Load())
			})
		})
	}
}

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	n *atomic.Int32
}

func (c closeCounter) Close() error { c.n.Add(1); return nil }

// The request body is closed on every path: an answer, a connection
// refused, a context cancelled before the call. A cancelled call sends
// nothing.
func TestCompatRequestBodyClosed(t *testing.T) {
	var n atomic.Int32
	srv := compatServer(t, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.Copy(io.Discard, r.Body)
	})
	refused := httptest.NewServer(http.NotFoundHandler())
	refused.Close() // its port now refuses connections
	for _, tc := range []struct {
		name     string
		url      string
		cancel   bool
		wantSent int32
	}{
		{"answered", srv.URL, false, 1},
		{"connection refused", refused.URL, false, 0},
		{"cancelled before", srv.URL, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bothSides(t, func(t *testing.T, wrap bool) {
				n.Store(0)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if tc.cancel {
					cancel()
				}
				var closed atomic.Int32
				req, err := http.NewRequestWithContext(ctx, http.MethodPut, tc.url, closeCounter{strings.NewReader("{}"), &closed})
				require.NoError(t, err)
				resp, err := sideClient(newBase(t), wrap).Do(req)
				if resp != nil {
					resp.Body.Close()
				}
				assert.Equal(t, tc.wantSent == 1, err == nil, "error: %v", err)
				require.Eventually(t, func() bool { return closed.Load() > 0 }, 5*time.Second, time.Millisecond, "the body was closed")
				assert.Equal(t, tc.wantSent, n.Load(), "requests the server got")
				if tc.cancel {
					assert.ErrorIs(t, err, context.Canceled)
				}
			})
		})
	}
}
