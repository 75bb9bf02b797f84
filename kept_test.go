package resilient_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/require"
)

// Regression: a 503 with a body over 64 KiB, a client limited to one
// connection per host (http.Transport.MaxConnsPerHost = 1). The kept
// answer's connection was held (drained to 64 KiB, not closed) until the
// retry returned, and the retry waited for that connection: a hang until
// the deadline. The kept answer is now closed as the retry goes out.
func TestKeptAnswerFreesItsConnectionForTheRetry(t *testing.T) {
	var n atomic.Int32
	big := strings.Repeat("x", 100<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(503)
			io.WriteString(w, big)
			return
		}
		w.WriteHeader(200)
	}))
	defer srv.Close()
	for _, wrapped := range []bool{false, true} {
		n.Store(0)
		base := &http.Transport{MaxConnsPerHost: 1}
		var rt http.RoundTripper = base
		if wrapped {
			rt = resilient.NewTransport(base, resilient.WithBackoff(zeroBackoff{}))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		cancel()
		require.NoError(t, err, "wrapped=%v", wrapped)
		t.Logf("wrapped=%v status %d", wrapped, resp.StatusCode)
		resp.Body.Close()
		base.CloseIdleConnections()
	}
}

// Regression: a retryable answer whose body streams (first bytes, then
// more later): when the retry is then not sent (here GetBody fails), the
// caller reads the first bytes as they come, as from a bare client. The
// kept body used to block its first Read until 64 KiB or EOF.
func TestKeptAnswerShowsItsFirstBytesAtOnce(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(503)
		w.Write([]byte("first"))
		http.NewResponseController(w).Flush()
		<-release
	}))
	defer srv.Close()
	defer close(release)
	for _, wrapped := range []bool{false, true} {
		var rt http.RoundTripper = &http.Transport{}
		if wrapped {
			rt = resilient.NewTransport(rt, resilient.WithBackoff(zeroBackoff{}))
		}
		calls := 0
		req, _ := http.NewRequest(http.MethodPut, srv.URL, bytes.NewReader([]byte("x")))
		req.GetBody = func() (io.ReadCloser, error) {
			calls++
			if calls > 0 {
				return nil, errors.New("gone")
			}
			return io.NopCloser(bytes.NewReader([]byte("x"))), nil
		}
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		require.Equal(t, 503, resp.StatusCode)
		got := make(chan string, 1)
		go func() {
			b := make([]byte, 16)
			n, _ := resp.Body.Read(b)
			got <- string(b[:n])
		}()
		select {
		case s := <-got:
			require.Equal(t, "first", s)
		case <-time.After(2 * time.Second):
			resp.Body.Close()
			<-got
			t.Fatalf("wrapped=%v: first Read of the 503's body blocked (bare returns %q at once)", wrapped, "first")
		}
		resp.Body.Close()
	}
}
