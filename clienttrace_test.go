package resilient_test

// The caller's httptrace.ClientTrace, composed into each attempt's
// (writewatch.go).

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Regression: a caller's ClientTrace is composed into the Transport's shared trace on
// every attempt, so its hooks fire once per attempt so far (1+2+3).
func TestCallerTraceHooksFireOncePerAttempt(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if n.Add(1) < 3 {
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(201)
	}))
	defer srv.Close()
	var wrote, gotConn atomic.Int32
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Add(1) },
		GotConn:      func(httptrace.GotConnInfo) { gotConn.Add(1) },
	})
	client := resilient.Wrap(srv.Client(), fast(resilient.WithDedupingServer(srv.Listener.Addr().String()))...)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, int32(3), n.Load())
	assert.Equal(t, int32(3), wrote.Load(), "caller's WroteRequest once per attempt")
	assert.Equal(t, int32(3), gotConn.Load(), "caller's GotConn once per attempt")
}

// TestCallerTraceDoesNotRace is a race-detector test: run it under -race
// (the test command does). A late WroteRequest of attempt n (the write loop
// still sending the body after an early 503) must not race with the
// Transport composing the caller's trace for attempt n+1. Without -race it
// asserts only what any run must show: every call ends, with the server's
// 503 or a typed *resilient.Error. (How often the caller's hook fired is
// not asserted: a late WroteRequest may land after Do returns.)
func TestCallerTraceDoesNotRace(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503) // answer before reading the body
	}))
	defer srv.Close()
	body := bytes.Repeat([]byte("x"), 900<<10)
	for range 20 {
		var wrote atomic.Int32
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Add(1) },
		})
		client := resilient.Wrap(srv.Client(), fast()...)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(body))
		resp, err := client.Do(req)
		if err == nil {
			assert.Equal(t, 503, resp.StatusCode)
			resp.Body.Close()
		} else {
			var rerr *resilient.Error
			assert.ErrorAs(t, err, &rerr)
		}
	}
}
