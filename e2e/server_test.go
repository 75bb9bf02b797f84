package e2e

import (
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/resilienthttp/resilient/fakeserver"
)

// startAPI starts a fake server with sc behind a real socket on 127.0.0.1,
// its handler wrapped by wrap when set, and returns it with its base URL.
// Both are closed when the test ends.
func startAPI(t *testing.T, sc fakeserver.Scenario, wrap func(http.Handler) http.Handler) (*fakeserver.Server, string) {
	t.Helper()
	fs := fakeserver.NewUnstarted(fakeserver.WithScenario(sc))
	h := fs.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.Start()
	// Outage windows count from the scenario's start: start it now.
	if err := fs.SetScenario(sc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		fs.Close()
		ts.Close()
	})
	return fs, ts.URL
}

// resetAfterEffect returns a middleware that lets the fake server serve a
// share p of the API requests to the end — the effect committed and its
// idempotency record completed — into a recorder, then resets the client's
// connection (RST, SO_LINGER 0) instead of sending the response: a reset
// after the request was sent and executed.
// Each reset adds one to hits.
func resetAfterEffect(p float64, seed uint64, hits *atomic.Int64) func(http.Handler) http.Handler {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0xe2e))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hit := strings.HasPrefix(r.URL.Path, "/v1/") && rng.Float64() < p
			mu.Unlock()
			if !hit {
				next.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(httptest.NewRecorder(), r)
			hits.Add(1)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(http.ErrAbortHandler)
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = conn.Close()
		})
	}
}

// chargesRoute is a scenario whose POST /v1/charges draws its faults from mix.
func chargesRoute(mix ...fakeserver.Fault) fakeserver.Scenario {
	return fakeserver.Scenario{Seed: 8, Routes: []fakeserver.Route{{Match: "POST /v1/charges", Mix: mix}}}
}

// scaled returns n, or a fraction of it (at least 40) under -short.
func scaled(n int) int {
	if testing.Short() {
		return max(n/8, 40)
	}
	return n
}

// chain returns a middleware that applies inner, then outer (outer sees the
// request first); either may be nil.
func chain(inner, outer func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	if inner == nil || outer == nil {
		if inner == nil {
			return outer
		}
		return inner
	}
	return func(h http.Handler) http.Handler { return outer(inner(h)) }
}
