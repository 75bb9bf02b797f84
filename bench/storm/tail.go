package storm

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/bench"
	"github.com/resilienthttp/resilient/fakeserver"
)

// ScenarioTail is the tail-latency scenario (TailResult.Scenario): clients
// read one object with GETs from a server without failures whose latency
// has a slow tail (by default 2 % of requests 20× slower), once per tail
// strategy — no hedging, hedging after a fixed delay, hedging after the
// host's recent p95 — each against a fresh server with the same arrivals
// and, since latencies are drawn per operation and attempt, the same
// latency for the k-th request of an operation.
const ScenarioTail = "tail"

// TailConfig configures the tail scenario. Every zero field means its
// default (DefaultTailConfig).
type TailConfig struct {
	// Clients and Rate are the load: Clients clients of Rate GETs per
	// second each. Defaults 25 and 20 (500 operations per second).
	Clients int
	Rate    float64
	// Duration is how long operations are started when Config.Ops is 0.
	// Default 2 s.
	Duration time.Duration
	// Median, Sigma, SlowRate and SlowFactor are the server's latency (see
	// fakeserver.LatencyDist). Defaults 10 ms, 0.2, 0.02, 20.
	Median     time.Duration
	Sigma      float64
	SlowRate   float64
	SlowFactor float64
	// HedgeDelay is the delay of the strategy resilient-hedge-fixed (and of
	// resilient-hedge-p95 until a host has enough latencies for its
	// quantile), and Quantile the quantile of resilient-hedge-p95.
	// Defaults 20 ms (twice the median) and 0.95.
	HedgeDelay time.Duration
	Quantile   float64
	// Strategies names the tail strategies to run (TailStrategyNames,
	// default all).
	Strategies []string
	// Own are tail strategies of the user's own (see ReadPolicies), run
	// after Strategies.
	Own []TailStrategy
}

// DefaultTailConfig returns the defaults of TailConfig.
func DefaultTailConfig() TailConfig {
	return TailConfig{Clients: 25, Rate: 20, Duration: 2 * time.Second, Median: 10 * time.Millisecond, Sigma: 0.2,
		SlowRate: 0.02, SlowFactor: 20, HedgeDelay: 20 * time.Millisecond, Quantile: 0.95, Strategies: TailStrategyNames()}
}

func (tc TailConfig) resolved() TailConfig {
	d := DefaultTailConfig()
	tc.Clients = cmpOr(tc.Clients, d.Clients)
	tc.Rate = cmpOr(tc.Rate, d.Rate)
	tc.Duration = cmpOr(tc.Duration, d.Duration)
	tc.Median = cmpOr(tc.Median, d.Median)
	tc.Sigma = cmpOr(tc.Sigma, d.Sigma)
	tc.SlowRate = cmpOr(tc.SlowRate, d.SlowRate)
	tc.SlowFactor = cmpOr(tc.SlowFactor, d.SlowFactor)
	tc.HedgeDelay = cmpOr(tc.HedgeDelay, d.HedgeDelay)
	tc.Quantile = cmpOr(tc.Quantile, d.Quantile)
	if len(tc.Strategies) == 0 {
		tc.Strategies = d.Strategies
	}
	return tc
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// TailStrategy is a client of the tail scenario.
type TailStrategy struct {
	Name        string
	Description string
	NewClient   func(base http.RoundTripper, tc TailConfig) *http.Client
}

var tailStrategies = []TailStrategy{
	{Name: "none", Description: "net/http, one attempt", NewClient: func(base http.RoundTripper, _ TailConfig) *http.Client {
		return bench.NetHTTP(base)
	}},
	{Name: "resilient", Description: "resilient defaults: no hedging", NewClient: func(base http.RoundTripper, _ TailConfig) *http.Client {
		return resilientClient(base)
	}},
	{Name: "resilient-hedge-fixed", Description: "resilient, one hedge after a fixed delay (TailConfig.HedgeDelay)",
		NewClient: func(base http.RoundTripper, tc TailConfig) *http.Client {
			return resilientClient(base, resilient.WithHedging(resilient.HedgingConfig{Delay: tc.HedgeDelay}))
		}},
	{Name: "resilient-hedge-p95", Description: "resilient, one hedge after the host's recent p95 (TailConfig.Quantile); the fixed delay until the host has 100 latencies",
		NewClient: func(base http.RoundTripper, tc TailConfig) *http.Client {
			return resilientClient(base, resilient.WithHedging(resilient.HedgingConfig{Quantile: tc.Quantile, Delay: tc.HedgeDelay}))
		}},
}

// TailStrategyNames returns the names of the tail strategies, in table order.
func TailStrategyNames() []string {
	out := make([]string, len(tailStrategies))
	for i, s := range tailStrategies {
		out[i] = s.Name
	}
	return out
}

// TailResult is what one strategy did in the tail scenario at one scale.
type TailResult struct {
	Strategy string `json:"strategy"`
	Scenario string `json:"scenario"` // ScenarioTail
	Scale    string `json:"scale"`
	Ops      int    `json:"ops"`
	// ServerRequests is the number of GETs the server saw; Load is
	// ServerRequests ÷ Ops.
	ServerRequests int64   `json:"server_requests"`
	Load           float64 `json:"load"`
	// SuccessRate is the share of operations answered 200.
	SuccessRate float64 `json:"success_rate"`
	// P50Ms, P99Ms and P999Ms are percentiles of the operations' latency
	// in milliseconds.
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	// P99Gain is the p99 of "resilient" (no hedging) at the same scale ÷
	// this p99; 0 without it.
	P99Gain float64 `json:"p99_gain"`
	// Overran reports that the run outlasted its bound and was stopped.
	Overran bool `json:"overran"`
	// LateOps is the number of operations the load generator started more
	// than LateThreshold late, or never started.
	LateOps int `json:"late_ops"`
	// Disturbed and Invalid mean what they mean on Result: the machine, not
	// the strategy, shaped part of the run (LateOps or Overran); beyond
	// Config.MaxDisturbed of the operations late, or overran, its numbers
	// are not to be read.
	Disturbed bool `json:"disturbed"`
	Invalid   bool `json:"invalid"`
}

// TailOnly reports whether c asks for no scenario but the tail one.
func (c Config) TailOnly() bool { return c.NoOutage && len(c.Ps) == 0 && len(c.Overload) == 0 }

// tailRun is one tail strategy at one scale.
type tailRun struct {
	cfg      Config
	tc       TailConfig
	scale    string
	st       TailStrategy
	arrivals []arrival
	virtual  bool
}

func tailPlan(cfg Config) []tailRun {
	tc := cfg.Tail.resolved()
	d := tc.Duration
	if cfg.Ops > 0 {
		d = time.Duration(math.Ceil(float64(cfg.Ops)/float64(tc.Clients)) / tc.Rate * float64(time.Second))
	}
	arrivals := schedule(tc.Clients, tc.Rate, d, cfg.Seed)
	var out []tailRun
	for _, scale := range cfg.Scales {
		for _, name := range tc.Strategies {
			for _, st := range tailStrategies {
				if st.Name == name {
					out = append(out, tailRun{cfg: cfg, tc: tc, scale: scale, st: st, arrivals: arrivals, virtual: cfg.Virtual})
				}
			}
		}
		for _, st := range tc.Own {
			out = append(out, tailRun{cfg: cfg, tc: tc, scale: scale, st: st, arrivals: arrivals, virtual: cfg.Virtual})
		}
	}
	return out
}

// RunTail runs the tail scenario on loopback sockets, every strategy at
// every scale of cfg, one run after the other, and returns their results.
func RunTail(ctx context.Context, cfg Config) []TailResult {
	cfg.Virtual = false
	var out []TailResult
	for _, r := range tailPlan(cfg) {
		out = append(out, r.run(ctx))
	}
	return compareTail(out)
}

// RunTailVirtual is RunTail in simulated time (see RunVirtual): each run in
// its own synctest bubble against the server's in-process transport.
func RunTailVirtual(t *testing.T, cfg Config) []TailResult {
	t.Helper()
	cfg.Virtual = true
	runs := tailPlan(cfg)
	out := make([]TailResult, len(runs))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	t.Run("tail", func(t *testing.T) {
		for i, r := range runs {
			t.Run(r.scale+"/"+r.st.Name, func(t *testing.T) {
				synctest.Test(t, func(*testing.T) { out[i] = r.run(context.Background()) })
			})
		}
	})
	return compareTail(out)
}

// tailScenario is the fake server's scenario: GET /v1/items/{id} answers
// after a latency drawn per operation and attempt, without failures.
func (r tailRun) tailScenario() fakeserver.Scenario {
	return fakeserver.Scenario{Seed: r.cfg.Seed, Routes: []fakeserver.Route{{
		Match: "GET /v1/items/{id}", Draw: fakeserver.DrawOperation, OperationHeader: OperationHeader,
		Latency: &fakeserver.LatencyDist{Median: fakeserver.Duration(r.tc.Median), Sigma: r.tc.Sigma,
			SlowRate: r.tc.SlowRate, SlowFactor: r.tc.SlowFactor},
	}}}
}

// run runs one strategy at one scale against a fresh server holding one
// object, which every operation reads.
func (r tailRun) run(ctx context.Context) TailResult {
	srv := fakeserver.NewUnstarted(fakeserver.WithScenario(r.tailScenario()))
	defer srv.Close()
	var gets atomic.Int64
	var base, setup http.RoundTripper
	var tn *turns
	url := "http://fakeserver.test"
	if r.virtual {
		tn = newTurns(r.cfg.Seed, len(r.arrivals))
		setup = srv.Transport()
		base = turnTransport{rt: countGets{srv.Transport(), &gets}, turns: tn}
	} else {
		h := srv.Handler()
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Method == http.MethodGet {
				gets.Add(1)
			}
			h.ServeHTTP(w, req)
		}))
		defer ts.Close()
		defer srv.Close() // first: it ends requests still being served
		url = ts.URL
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 1024
		defer tr.CloseIdleConnections()
		base, setup = tr, tr
	}
	loc, err := createItem(ctx, setup, url)
	res := TailResult{Strategy: r.st.Name, Scenario: ScenarioTail, Scale: r.scale, Ops: len(r.arrivals)}
	if err != nil {
		res.Overran, res.Disturbed, res.Invalid = true, true, true
		return res
	}
	gets.Store(0)
	n := r.tc.Clients
	if r.scale == ScaleShared {
		n = 1
	}
	clients := make([]*http.Client, n)
	for i := range clients {
		clients[i] = r.st.NewClient(clientBase(base, r.cfg.Seed, i), r.tc)
	}
	span := r.arrivals[len(r.arrivals)-1].at + r.cfg.OpTimeout + time.Second
	ctx, cancel := context.WithTimeout(ctx, span+runGrace)
	defer cancel()
	lat := make([]time.Duration, len(r.arrivals))
	ok := make([]bool, len(r.arrivals))
	var wg sync.WaitGroup
	start := time.Now()
	started := 0
	if tn != nil {
		started = len(r.arrivals)
		tn.drive(start, r.arrivals, nil, func(i int) {
			lat[i], ok[i] = r.get(ctx, clients[r.arrivals[i].client%n], url+loc, i)
		})
	}
	for i, a := range r.arrivals {
		if tn != nil {
			break // drive ran them
		}
		if d := time.Until(start.Add(a.at)); d > 0 && !sleep(ctx, d) {
			break
		}
		if time.Since(start)-a.at > LateThreshold {
			res.LateOps++
		}
		started++
		c := clients[a.client%n]
		wg.Go(func() { lat[i], ok[i] = r.get(ctx, c, url+loc, i) })
	}
	wg.Wait()
	res.Overran = ctx.Err() != nil
	res.LateOps += len(r.arrivals) - started
	res.Disturbed = res.Overran || res.LateOps > 0
	res.Invalid = res.Overran || float64(res.LateOps) > r.cfg.MaxDisturbed*float64(res.Ops)
	res.ServerRequests = gets.Load()
	res.Load = float64(res.ServerRequests) / float64(res.Ops)
	good := 0
	for _, o := range ok {
		if o {
			good++
		}
	}
	res.SuccessRate = float64(good) / float64(res.Ops)
	slices.Sort(lat)
	res.P50Ms, res.P99Ms, res.P999Ms = rankMs(lat, 0.5), rankMs(lat, 0.99), rankMs(lat, 0.999)
	return res
}

// get reads the object as operation i and returns its latency and whether
// it got a 200.
func (r tailRun) get(ctx context.Context, c *http.Client, url string, i int) (time.Duration, bool) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.OpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, false
	}
	req.Header.Set(OperationHeader, strconv.Itoa(i))
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return time.Since(t0), false
	}
	_, rerr := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(t0), rerr == nil && resp.StatusCode == http.StatusOK
}

// createItem creates the object the operations read and returns its path.
func createItem(ctx context.Context, rt http.RoundTripper, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/items", strings.NewReader(`{"name":"tail"}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusCreated || loc == "" {
		return "", fmt.Errorf("storm: creating the tail object: %s", resp.Status)
	}
	return loc, nil
}

// countGets counts the GETs it sends through rt.
type countGets struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countGets) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		c.n.Add(1)
	}
	return c.rt.RoundTrip(req)
}

// rankMs is the q-quantile of sorted latencies, in milliseconds.
func rankMs(lat []time.Duration, q float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(lat)))) - 1
	return float64(lat[max(i, 0)]) / float64(time.Millisecond)
}

// compareTail sets each result's P99Gain against "resilient" at its scale.
func compareTail(res []TailResult) []TailResult {
	for i := range res {
		for _, b := range res {
			if b.Strategy == "resilient" && b.Scale == res[i].Scale && res[i].P99Ms > 0 {
				res[i].P99Gain = b.P99Ms / res[i].P99Ms
			}
		}
	}
	return res
}
