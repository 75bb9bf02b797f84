package fakeserver_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/pushback"
)

// TestPushbackMounted checks WithPushback, over a socket and in-process: the
// server's injected failures come from behind the middleware (it counts them
// and adds pushback to them once the budget is exhausted), a retry over the
// budget gets the middleware's answer and never reaches the API, and the
// server counts every request that arrived.
func TestPushbackMounted(t *testing.T) {
	for _, cn := range conns() {
		t.Run(cn.name, func(t *testing.T) {
			srv, c, base := cn.start(t,
				fakeserver.WithPushback(pushback.Config{Ratio: 0.5, MinPerSecond: -1}),
				fakeserver.WithRoute(fakeserver.Route{Match: "POST /v1/charges", Script: []fakeserver.Fault{
					{Kind: fakeserver.FaultNone},
					{Kind: fakeserver.FaultStatus, Status: http.StatusServiceUnavailable},
				}}))

			// A success earns half a retry (Ratio 0.5, no floor): the allowance is 0.5.
			ok := mustDo(t, c, base, req{key: "k0", headers: map[string]string{"Retry-Attempt": "0"}})
			require.Equal(t, http.StatusCreated, ok.status)
			assert.Empty(t, ok.header.Get("X-Should-Retry"))

			// The scripted 503 comes from behind the middleware: it is a
			// failure, sent without pushback (the retry it invites fits).
			fail := mustDo(t, c, base, req{key: "k1", headers: map[string]string{"Retry-Attempt": "0"}})
			require.Equal(t, http.StatusServiceUnavailable, fail.status)
			assert.Empty(t, fail.header.Get("X-Should-Retry"))

			// The retry fits (0 < 0.5) and succeeds: the allowance is 1, used up.
			retry := mustDo(t, c, base, req{key: "k1", headers: map[string]string{"Retry-Attempt": "1"}})
			require.Equal(t, http.StatusCreated, retry.status)
			before := srv.Stats()
			refused := mustDo(t, c, base, req{key: "k2", headers: map[string]string{"Retry-Attempt": "1"}})
			require.Equal(t, http.StatusServiceUnavailable, refused.status)
			assert.Equal(t, "false", refused.header.Get("X-Should-Retry"))
			assert.Contains(t, []string{"1", "2"}, refused.header.Get("Retry-After"))
			assert.Equal(t, "k2", refused.header.Get("Idempotency-Key"), "the key is echoed on pushback too")
			var p struct{ Type string }
			require.NoError(t, json.Unmarshal([]byte(refused.body), &p))
			assert.Equal(t, pushback.ProblemType, p.Type)
			after := srv.Stats()
			assert.Equal(t, before.Requests+1, after.Requests, "a refused request is counted as it arrives")
			assert.Equal(t, before.Retries+1, after.Retries)
			assert.Equal(t, before.Effects, after.Effects, "and never reaches the API")
			assert.Equal(t, int64(1), after.PushbackRefused)

			pb, ok2 := srv.PushbackStats()
			require.True(t, ok2)
			assert.Equal(t, uint64(2), pb.FirstAttempts)
			assert.Equal(t, uint64(2), pb.Retries)
			assert.Equal(t, uint64(1), pb.RetriesShed)
			assert.Equal(t, uint64(2), pb.Healthy)
			assert.Equal(t, uint64(1), pb.Failures)

			// The admin endpoints are not behind the middleware.
			admin := mustDo(t, c, base, req{method: http.MethodGet, path: "/_fake/stats", headers: map[string]string{"Retry-Attempt": "1"}})
			assert.Equal(t, http.StatusOK, admin.status)

			srv.Reset()
			pb, _ = srv.PushbackStats()
			assert.Zero(t, pb.Retries, "Reset starts the budget over")
		})
	}
}

// TestPushbackHintsInjectedFailures checks that, at total failure with no
// budget, the server's injected failures — a status and a dropped
// connection — are failures to the middleware, and its answers carry
// pushback.
func TestPushbackHintsInjectedFailures(t *testing.T) {
	srv := fakeserver.NewUnstarted(
		fakeserver.WithPushback(pushback.Config{Ratio: -1, MinPerSecond: -1}),
		fakeserver.WithRoute(fakeserver.Route{Match: "POST /v1/charges", Script: []fakeserver.Fault{
			{Kind: fakeserver.FaultLostResponse},
			{Kind: fakeserver.FaultStatus, Status: http.StatusInternalServerError},
		}}))
	t.Cleanup(srv.Close)
	c := &http.Client{Transport: srv.Transport()}
	_, err := do(t, c, inProcessURL, req{key: "a", headers: map[string]string{"Retry-Attempt": "0"}})
	require.Error(t, err, "the lost response")
	r := mustDo(t, c, inProcessURL, req{key: "b", headers: map[string]string{"Retry-Attempt": "0"}})
	assert.Equal(t, http.StatusInternalServerError, r.status)
	assert.Equal(t, "false", r.header.Get("X-Should-Retry"))
	pb, _ := srv.PushbackStats()
	assert.Equal(t, uint64(2), pb.Failures)
	assert.Equal(t, uint64(1), pb.Hinted)
	assert.Equal(t, int64(1), srv.Stats().PushbackHinted)
}

// TestNoPushbackByDefault checks that a server without WithPushback has no
// middleware.
func TestNoPushbackByDefault(t *testing.T) {
	srv := fakeserver.NewUnstarted()
	t.Cleanup(srv.Close)
	_, ok := srv.PushbackStats()
	assert.False(t, ok)
	c := &http.Client{Transport: srv.Transport()}
	for range 20 {
		r := mustDo(t, c, inProcessURL, req{headers: map[string]string{"Retry-Attempt": "3"}})
		assert.Equal(t, http.StatusCreated, r.status)
	}
}
