package storm

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/fakeserver"
)

func TestReadPolicies(t *testing.T) {
	tests := []struct {
		name, json, err string
		want            []string // strategy names
	}{
		{name: "full", json: `{"policies":[{"name":"ours","max_attempts":3,
			"backoff":{"kind":"decorrelated-jitter","base":"50ms","max":"1s"},
			"retry_control":{"kind":"budget","ratio":0.1},"breaker":{"retries_only":true},
			"hedging":{"delay":"30ms"},"attempt_timeout":"500ms","retry_after_max":"5s"},
			{"name":"lean","retry_control":{"kind":"none"}}]}`, want: []string{"ours", "lean"}},
		{name: "unknown field", json: `{"policies":[{"name":"x","max_attempt":3}]}`, err: "unknown field"},
		{name: "no policy", json: `{"policies":[]}`, err: "no policy"},
		{name: "taken name", json: `{"policies":[{"name":"resilient"}]}`, err: "taken"},
		{name: "twice", json: `{"policies":[{"name":"a"},{"name":"a"}]}`, err: "taken"},
		{name: "no name", json: `{"policies":[{"max_attempts":2}]}`, err: "name"},
		{name: "bad backoff", json: `{"policies":[{"name":"a","backoff":{"kind":"linear","base":"1s","max":"2s"}}]}`, err: "backoff kind"},
		{name: "bad duration", json: `{"policies":[{"name":"a","attempt_timeout":"soon"}]}`, err: "duration"},
		{name: "bad control", json: `{"policies":[{"name":"a","retry_control":{"kind":"magic"}}]}`, err: "retry_control"},
		{name: "zero attempts", json: `{"policies":[{"name":"a","max_attempts":-1}]}`, err: "max_attempts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, tail, err := ReadPolicies(strings.NewReader(tt.json))
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			var names []string
			for i, s := range st {
				names = append(names, s.Name)
				assert.Equal(t, s.Name, tail[i].Name)
				assert.True(t, s.Keyed)
				assert.Contains(t, s.Description, "your policy")
			}
			assert.Equal(t, tt.want, names)
			assert.Equal(t, 3, st[0].MaxAttempts)
			assert.Equal(t, 4, st[1].MaxAttempts)
		})
	}
}

// TestPolicyRunsBesideTheDefaults runs a policy file's strategy in a small
// virtual storm: it is found by name, runs, and its keyed POSTs make no
// duplicate.
func TestPolicyRunsBesideTheDefaults(t *testing.T) {
	own, tail, err := ReadPolicies(strings.NewReader(`{"policies":[{"name":"ours","max_attempts":2}]}`))
	require.NoError(t, err)
	cfg := DefaultConfig()
	cfg.Clients, cfg.Duration, cfg.OutageStart, cfg.OutageEnd, cfg.SteadyDuration = 5, 2*time.Second, 500*time.Millisecond, time.Second, time.Second
	cfg.Ps, cfg.Overload = []float64{1}, nil
	cfg.Own, cfg.Tail.Own = own, tail
	cfg.Strategies = []string{"none", "ours"}
	res := RunVirtual(t, cfg)
	require.Len(t, res, 4)
	for _, r := range res {
		if r.Strategy == "ours" {
			assert.Zero(t, r.Duplicates)
			if r.Scenario == ScenarioSteady { // p = 1: every attempt fails, 2 attempts at most
				assert.LessOrEqual(t, r.Amplification, 2.0)
				assert.Greater(t, r.Amplification, 1.0)
			}
		}
	}
}

func TestPlanTargetCaps(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	cfg := DefaultConfig()
	cfg.Strategies = []string{"none", "resilient"}
	tests := []struct {
		name string
		set  func(*TargetConfig)
		err  string
	}{
		{name: "defaults", set: func(*TargetConfig) {}},
		{name: "rate over the cap", set: func(tc *TargetConfig) { tc.Rate = 500 }, err: "-max-rate"},
		{name: "raised cap", set: func(tc *TargetConfig) { tc.Rate, tc.MaxRate, tc.Burst = 500, 2000, 2 }},
		{name: "burst over the cap", set: func(tc *TargetConfig) { tc.Rate = 50 }, err: "burst"},
		{name: "concurrency over the cap", set: func(tc *TargetConfig) { tc.Concurrency = 65 }, err: "-max-concurrency"},
		{name: "too long", set: func(tc *TargetConfig) { tc.Duration = 20 * time.Second }, err: "-max-time"},
		{name: "not loopback", set: func(tc *TargetConfig) { tc.URL = "http://10.1.2.3:8080/x" }, err: "-i-own-this-target"},
		{name: "not http", set: func(tc *TargetConfig) { tc.URL = "ftp://127.0.0.1/" }, err: "http://"},
		{name: "bad method", set: func(tc *TargetConfig) { tc.Method = "DELETE" }, err: "GET or POST"},
		{name: "zero rate", set: func(tc *TargetConfig) { tc.Rate = 0 }, err: "positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := DefaultTargetConfig()
			tc.URL = srv.URL
			tt.set(&tc)
			p, err := PlanTarget(context.Background(), tc, cfg)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.False(t, p.Admin())
			assert.Contains(t, p.DryRun(), "requests")
			assert.LessOrEqual(t, p.worstTime(), tc.MaxTime)
		})
	}
}

// TestTargetFakeserver storms a fakeserver served on a loopback socket
// through its admin API: every scenario runs, the ledger counts
// duplicates, and the keyed strategies make none.
func TestTargetFakeserver(t *testing.T) {
	fs := fakeserver.New()
	defer fs.Close()
	cfg := DefaultConfig()
	cfg.Strategies = []string{"none", "resilient"}
	tc := DefaultTargetConfig()
	tc.URL, tc.Rate, tc.Duration, tc.OpTimeout = fs.URL, 20, 500*time.Millisecond, 500*time.Millisecond
	p, err := PlanTarget(context.Background(), tc, cfg)
	require.NoError(t, err)
	require.True(t, p.Admin())
	assert.Empty(t, p.Skipped())
	s, err := p.Run(context.Background())
	require.NoError(t, err)
	kinds := map[string]int{}
	for _, r := range s.Results {
		kinds[r.Scenario]++
		assert.False(t, r.NoLedger)
		assert.Zero(t, r.Duplicates, "%s %s", r.Scenario, r.Strategy)
		assert.Equal(t, 10, r.Ops)
		assert.GreaterOrEqual(t, r.ServerRequests, int64(r.Ops-r.Unsent))
	}
	assert.Equal(t, map[string]int{ScenarioSteady: 2, ScenarioOutage: 2, ScenarioOverload: 2}, kinds)
	require.Len(t, s.Tail, 3)
	var b bytes.Buffer
	require.NoError(t, WriteHeadline(&b, s))
	assert.LessOrEqual(t, strings.Count(b.String(), "\n"), HeadlineLines)
	assert.Contains(t, b.String(), "engine: target")
}

// TestTargetPlainServer storms a server without the admin API: only the
// scenarios that need no injection run, the others are named as skipped,
// and duplicates and harm are not counted.
func TestTargetPlainServer(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%5 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	cfg := DefaultConfig()
	cfg.Strategies = []string{"none", "resilient"}
	tc := DefaultTargetConfig()
	tc.URL, tc.Duration, tc.OpTimeout = srv.URL+"/health", 500*time.Millisecond, 500*time.Millisecond
	p, err := PlanTarget(context.Background(), tc, cfg)
	require.NoError(t, err)
	s, err := p.Run(context.Background())
	require.NoError(t, err)
	require.Len(t, s.Results, 4)
	for _, r := range s.Results {
		assert.True(t, r.NoLedger)
		assert.Nil(t, r.Harm)
		assert.Contains(t, []string{ScenarioTarget, ScenarioOverload}, r.Scenario)
	}
	assert.Len(t, s.Tail, 3)
	assert.Contains(t, strings.Join(s.Notes, "\n"), "skipped: injected failures, outage and lost responses")
	var b bytes.Buffer
	require.NoError(t, WriteHeadline(&b, s))
	assert.Contains(t, b.String(), "burst: 4× the offered rate")
	assert.Contains(t, b.String(), "duplicates and harm are not countable")
	assert.Contains(t, b.String(), "harm is not countable here")
	assert.LessOrEqual(t, strings.Count(b.String(), "\n"), HeadlineLines)
	// The clients' count is the server's, but for net/http's own re-sends
	// (which the clients do not see) and cancelled hedges that never
	// arrived.
	var sent int64
	for _, r := range s.Results {
		sent += r.ServerRequests
	}
	for _, r := range s.Tail {
		sent += r.ServerRequests
	}
	assert.InDelta(t, n.Load(), sent, 0.05*float64(n.Load()))
}

// TestTargetInterrupted cancels a -target run once the server has seen
// some requests: the runs that finished are reported, the one under way is
// dropped, and the summary says so.
func TestTargetInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 25 { // in the third run (10 operations per run)
			cancel()
		}
	}))
	defer srv.Close()
	cfg := DefaultConfig()
	cfg.Strategies = []string{"none", "resilient"}
	tc := DefaultTargetConfig()
	tc.URL, tc.Duration, tc.Rate, tc.OpTimeout = srv.URL, 500*time.Millisecond, 20, 500*time.Millisecond
	p, err := PlanTarget(ctx, tc, cfg)
	require.NoError(t, err)
	s, err := p.Run(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Len(t, s.Results, 2)
	assert.Contains(t, strings.Join(s.Notes, "\n"), "INTERRUPTED")
}

func TestWriteHTMLIsSelfContained(t *testing.T) {
	dir := t.TempDir()
	png := filepath.Join(dir, "x.png")
	// A 1×1 PNG.
	require.NoError(t, os.WriteFile(png, []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"+
		"\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82"), 0o644))
	ok := 0.5
	s := Summary{Engine: EngineVirtual, Config: DefaultConfig(), Results: []Result{
		{Strategy: "none", Scenario: ScenarioSteady, Scale: ScalePerClient, P: 0.1, Ops: 10, SuccessRate: 0.9, WarmLoad: &ok},
	}}
	path, err := WriteHTML(dir, s, []string{png, filepath.Join(dir, "x.svg")})
	require.NoError(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	html := string(b)
	assert.Contains(t, html, `src="data:image/png;base64,`)
	assert.NotContains(t, html, `src="http`)
	assert.NotContains(t, html, `x.svg"`)
	assert.Contains(t, html, "render-check")
	for _, c := range resultColumns {
		assert.Contains(t, html, "<dt>"+c[0]+"</dt>")
	}
	var js bytes.Buffer
	require.NoError(t, json.NewEncoder(&js).Encode(s.Results))
	assert.Contains(t, js.String(), `"disturbed":false`)
	assert.Contains(t, js.String(), `"invalid":false`)
}

func TestRunDuplicatesCountsOnlyItsRun(t *testing.T) {
	entry := func(op, run int) fakeserver.Entry {
		b, _ := json.Marshal(map[string]int{"op": op, "run": run})
		return fakeserver.Entry{Object: b}
	}
	ledger := []fakeserver.Entry{entry(1, 0), entry(1, 1), entry(2, 1), entry(2, 1), entry(3, 1), entry(3, 0), {Object: []byte(`{"op":3}`)}}
	assert.Equal(t, 1, runDuplicates(ledger, 1))
	assert.Equal(t, 0, runDuplicates(ledger, 0))
}

// TestHeadlineFitsTheFirstScreen gives the headline more scenarios and
// strategies than fit: it stays within HeadlineLines, shows what it can
// and says how many scenarios it left out.
func TestHeadlineFitsTheFirstScreen(t *testing.T) {
	names := append(HeadlineStrategies(), "own1", "own2", "own3")
	var res []Result
	for i, p := range []float64{0, 0.1, 0.3, 0.5, 0.7, 0.9, 1} {
		for _, n := range names {
			harm := i
			res = append(res, Result{Strategy: n, Scenario: ScenarioSteady, Scale: ScalePerClient, P: p, Ops: 100,
				SuccessRate: 1 - p, Amplification: 1 + p, Harm: &harm, P99Ms: 30})
		}
	}
	res = append(res, Result{Strategy: "none", Scenario: ScenarioOutage, Scale: ScalePerClient, Ops: 100, Invalid: true, Disturbed: true, LateOps: 50})
	tail := []TailResult{{Strategy: "none", Scenario: ScenarioTail, Scale: ScalePerClient, Ops: 10, P99Ms: 200, Load: 1}}
	for _, own := range [][]string{nil, {"own1"}, {"own1", "own2", "own3"}} {
		var b bytes.Buffer
		require.NoError(t, WriteHeadline(&b, Summary{Engine: EngineVirtual, Config: DefaultConfig(), Results: res, Tail: tail, Own: own}))
		out := b.String()
		assert.LessOrEqual(t, strings.Count(out, "\n"), HeadlineLines, out)
		assert.Contains(t, out, "more scenarios in -out DIR")
		assert.Contains(t, out, "1 disturbed, 1 invalid")
		assert.Contains(t, out, "steady, 10 % of requests fail") // the lowest p above 0 comes first after the outage
		for _, n := range own {
			assert.Contains(t, out, "  "+n+" ")
		}
	}
}
