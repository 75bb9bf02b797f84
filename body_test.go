package resilient_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// netHTTPLike is a base transport that treats the request body as
// http.Transport does: it writes it while waiting for the answer, gives up
// when the request's context ends (closing the body, which ends a read
// blocked on a pipe), and answers once the whole body has arrived, or once
// it has read first bytes when answerAfter is set (full duplex: the rest is
// echoed in the response body as it arrives).
type netHTTPLike struct {
	answerAfter int // answer after this many bytes; 0: after the whole body
}

func (b netHTTPLike) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	body := req.Body
	if body == nil {
		body = http.NoBody
	}
	type got struct {
		head []byte
		err  error
	}
	done := make(chan got, 1)
	go func() {
		if b.answerAfter > 0 {
			head := make([]byte, b.answerAfter)
			_, err := io.ReadFull(body, head)
			done <- got{head, err}
			return
		}
		all, err := io.ReadAll(body)
		body.Close()
		done <- got{all, err}
	}()
	select {
	case <-ctx.Done():
		body.Close()
		return nil, ctx.Err()
	case g := <-done:
		if g.err != nil {
			body.Close()
			return nil, g.err
		}
		if b.answerAfter == 0 {
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(g.head)), Request: req}, nil
		}
		// Full duplex: the answer starts now; its body is the request's,
		// first bytes and then the rest as the caller writes it.
		pr, pw := io.Pipe()
		go func() {
			pw.Write(g.head)
			_, err := io.Copy(pw, body)
			body.Close()
			pw.CloseWithError(err)
		}()
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: pr, Request: req}, nil
	}
}

// Regression: a body without GetBody (a pipe fed slowly) was read whole
// before the first attempt, without watching the context: the call
// returned when the pipe ended, seconds after the deadline. It is streamed
// now, and the call ends at the deadline, as a bare client's does.
func TestStreamedBodyHonoursTheDeadline(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		t.Run(map[bool]string{false: "bare", true: "wrapped"}[wrapped], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rt http.RoundTripper = netHTTPLike{}
				if wrapped {
					rt = resilient.NewTransport(rt)
				}
				pr, pw := io.Pipe()
				wrote := make(chan struct{})
				go func() {
					defer close(wrote)
					for range 13 { // 2.6 s of body
						time.Sleep(200 * time.Millisecond)
						if _, err := pw.Write([]byte("chunk")); err != nil {
							return // the client gave up
						}
					}
					pw.Close()
				}()
				ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/v1/uploads", pr)
				start := time.Now()
				_, err := (&http.Client{Transport: rt}).Do(req)
				took := time.Since(start)
				pr.Close() // whatever happened, the writer ends
				<-wrote
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				assert.Equal(t, 600*time.Millisecond, took, "returns at the deadline")
			})
		})
	}
}

// Regression: full duplex (the caller writes the rest of the body only
// after the answer has begun) deadlocked the wrapped call, which waited for
// the body's end before sending anything.
func TestStreamedBodyFullDuplex(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		t.Run(map[bool]string{false: "bare", true: "wrapped"}[wrapped], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rt http.RoundTripper = netHTTPLike{answerAfter: 5}
				if wrapped {
					rt = resilient.NewTransport(rt)
				}
				pr, pw := io.Pipe()
				go pw.Write([]byte("hello"))
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/v1/chat", pr)
				resp, err := (&http.Client{Transport: rt}).Do(req)
				require.NoError(t, err, "the answer begins before the body ends")
				defer resp.Body.Close()
				first := make([]byte, 5)
				_, err = io.ReadFull(resp.Body, first)
				require.NoError(t, err)
				assert.Equal(t, "hello", string(first))
				go func() { // the caller answers the answer
					pw.Write([]byte(", world"))
					pw.Close()
				}()
				rest, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				assert.Equal(t, ", world", string(rest))
			})
		})
	}
}

// A streamed body is kept as it is sent: a retry replays it whole, and a
// body over the buffer limit can still be retried when the attempt that
// failed read none of it (a refused dial), but not once it has been sent.
func TestStreamedBodyReplays(t *testing.T) {
	payload := bytes.Repeat([]byte("x"), 2048)
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name       string
		limit      int64
		refuseDial bool // the first attempt's dial fails before the body is read
		steps      []stubtest.Step
		attempts   int // attempts the server got
		want       int // the status returned
	}{
		{"within the limit, after a 503", 4096, false, []stubtest.Step{stubtest.Reply(503), stubtest.Reply(200)}, 2, 200},
		{"over the limit, nothing read by the refused dial", 1024, true, []stubtest.Step{stubtest.Reply(200)}, 1, 200},
		{"over the limit, sent once", 1024, false, []stubtest.Step{stubtest.Reply(503), stubtest.Reply(200)}, 1, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := stubtest.New(tt.steps...)
			var base http.RoundTripper = s
			if tt.refuseDial {
				n := 0
				base = RoundTripFunc(func(req *http.Request) (*http.Response, error) {
					if n++; n == 1 {
						return nil, refused
					}
					return s.RoundTrip(req)
				})
			}
			tr := resilient.NewTransport(base, fast(resilient.WithMaxBodyBuffer(tt.limit), resilient.WithDedupingServer("api.test"))...)
			req, _ := http.NewRequest(http.MethodPut, target, noGetBody{bytes.NewReader(payload)})
			resp, err := do(t, tr, req)
			require.NoError(t, err)
			assert.Equal(t, tt.want, resp.StatusCode)
			require.Len(t, s.Attempts(), tt.attempts)
			for _, a := range s.Attempts() {
				assert.Equal(t, payload, a.Body, "every attempt sent has the whole body")
			}
		})
	}
}

// RoundTripFunc adapts a function to http.RoundTripper.
type RoundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// A caller's body that fails mid-way fails the call once, as a bare
// client's does: every attempt would fail the same way.
func TestStreamedBodyReadErrorIsTerminal(t *testing.T) {
	s := stubtest.New(stubtest.Reply(200))
	body := io.MultiReader(strings.NewReader("part"), failingReader{})
	req, _ := http.NewRequest(http.MethodPut, target, body)
	_, err := do(t, resilient.NewTransport(s, fast()...), req)
	require.ErrorIs(t, err, resilient.ErrBodyNotReplayable)
	assert.Contains(t, err.Error(), "disk on fire")
}

// Regression, over real sockets: a server answers 503 at once and goes on
// reading the upload (a proxy that drains it, full duplex). The retry of
// the upload (no GetBody, within the limit when the 503 came) failed
// mid-body, because the first attempt's write loop went on taking the
// caller's bytes past the limit. Now only the newest attempt takes them,
// and a read already under way hands its bytes to it.
func TestStreamedBodyAnsweredEarlyIsRetriedWhole(t *testing.T) {
	var n atomic.Int32
	retryIn := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			http.NewResponseController(w).EnableFullDuplex()
			w.WriteHeader(503)
			http.NewResponseController(w).Flush()
			io.Copy(io.Discard, r.Body)
			return
		}
		close(retryIn)
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(200)
	}))
	defer srv.Close()
	bare := func() *http.Transport { return &http.Transport{} }
	for _, wrapped := range []bool{false, true} {
		n.Store(0)
		retryIn = make(chan struct{})
		var rt http.RoundTripper = bare()
		if wrapped {
			rt = resilient.NewTransport(bare(), resilient.WithMaxBodyBuffer(1000), resilient.WithBackoff(zeroBackoff{}))
		}
		pr, pw := io.Pipe()
		go func() {
			pw.Write(make([]byte, 500))
			if wrapped {
				<-retryIn
			}
			pw.Write(make([]byte, 1000))
			pw.Close()
		}()
		req, _ := http.NewRequest(http.MethodPut, srv.URL, pr)
		resp, err := rt.RoundTrip(req)
		if !wrapped {
			// bare: the 503 while the body still goes; finish sending it
			require.NoError(t, err)
			require.Equal(t, 503, resp.StatusCode)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			continue
		}
		require.NoError(t, err, "wrapped: an error where bare returns the 503")
		t.Logf("wrapped: %d", resp.StatusCode)
		resp.Body.Close()
	}
}

type zeroBackoff struct{}

func (zeroBackoff) Delay(int, time.Duration) time.Duration { return time.Millisecond }

// staleWriter is a base transport that behaves as http.Transport does when
// a server answers before it has read the whole body (a 503 from a proxy
// that then drains the upload, an early 413/401): RoundTrip returns the
// answer while its write loop keeps reading the request body, until the
// body ends. The second attempt answers 200 once it has the whole body.
type staleWriter struct {
	mu        sync.Mutex
	n         int
	firstRead chan struct{} // closed when attempt 1 has read 500 bytes
	retryIn   chan struct{} // closed when attempt 2 has started reading
	wg        sync.WaitGroup
}

func (s *staleWriter) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	if n == 1 {
		s.wg.Add(1)
		go func() { // the write loop, still writing after RoundTrip returned
			defer s.wg.Done()
			buf := make([]byte, 100)
			total := 0
			for {
				k, err := req.Body.Read(buf)
				total += k
				if total == 500 {
					close(s.firstRead)
				}
				if err != nil {
					break
				}
			}
			req.Body.Close()
		}()
		<-s.firstRead
		return &http.Response{StatusCode: 503, Status: "503 Service Unavailable", Header: http.Header{}, Body: io.NopCloser(strings.NewReader("busy")), Request: req}, nil
	}
	close(s.retryIn)
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{}, Body: io.NopCloser(strings.NewReader(string(rune(len(b))))), Request: req}, nil
}

// The caller's upload (no GetBody) is 1500 bytes, the replay limit 1000.
// Attempt 1 is answered 503 after 500 bytes while net/http keeps sending
// the rest. A bare client returns the 503; the wrapped one must return the
// 503 or the retry's answer, never an error.
func TestStreamedBodyStaleWriterLeavesTheRetryItsBytes(t *testing.T) {
	base := &staleWriter{firstRead: make(chan struct{}), retryIn: make(chan struct{})}
	tr := resilient.NewTransport(base, resilient.WithMaxBodyBuffer(1000), resilient.WithBackoff(zeroBackoff{}))
	pr, pw := io.Pipe()
	go func() {
		pw.Write(make([]byte, 500))
		<-base.retryIn // the producer goes on once the retry is under way
		time.Sleep(20 * time.Millisecond)
		pw.Write(make([]byte, 1000))
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPut, "http://example.test/upload", pr)
	resp, err := tr.RoundTrip(req)
	base.wg.Wait()
	require.NoError(t, err, "bare returns the 503; wrapped returned an error")
	resp.Body.Close()
}

// Regression: WithMaxBodyBuffer(math.MaxInt64): limit+1 overflows, LimitReader reads
// nothing and a body of unknown length is sent empty.
func TestHugeBodyBufferLimit(t *testing.T) {
	s := stubtest.New(stubtest.Reply(200))
	pr, pw := io.Pipe()
	go func() { pw.Write([]byte(`{"amount":100}`)); pw.Close() }()
	req, _ := http.NewRequest(http.MethodPost, target, pr)
	_, err := do(t, resilient.NewTransport(s, fast(resilient.WithMaxBodyBuffer(math.MaxInt64))...), req)
	require.NoError(t, err)
	assert.Equal(t, `{"amount":100}`, string(s.Attempts()[0].Body))
}
