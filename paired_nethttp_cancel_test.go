package resilient_test

// Paired tests of deadlines and cancellation (see paired_nethttp_test.go for
// the pairing): a call never returns past its caller's deadline, ends when
// its caller gives up (by the context or by Request.Cancel, which
// http.Transport honours), and sends nothing after that. The waits are the
// SDK's (backoff, Retry-After, another call of the key in flight), so most
// cases run in a synctest bubble over an in-memory network (pnPipeNet),
// where the fake clock drives net/http's timers and the SDK's alike.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pnPipeNet is an in-memory network for a synctest bubble: an http.Server
// and an http.Transport joined by net.Pipe connections, so that the
// bubble's fake clock drives net/http's own timers and the SDK's.
type pnPipeNet struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	srv   *http.Server
	tr    *http.Transport
}

// newPipeNet starts h on a new pnPipeNet. close must be called before the
// bubble ends.
func newPipeNet(h http.HandlerFunc) *pnPipeNet {
	n := &pnPipeNet{conns: make(chan net.Conn), done: make(chan struct{})}
	n.srv = &http.Server{Handler: h}
	n.tr = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, s := net.Pipe()
		select {
		case n.conns <- s:
			return c, nil
		case <-n.done:
			return nil, net.ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	go n.srv.Serve(n)
	return n
}

func (n *pnPipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-n.conns:
		return c, nil
	case <-n.done:
		return nil, net.ErrClosed
	}
}

func (n *pnPipeNet) Close() error {
	n.once.Do(func() { close(n.done) })
	return nil
}

func (n *pnPipeNet) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }

// close ends the server, its connections and the transport's.
func (n *pnPipeNet) close() {
	n.srv.Close()
	n.tr.CloseIdleConnections()
}

// pnBubble runs f in a synctest bubble on each side, over a new pnPipeNet
// serving h, and returns the observations.
func pnBubble[T any](t *testing.T, h func(w http.ResponseWriter, r *http.Request, release <-chan struct{}), f func(t *testing.T, c *http.Client) T) (bare, wrapped T) {
	t.Helper()
	for _, side := range compatSides {
		t.Run(side.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				n := newPipeNet(func(w http.ResponseWriter, r *http.Request) { h(w, r, release) })
				defer n.close()
				defer close(release)
				c := &http.Client{Transport: n.tr}
				if side.wrap {
					c = resilient.Wrap(c)
				}
				obs := f(t, c)
				if side.wrap {
					wrapped = obs
				} else {
					bare = obs
				}
			})
		})
	}
	return bare, wrapped
}

// pnOutcome is a call's outcome: its status or its error's matches.
func pnOutcome(resp *http.Response, err error) string {
	if err != nil {
		return fmt.Sprint(pnErrObs(err))
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return fmt.Sprint(resp.StatusCode)
}

// A call returns by its context's deadline, whatever the server does and
// whatever the SDK would wait: a Retry-After longer than the time left, a
// server that keeps failing, a server that hangs, a retry that hangs.
// (Virtual time: the bubble's clock, not the machine's.)
func TestPairedNeverPastTheDeadline(t *testing.T) {
	const deadline = 2 * time.Second
	for _, tc := range []struct {
		name    string
		method  string
		handler func(n int32, w http.ResponseWriter, r *http.Request, release <-chan struct{})
		// differs: the wrapped side's outcome where it differs by design.
		differs string
	}{
		{"503 Retry-After past the deadline", http.MethodGet, func(_ int32, w http.ResponseWriter, _ *http.Request, _ <-chan struct{}) {
			w.Header().Set("Retry-After", "10")
			w.WriteHeader(http.StatusServiceUnavailable)
		}, ""},
		// As "500 then hangs" below: the retry waited the server's delay
		// (a cold host is not judged shedding) and got no answer by the
		// deadline.
		{"503 Retry-After within the deadline, then hangs", http.MethodGet, func(n int32, w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
			if n > 1 {
				hang(r, release)
				return
			}
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		}, "[url.Error Timeout os.IsTimeout net.Error net.Error.Timeout context.DeadlineExceeded]"},
		{"always 503", http.MethodGet, func(_ int32, w http.ResponseWriter, _ *http.Request, _ <-chan struct{}) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}, ""},
		{"always 503 PUT", http.MethodPut, func(_ int32, w http.ResponseWriter, _ *http.Request, _ <-chan struct{}) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}, ""},
		// By design: the retry was sent within the deadline and got no
		// answer by it, so the caller gets the deadline's error where a
		// bare client got the 500 (the 500 went when the retry did).
		{"500 then hangs", http.MethodGet, func(n int32, w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
			if n > 1 {
				hang(r, release)
				return
			}
			w.WriteHeader(http.StatusInternalServerError)
		}, "[url.Error Timeout os.IsTimeout net.Error net.Error.Timeout context.DeadlineExceeded]"},
		{"hangs GET", http.MethodGet, func(_ int32, _ http.ResponseWriter, r *http.Request, release <-chan struct{}) { hang(r, release) }, ""},
		{"hangs POST", http.MethodPost, func(_ int32, _ http.ResponseWriter, r *http.Request, release <-chan struct{}) { hang(r, release) }, ""},
		{"429 Retry-After past the deadline", http.MethodPost, func(_ int32, w http.ResponseWriter, _ *http.Request, _ <-chan struct{}) {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			bare, wrapped := pnBubble(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
				io.Copy(io.Discard, r.Body)
				tc.handler(n.Add(1), w, r, release)
			}, func(t *testing.T, c *http.Client) string {
				n.Store(0)
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, tc.method, "http://api.test/x", strings.NewReader("{}"))
				require.NoError(t, err)
				start := time.Now()
				resp, err := c.Do(req)
				took := time.Since(start)
				assert.LessOrEqual(t, took, deadline, "returned by the deadline")
				return pnOutcome(resp, err)
			})
			if tc.differs != "" {
				assert.Regexp(t, `^5\d\d$`, bare, "the bare client has the server's first answer")
				assert.Equal(t, tc.differs, wrapped)
				return
			}
			assert.Equal(t, bare, wrapped)
		})
	}
}

// A caller that gives up while the SDK waits to retry (a backoff, a
// Retry-After) ends the call then, and no attempt is sent after it: by its
// context, or by Request.Cancel, which http.Transport honours as it
// honours the context (deprecated, but a field net/http still serves). A
// bare client has returned the 500 by then; the wrapped one must not be
// found waiting, nor sending, once the caller has left. The same when the
// caller gives up while the server holds the request (Retry-After "hold"):
// both sides return then, and no retry follows.
func TestPairedCancelDuringTheWait(t *testing.T) {
	for _, how := range []string{"context", "Request.Cancel"} {
		for _, ra := range []string{"", "1", "20", "hold"} {
			for _, method := range []string{http.MethodGet, http.MethodPut} {
				t.Run(fmt.Sprintf("%s/Retry-After=%q/%s", how, ra, method), func(t *testing.T) {
					const cancelAt = 50 * time.Millisecond
					var mu sync.Mutex
					var arrivals []time.Time
					bare, wrapped := pnBubble(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
						mu.Lock()
						arrivals = append(arrivals, time.Now())
						mu.Unlock()
						io.Copy(io.Discard, r.Body)
						switch ra {
						case "hold": // the caller gives up while the server holds the request
							hang(r, release)
							return
						case "":
						default:
							w.Header().Set("Retry-After", ra)
						}
						w.WriteHeader(http.StatusInternalServerError)
					}, func(t *testing.T, c *http.Client) string {
						mu.Lock()
						arrivals = nil
						mu.Unlock()
						ctx, cancel := context.WithCancel(context.Background())
						defer cancel()
						stop := make(chan struct{})
						if how == "Request.Cancel" {
							ctx = context.Background()
						}
						req, err := http.NewRequestWithContext(ctx, method, "http://api.test/x", strings.NewReader("{}"))
						require.NoError(t, err)
						if how == "Request.Cancel" {
							//lint:ignore SA1019 the deprecated field is the case: net/http still honours it
							req.Cancel = stop
						}
						start := time.Now()
						fired := make(chan struct{})
						go func() {
							defer close(fired)
							time.Sleep(cancelAt)
							if how == "Request.Cancel" {
								close(stop)
							} else {
								cancel()
							}
						}()
						resp, err := c.Do(req)
						took := time.Since(start)
						if err == nil {
							resp.Body.Close()
						}
						<-fired
						synctest.Wait()
						assert.LessOrEqual(t, took, cancelAt, "returned by the time the caller gave up")
						mu.Lock()
						defer mu.Unlock()
						late := 0
						for _, at := range arrivals {
							if at.Sub(start) >= cancelAt {
								late++
							}
						}
						assert.Zero(t, late, "requests sent after the caller gave up")
						return fmt.Sprintf("late=%d", late)
					})
					assert.Equal(t, bare, wrapped)
				})
			}
		}
	}
}

// An answer the wrapped side held while it waited to retry, and returned
// when the retry was not sent (here: the caller closed Request.Cancel
// during the wait), reads as a bare client's: once closed, a read fails as
// net/http's does; unclosed, its read ends with the caller's cancel, as
// net/http's (Request.Cancel also ends a body being read).
func TestPairedHeldAnswerReadsAsBare(t *testing.T) {
	for _, closeFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("closed=%v", closeFirst), func(t *testing.T) {
			body := strings.Repeat("0123456789", 10<<10) // past what the wait drains
			bare, wrapped := pnBubble(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
				w.Header().Set("Retry-After", "5")
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, body)
			}, func(t *testing.T, c *http.Client) string {
				req, err := http.NewRequest(http.MethodGet, "http://api.test/x", nil)
				require.NoError(t, err)
				stop := make(chan struct{})
				//lint:ignore SA1019 the deprecated field ends the wrapped side's wait
				req.Cancel = stop
				fired := make(chan struct{})
				go func() {
					defer close(fired)
					time.Sleep(time.Second)
					close(stop)
				}()
				resp, err := c.Do(req)
				require.NoError(t, err)
				<-fired
				synctest.Wait() // the wrapped side's drain has read what it reads
				if closeFirst {
					resp.Body.Close()
					n, err := resp.Body.Read(make([]byte, 10))
					return fmt.Sprintf("%d after close: %d %v", resp.StatusCode, n, err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				return fmt.Sprintf("%d same body=%v %v", resp.StatusCode, string(b) == body, err)
			})
			if !closeFirst {
				assert.Equal(t, "500 same body=false net/http: request canceled", bare)
			} else {
				assert.Equal(t, "500 after close: 0 http: read on closed response body", bare)
			}
			assert.Equal(t, bare, wrapped)
		})
	}
}

// pnUntilDone is a reader that blocks until its context is done, then
// fails with the context's error.
type pnUntilDone struct{ ctx context.Context }

func (u pnUntilDone) Read([]byte) (int, error) {
	<-u.ctx.Done()
	return 0, u.ctx.Err()
}

// A caller that cancels its context mid-upload (the server has part of the
// body) or mid-answer (the caller has part of the response) gets the
// context's error from Do or from the body's Read, on every shape, and the
// caller's request body is closed.
func TestPairedCancelMidUploadAndMidAnswer(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodPut} {
		t.Run("mid-upload/"+method, func(t *testing.T) {
			bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) []string {
				got := make(chan struct{})
				srv := hangingServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
					buf := make([]byte, 5)
					if _, err := io.ReadFull(r.Body, buf); err == nil {
						close(got)
					}
					hang(r, release)
				})
				var closed atomic.Int32
				ctx, cancel := context.WithCancel(pnCtx(t))
				defer cancel()
				// More than net/http buffers before it writes, then nothing
				// until the caller gives up: the upload is under way. (A
				// body read that ignores the context holds net/http's
				// RoundTrip until it returns, bare or wrapped.)
				body := &pnBody{r: io.MultiReader(bytes.NewReader(make([]byte, 64<<10)), pnUntilDone{ctx}), closed: &closed}
				req, err := http.NewRequestWithContext(ctx, method, srv.URL, body)
				require.NoError(t, err)
				go func() {
					select {
					case <-got:
						cancel()
					case <-ctx.Done():
					}
				}()
				var resp *http.Response
				within(t, 10*time.Second, cancel, func() { resp, err = c.Do(req) })
				if err == nil {
					resp.Body.Close()
				}
				require.Eventually(t, func() bool { return closed.Load() > 0 }, 5*time.Second, time.Millisecond, "the body was closed")
				return pnErrObs(err)
			})
			assert.Contains(t, bare, "context.Canceled")
			assert.Equal(t, bare, wrapped)
		})
	}
	for _, s := range pnShapes {
		t.Run("mid-answer/"+s.name, func(t *testing.T) {
			bare, wrapped := pnPair(t, func(t *testing.T, c *http.Client) []string {
				srv := hangingServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
					io.Copy(io.Discard, r.Body)
					io.WriteString(w, "first\n")
					http.NewResponseController(w).Flush()
					hang(r, release)
				})
				ctx, cancel := context.WithCancel(pnCtx(t))
				defer cancel()
				resp, err := c.Do(pnRequest(t, ctx, s, srv.URL))
				require.NoError(t, err)
				defer resp.Body.Close()
				br := bufio.NewReader(resp.Body)
				line, err := br.ReadString('\n')
				require.NoError(t, err)
				require.Equal(t, "first\n", line)
				cancel()
				within(t, 10*time.Second, func() { resp.Body.Close() }, func() { _, err = io.ReadAll(br) })
				return pnErrObs(err)
			})
			assert.Contains(t, bare, "context.Canceled")
			assert.Equal(t, bare, wrapped)
		})
	}
}

// Two calls of one key of the application's at once: the wrapped side
// sends the second only once the first has ended (flight.go), where a bare
// client sends both. A caller of the second that gives up while it waits
// gets its call back then, by its context or by Request.Cancel, as a bare
// client's caller does.
func TestPairedCancelWhileTheKeyIsInFlight(t *testing.T) {
	for _, how := range []string{"context", "Request.Cancel"} {
		t.Run(how, func(t *testing.T) {
			const cancelAt, firstEnds = 50 * time.Millisecond, time.Second
			bare, wrapped := pnBubble(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
				io.Copy(io.Discard, r.Body)
				hang(r, release) // until its caller leaves
			}, func(t *testing.T, c *http.Client) string {
				put := func(ctx context.Context) *http.Request {
					req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://api.test/x", strings.NewReader("{}"))
					require.NoError(t, err)
					req.Header.Set("Idempotency-Key", "one-key")
					return req
				}
				firstCtx, stopFirst := context.WithTimeout(context.Background(), firstEnds)
				defer stopFirst()
				firstDone := make(chan struct{})
				go func() {
					defer close(firstDone)
					if resp, err := c.Do(put(firstCtx)); err == nil {
						resp.Body.Close()
					}
				}()
				synctest.Wait() // the first is in flight
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				stop := make(chan struct{})
				if how == "Request.Cancel" {
					ctx = context.Background()
				}
				req := put(ctx)
				if how == "Request.Cancel" {
					//lint:ignore SA1019 the deprecated field is the case: net/http still honours it
					req.Cancel = stop
				}
				fired := make(chan struct{})
				start := time.Now()
				go func() {
					defer close(fired)
					time.Sleep(cancelAt)
					if how == "Request.Cancel" {
						close(stop)
					} else {
						cancel()
					}
				}()
				_, err := c.Do(req)
				took := time.Since(start)
				<-fired
				<-firstDone
				assert.LessOrEqual(t, took, cancelAt, "returned by the time the caller gave up")
				return fmt.Sprintf("error=%v", err != nil)
			})
			assert.Equal(t, "error=true", bare)
			assert.Equal(t, bare, wrapped)
		})
	}
}

// TestPairedCancelledBeforeTheCall: a caller that gave up before the call,
// by its context or by Request.Cancel, gets an error wrapped as bare, and
// the server sees no request from either side. A plain call (a GET, a POST
// with GetBody: the Transport's short path) and a call through the loop
// (a POST with a key of the caller's) answer alike: the plain path does
// not take a request with Request.Cancel, which the loop honours before
// sending, as net/http does.
func TestPairedCancelledBeforeTheCall(t *testing.T) {
	for _, how := range []string{"context", "Request.Cancel"} {
		for _, kind := range []string{"GET", "POST", "keyed POST"} {
			t.Run(how+"/"+kind, func(t *testing.T) {
				var arrivals atomic.Int32
				bare, wrapped := pnBubble(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
					arrivals.Add(1)
					io.Copy(io.Discard, r.Body)
					w.WriteHeader(http.StatusOK)
				}, func(t *testing.T, c *http.Client) string {
					arrivals.Store(0)
					ctx, cancel := context.WithCancel(context.Background())
					stop := make(chan struct{})
					method, body := http.MethodGet, io.Reader(nil)
					if kind != "GET" {
						method, body = http.MethodPost, strings.NewReader("{}")
					}
					req, err := http.NewRequestWithContext(ctx, method, "http://api.test/x", body)
					require.NoError(t, err)
					if kind == "keyed POST" {
						req.Header.Set("Idempotency-Key", "k-1")
					}
					if how == "Request.Cancel" {
						//lint:ignore SA1019 the deprecated field is the case: net/http still honours it
						req.Cancel = stop
						close(stop)
					} else {
						cancel()
					}
					defer cancel()
					resp, err := c.Do(req)
					if err == nil {
						resp.Body.Close()
					}
					synctest.Wait()
					assert.Error(t, err)
					assert.Zero(t, arrivals.Load(), "requests the server saw")
					return fmt.Sprintf("failed=%t canceled=%t", err != nil, err != nil && strings.Contains(err.Error(), "cancel"))
				})
				assert.Equal(t, bare, wrapped)
			})
		}
	}
}
