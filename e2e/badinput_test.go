package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInvalidKeysSendNothing: a caller key that is empty, too long, not
// ASCII or padded is refused with ErrInvalidKey before anything is sent, and
// the error does not echo it.
func TestInvalidKeysSendNothing(t *testing.T) {
	long := strings.Repeat("k", 255+1) // one byte over ValidateKey's limit
	cases := []struct {
		name   string
		key    string
		header bool // in the request's header, else with ContextWithKey
	}{
		{"empty header", "", true},
		{"empty context key", "", false},
		{"too long header", long, true},
		{"too long context key", long, false},
		{"non-ASCII header", "clé-ключ-鍵", true},
		{"non-ASCII context key", "clé-ключ-鍵", false},
		{"control character", "abc\x01def", false},
		{"leading space", " abc", false},
	}
	srv, url := startAPI(t, fakeserver.Scenario{}, nil)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: resilient.NewTransport(base, retrying()...)}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if !c.header {
				ctx = resilient.ContextWithKey(ctx, c.key)
			}
			body := &closeCounter{Reader: strings.NewReader(chargeBody(1))}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/charges", body)
			require.NoError(t, err)
			if c.header {
				req.Header["Idempotency-Key"] = []string{c.key}
			}
			resp, err := client.Do(req)
			if resp != nil {
				resp.Body.Close()
			}
			require.ErrorIs(t, err, resilient.ErrInvalidKey)
			var re *resilient.Error
			require.ErrorAs(t, err, &re)
			assert.Zero(t, re.Attempts)
			assert.False(t, re.Unknown)
			assert.Empty(t, re.Key, "the invalid key is not echoed")
			if c.key != "" {
				assert.NotContains(t, err.Error(), c.key)
			}
			assert.Positive(t, body.closed.Load(), "the request body is closed")
		})
	}
	assert.Zero(t, srv.Stats().Requests, "nothing reached the server")
}

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error {
	c.closed.Add(1)
	return nil
}

// TestBodiesThatFail: a body that fails on read is streamed as a bare
// client's is, so the server sees the request begin and never end: nothing
// is applied, the call fails once with the body's error and says the
// outcome is known; a GetBody that fails on the retry after a lost response
// stops the operation with the outcome unknown (the first attempt
// committed).
func TestBodiesThatFail(t *testing.T) {
	t.Run("read error", func(t *testing.T) {
		srv, url := startAPI(t, fakeserver.Scenario{}, nil)
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		client := &http.Client{Transport: resilient.NewTransport(base, retrying()...)}
		body := &closeCounter{Reader: io.MultiReader(strings.NewReader(`{"amount":`), iotest.ErrReader(errors.New("disk gone")))}
		req, err := http.NewRequest(http.MethodPost, url+"/v1/charges", body)
		require.NoError(t, err)
		resp, err := client.Do(req)
		if resp != nil {
			resp.Body.Close()
		}
		require.ErrorIs(t, err, resilient.ErrBodyNotReplayable)
		var re *resilient.Error
		require.ErrorAs(t, err, &re)
		assert.LessOrEqual(t, re.Attempts, 1, "not retried: the body fails the same way every time")
		assert.False(t, re.Unknown, "the server never got the whole request")
		assert.Contains(t, err.Error(), "disk gone")
		assert.Positive(t, body.closed.Load(), "the request body is closed")
		assert.LessOrEqual(t, srv.Stats().Requests, int64(1), "what a bare client sends")
		assert.Empty(t, srv.Ledger(), "nothing applied")
	})
	t.Run("GetBody fails on the retry", func(t *testing.T) {
		srv, url := startAPI(t, fakeserver.Scenario{}, nil)
		require.NoError(t, srv.Enqueue("POST /v1/charges", fakeserver.Fault{Kind: fakeserver.FaultLostResponse}))
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		client := &http.Client{Transport: resilient.NewTransport(base, retrying()...)}
		var rep resilient.Report
		req, err := http.NewRequestWithContext(resilient.ContextWithReport(context.Background(), &rep),
			http.MethodPost, url+"/v1/charges", strings.NewReader(chargeBody(1)))
		require.NoError(t, err)
		req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("source gone") }
		resp, err := client.Do(req)
		if resp != nil {
			resp.Body.Close()
		}
		require.ErrorIs(t, err, resilient.ErrBodyNotReplayable)
		var re *resilient.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 1, re.Attempts)
		require.Equal(t, 1, srv.Effects(rep.Key))
		assert.True(t, re.Unknown, "attempt 0 committed the effect and lost its answer")
	})
}

// misbehaving is a base transport that sends through a real http.Transport,
// then breaks the RoundTripper contract as mode says.
type misbehaving struct {
	next   http.RoundTripper
	mode   string
	calls  atomic.Int32 // responses the real transport returned
	closed atomic.Int32 // of their bodies, how many were closed
}

func (m *misbehaving) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := m.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	m.calls.Add(1)
	switch m.mode {
	case "response and error":
		resp.Body = closeNotify{resp.Body, &m.closed}
		return resp, errors.New("base: a response and an error")
	case "nil body", "nil body and error":
		// The response as a RoundTripper in a test often builds it: no
		// Body at all (http.Client tolerates it and fills in an empty one).
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		m.closed.Add(1)
		resp.Body, resp.ContentLength = nil, 0
		if m.mode == "nil body and error" {
			return resp, errors.New("base: a response without a body, and an error")
		}
		return resp, nil
	}
	resp.Body = closeNotify{resp.Body, &m.closed}
	return resp, nil
}

type closeNotify struct {
	io.ReadCloser
	n *atomic.Int32
}

func (c closeNotify) Close() error {
	c.n.Add(1)
	return c.ReadCloser.Close()
}

// TestMisbehavingBaseTransport: a base transport that returns a response and
// an error, or a response without a body, gets a typed error or a correct
// result, never a panic or a leaked body.
func TestMisbehavingBaseTransport(t *testing.T) {
	cases := []struct {
		name    string
		mode    string
		timeout time.Duration      // WithAttemptTimeout
		script  []fakeserver.Fault // the fake server's first answers
		status  int                // want this final status; 0: want an *Error
	}{
		{name: "response and error", mode: "response and error"},
		{name: "response without body", mode: "nil body", status: http.StatusCreated},
		{name: "response without body, attempt timeout", mode: "nil body", timeout: time.Second, status: http.StatusCreated},
		{name: "response without body, and an error", mode: "nil body and error"},
		{name: "discarded 503 without body, then 201", mode: "nil body", status: http.StatusCreated,
			script: []fakeserver.Fault{{Kind: fakeserver.FaultStatus, Status: 503}}},
		{name: "discarded 503 without body, then 201, attempt timeout", mode: "nil body", timeout: time.Second, status: http.StatusCreated,
			script: []fakeserver.Fault{{Kind: fakeserver.FaultStatus, Status: 503}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, url := startAPI(t, fakeserver.Scenario{}, nil)
			if len(c.script) > 0 {
				require.NoError(t, srv.Enqueue("POST /v1/charges", c.script...))
			}
			real := &http.Transport{}
			defer real.CloseIdleConnections()
			base := &misbehaving{next: real, mode: c.mode}
			opts := retrying(resilient.WithMaxAttempts(2))
			if c.timeout > 0 {
				opts = append(opts, resilient.WithAttemptTimeout(c.timeout))
			}
			client := &http.Client{Transport: resilient.NewTransport(base, opts...)}
			var (
				resp *http.Response
				err  error
				body []byte
			)
			require.NotPanics(t, func() {
				resp, err = client.Post(url+"/v1/charges", "application/json", strings.NewReader(chargeBody(1)))
				if resp != nil {
					body, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
			})
			if c.status == 0 {
				var re *resilient.Error
				require.ErrorAs(t, err, &re, "want a typed error, got response %v", resp)
				assert.NotNil(t, re.Err)
			} else {
				require.NoError(t, err)
				assert.Equal(t, c.status, resp.StatusCode)
				assert.Empty(t, body)
			}
			assert.Equal(t, base.calls.Load(), base.closed.Load(), "every real response body the base got was closed")
		})
	}
}

// endless writes status, then a body that does not end (up to 256 MiB or
// 10 s, whichever first, so that the server stops by itself), until the
// client goes away. It tells how it ended in the request's *endlessCall, if
// the context has one (scripted puts it there).
func endless(status int, header map[string]string, prefix string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		call, _ := r.Context().Value(endlessCallKey{}).(*endlessCall)
		if call != nil {
			call.endless = true
		}
		io.Copy(io.Discard, r.Body)
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		if _, err := io.WriteString(w, prefix); err != nil {
			call.cutShort()
			return
		}
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		stop := time.Now().Add(10 * time.Second)
		for i := 0; i < 8192 && time.Now().Before(stop); i++ {
			if _, err := w.Write(chunk); err != nil {
				call.cutShort()
				return
			}
		}
	}
}

// endlessCall is how one call of an endless handler ended: cut is true when
// the client closed the connection before the body's end, which is what a
// Transport that discards a body must do (it drains a little, then closes).
type endlessCall struct {
	endless bool          // the call was served by endless
	cut     bool          // a write failed: the client went away
	done    chan struct{} // closed when the handler returns
}

type endlessCallKey struct{}

func (c *endlessCall) cutShort() {
	if c != nil {
		c.cut = true
	}
}

// scripted serves request i with steps[i], the last step repeating, and
// returns the server's URL and a function that lists a record per request,
// in arrival order (read a record's fields once its done is closed).
func scripted(t *testing.T, steps ...http.HandlerFunc) (string, func() []*endlessCall) {
	t.Helper()
	var (
		mu    sync.Mutex
		calls []*endlessCall
	)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := &endlessCall{done: make(chan struct{})}
		mu.Lock()
		i := len(calls)
		calls = append(calls, call)
		mu.Unlock()
		defer close(call.done)
		steps[min(i, len(steps)-1)](w, r.WithContext(context.WithValue(r.Context(), endlessCallKey{}, call)))
	}))
	t.Cleanup(ts.Close)
	return ts.URL, func() []*endlessCall {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
}

func created(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, `{"id":"ch_1"}`)
}

// TestEndlessBodies: a response whose body never ends does not hang the
// Transport when it is discarded (it drains at most 64 KiB, then closes),
// nor when the classifier peeks at it, and reaches the caller intact when it
// is the final answer. Every endless body is cut short by the client: a
// Transport that read one to its end (256 MiB or 10 s) fails the test, and
// one that never closed it would hold its handler until the bound below.
func TestEndlessBodies(t *testing.T) {
	inProgress := endless(http.StatusConflict, map[string]string{"Content-Type": "application/problem+json", "Retry-After": "0"},
		`{"code":"idempotency.in_progress","title":"in progress"}`)
	cases := []struct {
		name    string
		steps   []http.HandlerFunc
		options []resilient.Option
		status  int // the final status
		calls   int
	}{
		{name: "discarded 503", steps: []http.HandlerFunc{endless(503, nil, ""), created}, status: 201, calls: 2},
		{name: "discarded 500 with a long body, three times", steps: []http.HandlerFunc{endless(500, nil, ""), endless(500, nil, ""), endless(500, nil, ""), created}, status: 201, calls: 4},
		{name: "peeked 409 in progress", steps: []http.HandlerFunc{inProgress, created}, status: 201, calls: 2},
		{name: "final 503 reaches the caller", steps: []http.HandlerFunc{endless(503, nil, "")}, options: []resilient.Option{resilient.WithMaxAttempts(2)}, status: 503, calls: 2},
		{name: "final 503 with an attempt timeout", steps: []http.HandlerFunc{endless(503, nil, "")},
			options: []resilient.Option{resilient.WithMaxAttempts(2), resilient.WithAttemptTimeout(2 * time.Second)}, status: 503, calls: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url, calls := scripted(t, c.steps...)
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			client := &http.Client{Transport: resilient.NewTransport(base, retrying(c.options...)...)}
			// Only a bound against a hang: the assertions below hold however
			// slow the machine is.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/charges", strings.NewReader(chargeBody(1)))
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			n, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			assert.Equal(t, c.status, resp.StatusCode)
			assert.Len(t, calls(), c.calls)
			for i, call := range calls() {
				select {
				case <-call.done:
				case <-ctx.Done():
					t.Fatalf("request %d: its handler still runs: the Transport neither read the body nor closed it", i)
				}
				if call.endless {
					assert.True(t, call.cut, "request %d: the endless body was read to its end, not cut short", i)
				}
			}
			if c.status >= 500 {
				assert.Equal(t, int64(1<<20), n, "the caller reads the final body as sent")
			}
		})
	}
}
