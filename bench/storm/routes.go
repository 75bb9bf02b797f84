package storm

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/bench"
	"github.com/resilienthttp/resilient/fakeserver"
)

// ScenarioRoutes is the scenario of two routes on one host (RoutesResult):
// keyed POSTs alternate between POST /v1/a and POST /v1/b of one server,
// /v1/a failing with probability DeadP (a dead route: 1 by default) and
// /v1/b with probability LiveP (0.2), in simulated time. It shows whether
// the retries of a dead route starve those of a live one on the same host:
// /v1/b's success beside /v1/a is compared with its success alone (the
// same operations of /v1/b, with /v1/a's left out), and the host's load
// when both routes are dead shows the outage bound.
const ScenarioRoutes = "routes"

// RoutesConfig configures the routes scenario. Every zero field means its
// default (DefaultRoutesConfig).
type RoutesConfig struct {
	// Clients and Rate are the load: Clients clients of Rate operations per
	// second each, alternating between the routes. Defaults 25 and 10.
	Clients int
	Rate    float64
	// Duration is how long operations are started. Default 20 s.
	Duration time.Duration
	// DeadP and LiveP are the failure rates of /v1/a and /v1/b (503, no
	// Retry-After, drawn per operation and attempt). Defaults 1 and 0.2.
	DeadP, LiveP float64
	// Latency is every request's latency. Default 20 ms.
	Latency time.Duration
	// OpTimeout is each operation's deadline. Default 3 s.
	OpTimeout time.Duration
	// Seed seeds the arrivals and the server's draws. Default 1.
	Seed uint64
}

// DefaultRoutesConfig returns the defaults of RoutesConfig.
func DefaultRoutesConfig() RoutesConfig {
	return RoutesConfig{Clients: 25, Rate: 10, Duration: 20 * time.Second, DeadP: 1, LiveP: 0.2,
		Latency: 20 * time.Millisecond, OpTimeout: 3 * time.Second, Seed: 1}
}

func (rc RoutesConfig) resolved() RoutesConfig {
	d := DefaultRoutesConfig()
	rc.Clients = cmpOr(rc.Clients, d.Clients)
	rc.Rate = cmpOr(rc.Rate, d.Rate)
	rc.Duration = cmpOr(rc.Duration, d.Duration)
	rc.DeadP = cmpOr(rc.DeadP, d.DeadP)
	rc.LiveP = cmpOr(rc.LiveP, d.LiveP)
	rc.Latency = cmpOr(rc.Latency, d.Latency)
	rc.OpTimeout = cmpOr(rc.OpTimeout, d.OpTimeout)
	rc.Seed = cmpOr(rc.Seed, d.Seed)
	return rc
}

// The mixes of the routes scenario: which operations run, and how /v1/a
// fails.
const (
	MixLiveAlone = "b alone"   // /v1/b's operations only
	MixDeadLive  = "a dead, b" // both routes, /v1/a at DeadP
	MixBothDead  = "both dead" // both routes failing every request
	routesLive   = "POST /v1/b"
	routesDead   = "POST /v1/a"
	routesPathA  = "/v1/a"
	routesPathB  = "/v1/b"
)

// RoutesResult is one run of the routes scenario: a strategy at a scale on
// a mix.
type RoutesResult struct {
	Scale    string `json:"scale"`
	Strategy string `json:"strategy"`
	Mix      string `json:"mix"`
	// OpsA and OpsB are the operations of each route; SuccessA and
	// SuccessB the share of them that succeeded.
	OpsA     int     `json:"ops_a"`
	OpsB     int     `json:"ops_b"`
	SuccessA float64 `json:"success_a"`
	SuccessB float64 `json:"success_b"`
	// Load is the requests the server saw per operation.
	Load float64 `json:"load"`
	// HarmB counts /v1/b operations that "none" completed and this strategy
	// failed, on the same mix and scale.
	HarmB int `json:"harm_b"`
}

// RunRoutesVirtual runs the routes scenario in simulated time: every mix at
// each of scales (ScalePerClient, ScaleShared), with "none" (net/http, one
// attempt) and "resilient" (the defaults), each run in its own bubble.
func RunRoutesVirtual(t *testing.T, rc RoutesConfig, scales []string) []RoutesResult {
	t.Helper()
	rc = rc.resolved()
	arr := schedule(rc.Clients, rc.Rate, rc.Duration, rc.Seed)
	type run struct{ scale, strategy, mix string }
	var runs []run
	for _, sc := range scales {
		for _, mix := range []string{MixLiveAlone, MixDeadLive, MixBothDead} {
			for _, st := range []string{"none", "resilient"} {
				runs = append(runs, run{sc, st, mix})
			}
		}
	}
	out := make([]RoutesResult, len(runs))
	oks := make([][]bool, len(runs))
	t.Run("routes", func(t *testing.T) {
		for i, r := range runs {
			t.Run(r.scale+"/"+r.mix+"/"+r.strategy, func(t *testing.T) {
				t.Parallel()
				synctest.Test(t, func(*testing.T) {
					out[i], oks[i] = runRoutes(rc, arr, r.scale, r.strategy, r.mix)
				})
			})
		}
	})
	// Harm on /v1/b: against "none" of the same scale and mix (the run
	// just before each "resilient").
	for i := 1; i < len(runs); i += 2 {
		for op, ok := range oks[i-1] {
			if ok && !oks[i][op] && op%2 == 1 {
				out[i].HarmB++
			}
		}
	}
	return out
}

// runRoutes runs one strategy at one scale on one mix, and returns its
// result and which operations succeeded.
func runRoutes(rc RoutesConfig, arr []arrival, scale, strategy, mix string) (RoutesResult, []bool) {
	deadP := rc.DeadP
	liveP := rc.LiveP
	if mix == MixBothDead {
		deadP, liveP = 1, 1
	}
	lat := &fakeserver.LatencyDist{Median: fakeserver.Duration(rc.Latency)}
	srv := fakeserver.NewUnstarted(fakeserver.WithScenario(fakeserver.Scenario{Seed: rc.Seed, Routes: []fakeserver.Route{
		{Match: routesDead, FailureRate: deadP, Draw: fakeserver.DrawOperation, OperationHeader: OperationHeader, Latency: lat},
		{Match: routesLive, FailureRate: liveP, Draw: fakeserver.DrawOperation, OperationHeader: OperationHeader, Latency: lat},
	}}))
	defer srv.Close()
	var sent atomic.Int64
	base := routesCounter{base: srv.Transport(), n: &sent}
	newClient := func() *http.Client {
		if strategy == "none" {
			return bench.NetHTTP(base)
		}
		return resilientClient(base)
	}
	clients := make([]*http.Client, rc.Clients)
	for c := range clients {
		if scale == ScaleShared && c > 0 {
			clients[c] = clients[0]
		} else {
			clients[c] = newClient()
		}
	}
	ok := make([]bool, len(arr))
	res := RoutesResult{Scale: scale, Strategy: strategy, Mix: mix}
	var wg sync.WaitGroup
	start := time.Now()
	for i, a := range arr {
		path := routesPathB
		if i%2 == 0 {
			if mix == MixLiveAlone {
				continue
			}
			path = routesPathA
			res.OpsA++
		} else {
			res.OpsB++
		}
		if d := time.Until(start.Add(a.at)); d > 0 {
			time.Sleep(d)
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), rc.OpTimeout)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test"+path, strings.NewReader(`{"amount":1}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(OperationHeader, strconv.Itoa(i))
			resp, err := clients[a.client].Do(req)
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ok[i] = resp.StatusCode == http.StatusCreated
		})
	}
	wg.Wait()
	var okA, okB int
	for i, v := range ok {
		switch {
		case !v:
		case i%2 == 0:
			okA++
		default:
			okB++
		}
	}
	if res.OpsA > 0 {
		res.SuccessA = float64(okA) / float64(res.OpsA)
	}
	if res.OpsB > 0 {
		res.SuccessB = float64(okB) / float64(res.OpsB)
	}
	res.Load = float64(sent.Load()) / float64(res.OpsA+res.OpsB)
	return res, ok
}

// routesCounter counts the requests it sends.
type routesCounter struct {
	base http.RoundTripper
	n    *atomic.Int64
}

func (c routesCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(req)
}

// WriteRoutesMarkdown writes the routes scenario's results as a Markdown
// table: per scale and mix, each strategy's success on each route, the
// load, and /v1/b's harm.
func WriteRoutesMarkdown(w io.Writer, rc RoutesConfig, results []RoutesResult) error {
	rc = rc.resolved()
	var b strings.Builder
	fmt.Fprintf(&b, "## Two routes on one host (virtual time)\n\n")
	fmt.Fprintf(&b, "%d clients × %g POSTs/s for %v, alternating %s (failure rate %g; %q) and %s (%g); %v per request, deadline %v, seed %d.\n\n",
		rc.Clients, rc.Rate, rc.Duration, routesDead, rc.DeadP, MixBothDead+": both 1", routesLive, rc.LiveP, rc.Latency, rc.OpTimeout, rc.Seed)
	b.WriteString("| scale | mix | strategy | ops a | ops b | success a | success b | load | harm b |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %s | %.2f %% | %.3f | %d |\n", r.Scale, r.Mix, r.Strategy, r.OpsA, r.OpsB,
			pctOrDash(r.OpsA, r.SuccessA), 100*r.SuccessB, r.Load, r.HarmB)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func pctOrDash(n int, v float64) string {
	if n == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f %%", 100*v)
}
