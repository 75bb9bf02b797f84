package retryablehttpadapter_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/retryablehttpadapter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// step is one scripted server answer; reset drops the connection after the
// request was read, with no response.
type step struct {
	status int
	header map[string]string
	reset  bool
}

// scripted is an httptest server on 127.0.0.1 that answers from a script
// (then repeats the last step) and counts the requests that reached it.
type scripted struct {
	*httptest.Server
	mu    sync.Mutex
	steps []step
	hits  int
}

func newScripted(t *testing.T, steps ...step) *scripted {
	t.Helper()
	s := &scripted{steps: steps}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *scripted) serve(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	st := s.steps[min(s.hits, len(s.steps)-1)]
	s.hits++
	s.mu.Unlock()
	if st.reset {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range st.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(st.status)
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

// newClient returns a retryablehttp.Client wired to the adapters, with small
// waits and a fresh connection per attempt (so that net/http never re-sends
// a request on its own and the server's count is exact).
func newClient(withTransport bool) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryMax = 3
	c.RetryWaitMin = time.Millisecond
	c.RetryWaitMax = 5 * time.Millisecond
	var rt http.RoundTripper = &http.Transport{DisableKeepAlives: true}
	if withTransport {
		rt = retryablehttpadapter.Transport(rt)
	}
	c.HTTPClient = &http.Client{Transport: rt}
	c.CheckRetry = retryablehttpadapter.CheckRetry(nil)
	c.Backoff = retryablehttpadapter.Backoff(nil)
	return c
}

func TestClient(t *testing.T) {
	t.Parallel()
	ok := step{status: http.StatusCreated}
	tests := []struct {
		name          string
		method        string
		key           bool
		withTransport bool
		steps         []step
		wantHits      int
		wantStatus    int // 0: an error is expected
		// minElapsed is a lower bound on the time Do took (a wait the
		// server asked for): a busy machine only makes it longer.
		minElapsed time.Duration
	}{
		{name: "422 is not retried", method: http.MethodPost, key: true, withTransport: true,
			steps: []step{{status: http.StatusUnprocessableEntity}}, wantHits: 1, wantStatus: 422},
		{name: "400 is not retried", method: http.MethodGet, withTransport: true,
			steps: []step{{status: http.StatusBadRequest}}, wantHits: 1, wantStatus: 400},
		{name: "503 then created", method: http.MethodPost, key: true, withTransport: true,
			steps: []step{{status: 503}, {status: 503}, ok}, wantHits: 3, wantStatus: 201},
		{name: "503 with Retry-After 1 waits at least 1 s", method: http.MethodPost, key: true, withTransport: true,
			steps: []step{{status: 503, header: map[string]string{"Retry-After": "1"}}, ok}, wantHits: 2, wantStatus: 201,
			minElapsed: time.Second},
		// At once: not retried, so go-retryablehttp never sleeps (one hit).
		{name: "429 with Retry-After over the maximum is returned at once", method: http.MethodGet, withTransport: true,
			steps: []step{{status: 429, header: map[string]string{"Retry-After": "40"}}}, wantHits: 1, wantStatus: 429},
		{name: "X-Should-Retry false wins over 503", method: http.MethodGet, withTransport: true,
			steps: []step{{status: 503, header: map[string]string{"X-Should-Retry": "false"}}}, wantHits: 1, wantStatus: 503},
		{name: "500 on an unkeyed POST is not retried", method: http.MethodPost, withTransport: true,
			steps: []step{{status: 500}, ok}, wantHits: 1, wantStatus: 500},
		{name: "500 on a keyed POST is retried", method: http.MethodPost, key: true, withTransport: true,
			steps: []step{{status: 500}, ok}, wantHits: 2, wantStatus: 201},
		{name: "unkeyed POST reset after send is not retried", method: http.MethodPost, withTransport: true,
			steps: []step{{reset: true}, ok}, wantHits: 1},
		{name: "keyed POST reset after send is retried", method: http.MethodPost, key: true, withTransport: true,
			steps: []step{{reset: true}, ok}, wantHits: 2, wantStatus: 201},
		{name: "keyed POST reset without Transport is not retried", method: http.MethodPost, key: true,
			steps: []step{{reset: true}, ok}, wantHits: 1},
		{name: "GET reset without Transport is retried", method: http.MethodGet,
			steps: []step{{reset: true}, ok}, wantHits: 2, wantStatus: 201},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newScripted(t, tt.steps...)
			c := newClient(tt.withTransport)
			req, err := retryablehttp.NewRequestWithContext(context.Background(), tt.method, srv.URL+"/v1/charges", strings.NewReader(`{"amount":1}`))
			require.NoError(t, err)
			if tt.key {
				req.Header.Set(resilient.DefaultKeyHeader, "charge-1")
			}
			start := time.Now()
			resp, err := c.Do(req)
			elapsed := time.Since(start)
			if tt.wantStatus == 0 {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, tt.wantStatus, resp.StatusCode)
			}
			assert.Equal(t, tt.wantHits, srv.count(), "requests that reached the server")
			assert.GreaterOrEqual(t, elapsed, tt.minElapsed)
		})
	}
}

// TestConnectionRefusedIsRetried: nothing was sent, so even an unkeyed POST
// is retried.
func TestConnectionRefusedIsRetried(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	c := newClient(true)
	c.RetryMax = 2
	var attempts atomic.Int32
	c.RequestLogHook = func(retryablehttp.Logger, *http.Request, int) { attempts.Add(1) }
	_, err = c.Post("http://"+addr+"/v1/charges", "application/json", strings.NewReader(`{}`))
	require.Error(t, err)
	assert.Equal(t, int32(3), attempts.Load())
}
