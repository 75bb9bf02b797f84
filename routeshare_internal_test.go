package resilient

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// routesServer answers POST /v1/a with 503 always (a dead route) and
// POST /v1/b with 201, but the first attempt of every fourth operation of
// /v1/b (by its X-Op header) with 503.
type routesServer struct {
	mu   sync.Mutex
	sent map[string]int // requests by path
}

func (s *routesServer) RoundTrip(req *http.Request) (*http.Response, error) {
	io.Copy(io.Discard, req.Body)
	req.Body.Close()
	s.mu.Lock()
	s.sent[req.URL.Path]++
	s.mu.Unlock()
	code := http.StatusCreated
	op, _ := strconv.Atoi(req.Header.Get("X-Op"))
	switch {
	case req.URL.Path == "/v1/a":
		code = http.StatusServiceUnavailable
	case op%4 == 0 && canonical(req.Header).Get("Retry-Attempt") == "":
		code = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: code, Header: http.Header{"Idempotency-Key": {canonical(req.Header).Get("Idempotency-Key")}},
		Body: http.NoBody, Request: req}, nil
}

// canonical reads a header field whatever its spelling (the Transport sends its
// key as "idempotency-key").
func canonical(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		out[http.CanonicalHeaderKey(k)] = v
	}
	return out
}

// TestDeadRouteDoesNotStarveItsNeighbour: on one host, a route that fails
// every request spends at most the host's bucket once, then stops
// retrying; the retries of a live route, paid for by its own healthy
// answers, all go out and succeed (but while the dead route's first take
// holds the bucket).
func TestDeadRouteDoesNotStarveItsNeighbour(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &routesServer{sent: map[string]int{}}
		tr := NewTransport(srv, WithDedupingServer("api.test"))
		const ops = 400
		failedB := 0
		for i := range ops {
			path := "/v1/a"
			if i%2 == 1 {
				path = "/v1/b"
			}
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://api.test"+path, strings.NewReader("{}"))
			req.Header.Set("X-Op", strconv.Itoa(i/2))
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			if path == "/v1/b" && resp.StatusCode != http.StatusCreated && i > 20 {
				failedB++ // after the dead route's first take of the bucket
			}
			time.Sleep(10 * time.Millisecond)
		}
		assert.Zero(t, failedB, "every retry of the live route went out")
		h, _ := tr.hosts.M.Load("api.test")
		capacity := int(h.(*host.State).Tokens.Capacity(time.Now().UnixNano()) / host.TokenUnit)
		assert.LessOrEqual(t, srv.sent["/v1/a"], ops/2+capacity, "the dead route retried at most the bucket's capacity")
	})
}
