package bench

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestFailsafeClosesResponses guards the fix in Failsafe: 20 operations that
// fail every attempt with 503 reuse one connection, so no response body is
// left open (failsafe-go alone opens one connection per attempt).
func TestFailsafeClosesResponses(t *testing.T) {
	var conns, reqs atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	c := Failsafe(tr)
	for range 20 {
		resp, err := c.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("status %d: want an error after the retries", resp.StatusCode)
		}
	}
	if got := reqs.Load(); got != 60 {
		t.Errorf("server saw %d requests, want 60 (3 attempts each)", got)
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("%d connections for 60 sequential requests, want 1", got)
	}
}
