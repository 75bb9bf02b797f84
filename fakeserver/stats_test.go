package fakeserver_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/fakeserver"
)

func TestAttemptsAreLabelledByRetryAttempt(t *testing.T) {
	s, c, base := conns()[1].start(t)
	for i, h := range []string{"0", "1", "2", "", "x", "-1", "0"} {
		hs := map[string]string{}
		if h != "" {
			hs["Retry-Attempt"] = h
		}
		mustDo(t, c, base, req{key: strconv.Itoa(i), headers: hs})
	}
	st := s.Stats()
	assert.EqualValues(t, 7, st.Requests)
	assert.EqualValues(t, 2, st.FirstAttempts)
	assert.EqualValues(t, 2, st.Retries)
	assert.EqualValues(t, 3, st.UnlabeledAttempts)
}

func TestRequestsPerSecond(t *testing.T) {
	clk := newClock()
	s, c, base := conns()[1].start(t, fakeserver.WithClock(clk.Now))
	send := func(n int) {
		for range n {
			mustDo(t, c, base, req{method: http.MethodGet, path: "/v1/charges/none"})
		}
	}
	send(3)
	clk.Advance(999 * time.Millisecond)
	send(1)
	clk.Advance(2 * time.Second)
	send(2)
	st := s.Stats()
	assert.Equal(t, []int{4, 0, 2}, st.RequestsPerSecond)
	assert.Equal(t, clk.Now().Add(-2999*time.Millisecond), st.Started)
}

func TestStatsCountEverything(t *testing.T) {
	s, c, base := conns()[1].start(t, fakeserver.WithRequireKey(true))
	require.NoError(t, s.Enqueue("*",
		fakeserver.Fault{Kind: fakeserver.FaultStatus},
		fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: 429},
		fakeserver.Fault{Kind: fakeserver.FaultMalformedBody},
	))
	mustDo(t, c, base, req{key: "a"})                       // 503
	mustDo(t, c, base, req{key: "a"})                       // 429
	mustDo(t, c, base, req{key: "a"})                       // 201, malformed
	mustDo(t, c, base, req{key: "a"})                       // replay
	mustDo(t, c, base, req{key: "a", body: `{"amount":1}`}) // mismatch
	mustDo(t, c, base, req{})                               // missing key
	mustDo(t, c, base, req{key: "b", body: "nope"})         // bad JSON

	st := s.Stats()
	assert.EqualValues(t, 7, st.Requests)
	assert.Equal(t, 1, st.Effects)
	assert.EqualValues(t, 1, st.Replays)
	assert.EqualValues(t, 1, st.Mismatches)
	assert.EqualValues(t, 1, st.MissingKeys)
	assert.EqualValues(t, 1, st.BadRequests)
	assert.Equal(t, map[string]int64{"status": 2, "malformed_body": 1}, st.Faults)
	assert.Equal(t, 1, st.Records)
	assert.Zero(t, st.InFlight)
	assert.EqualValues(t, 1, st.MaxInFlight)

	s.Reset()
	st = s.Stats()
	assert.Zero(t, st.Requests)
	assert.Zero(t, st.Effects)
	assert.Zero(t, st.Records)
	assert.Empty(t, st.Faults)
	assert.Empty(t, s.Ledger())
	r := mustDo(t, c, base, req{key: "a"})
	assert.Equal(t, "stored", r.header.Get("Idempotency-Status"), "Reset forgot the key")
}
