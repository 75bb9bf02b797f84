package fakeserver_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/fakeserver"
)

// TestReadmeExamplesParse keeps the README honest: its scenario examples parse
// and its stats example has exactly the fields of Stats.
func TestReadmeExamplesParse(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(readme, -1)
	require.GreaterOrEqual(t, len(blocks), 2)
	for _, b := range blocks {
		if bytes.Contains(b[1], []byte(`"started"`)) {
			dec := json.NewDecoder(bytes.NewReader(b[1]))
			dec.DisallowUnknownFields()
			var st fakeserver.Stats
			require.NoError(t, dec.Decode(&st), "stats example")
			continue
		}
		sc, err := fakeserver.ParseScenario(b[1])
		require.NoError(t, err, string(b[1]))
		assert.NotZero(t, sc.Seed)
	}
}

func TestScenarioJSONRoundTrip(t *testing.T) {
	sc := fakeserver.Scenario{
		Seed: 9, Mode: fakeserver.ModeStripe, MismatchStatus: 409, TTL: fakeserver.Duration(time.Hour),
		Outages:  []fakeserver.Outage{{Start: ms(1000), End: ms(2500), Status: 502}},
		Capacity: &fakeserver.Capacity{MaxConcurrent: 3, ServiceTime: ms(20)},
		Routes: []fakeserver.Route{{
			Match:  "POST /v1/charges",
			Script: []fakeserver.Fault{{Kind: fakeserver.FaultStatus, Status: 429, RetryAfter: ms(1000), Headers: map[string]string{"X-A": "b"}}},
			Mix:    []fakeserver.Fault{{Kind: fakeserver.FaultReset, Probability: 0.5}},
		}},
	}
	b, err := json.Marshal(sc)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"ttl":"1h0m0s"`)
	got, err := fakeserver.ParseScenario(b)
	require.NoError(t, err)
	assert.Equal(t, sc, got)

	s := fakeserver.NewUnstarted(fakeserver.WithScenario(sc))
	defer s.Close()
	assert.Equal(t, sc, s.Scenario())
	sc.Routes[0].Script[0].Headers["X-A"] = "changed"
	assert.Equal(t, "b", s.Scenario().Routes[0].Script[0].Headers["X-A"], "the server keeps its own copy")
}

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{`"250ms"`, 250 * time.Millisecond, false},
		{`"24h"`, 24 * time.Hour, false},
		{`1.5`, 1500 * time.Millisecond, false},
		{`0`, 0, false},
		{`"soon"`, 0, true},
		{`true`, 0, true},
		{`1e300`, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var d fakeserver.Duration
			err := json.Unmarshal([]byte(tt.in), &d)
			if tt.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, time.Duration(d))
		})
	}
}

func TestScenarioValidation(t *testing.T) {
	tests := []struct {
		json string
		want string // in the error
	}{
		{`{"mode":"strict"}`, "mode"},
		{`{"mismatch_status":400}`, "mismatch_status"},
		{`{"ttl":"-1s"}`, "negative"},
		{`{"outages":[{"start":"2s","end":"1s"}]}`, "outages[0]"},
		{`{"outages":[{"start":"0s","end":"1s","status":99}]}`, "outages[0].status"},
		{`{"capacity":{"max_concurrent":0}}`, "capacity.max_concurrent"},
		{`{"routes":[{"match":"POST charges"}]}`, "routes[0].match"},
		{`{"routes":[{"failure_rate":1.5}]}`, "routes[0].failure_rate"},
		{`{"routes":[{"script":[{"kind":"explode"}]}]}`, "routes[0].script[0]"},
		{`{"routes":[{"failure_rate":0.6,"mix":[{"kind":"reset","probability":0.6}]}]}`, "add up"},
		{`{"routes":[{"mix":[{"kind":"status","headers":{"Bad Name":"x"}}]}]}`, "header"},
		{`{"sede":1}`, "unknown field"},
		{`{} {}`, "trailing"},
		{`[]`, "scenario"},
	}
	for _, tt := range tests {
		t.Run(tt.json, func(t *testing.T) {
			_, err := fakeserver.ParseScenario([]byte(tt.json))
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "fakeserver: "), err.Error())
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestInvalidOptionsPanicAndSetScenarioDoesNot(t *testing.T) {
	assert.PanicsWithValue(t, "fakeserver: scenario: mismatch_status: 418 (want 409 or 422)", func() {
		fakeserver.NewUnstarted(fakeserver.WithMismatchStatus(418))
	})
	s := fakeserver.NewUnstarted(fakeserver.WithSeed(1))
	defer s.Close()
	require.Error(t, s.SetScenario(fakeserver.Scenario{Mode: "nope"}))
	assert.EqualValues(t, 1, s.Scenario().Seed, "a failed SetScenario changes nothing")
	require.Error(t, s.Enqueue("*", fakeserver.Fault{Kind: "nope"}))
	require.Error(t, s.Enqueue("no-slash", fakeserver.Fault{}))
}

func TestRouteMatching(t *testing.T) {
	tests := []struct {
		match  string
		method string
		path   string
		hit    bool
	}{
		{"*", "POST", "/v1/charges", true},
		{"", "GET", "/v1/charges/ch_1", true},
		{"POST /v1/charges", "POST", "/v1/charges", true},
		{"post /v1/charges", "POST", "/v1/charges/", true},
		{"POST /v1/charges", "POST", "/v1/refunds", false},
		{"POST /v1/charges", "GET", "/v1/charges/ch_1", false},
		{"/v1/{collection}", "POST", "/v1/refunds", true},
		{"GET /v1/{c}/{id}", "GET", "/v1/refunds/rf_1", true},
		{"GET /v1/{c}/{id}", "GET", "/v1/refunds", false},
		{"* /v1/*", "POST", "/v1/x", true},
	}
	for _, tt := range tests {
		t.Run(tt.match+" "+tt.method+" "+tt.path, func(t *testing.T) {
			s := fakeserver.NewUnstarted(fakeserver.WithRoute(fakeserver.Route{
				Match: tt.match, Script: []fakeserver.Fault{{Kind: fakeserver.FaultStatus, Status: 418}},
			}))
			defer s.Close()
			r := mustDo(t, &http.Client{Transport: s.Transport()}, inProcessURL, req{method: tt.method, path: tt.path})
			assert.Equal(t, tt.hit, r.status == 418, "status %d", r.status)
		})
	}
}
