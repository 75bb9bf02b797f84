package resilient_test

import (
	"context"
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
