package storm

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
)

// Run runs every scenario of cfg with every strategy on loopback sockets
// (127.0.0.1 only) and returns one Result per scenario and strategy, the
// outage scenario first, strategies in cfg's order. The strategies of a
// scenario run side by side, each against its own server, unless
// cfg.Sequential is set. Run stops early, with ctx's error, if ctx is done.
// It requires cfg.Virtual to be false; see RunVirtual.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Virtual {
		return nil, fmt.Errorf("storm: Run is for real sockets; use RunVirtual for a virtual run")
	}
	plan := newPlan(cfg, cfg.strategies())
	prog := startProgress(cfg.Progress, plan.totalOps())
	defer prog.stop()
	var out []Result
	for _, sc := range plan.scenarios {
		prog.setLabel(sc.String())
		results := make([]Result, len(plan.strategies))
		errs := make([]error, len(plan.strategies))
		var wg sync.WaitGroup
		for i, st := range plan.strategies {
			run := func() {
				results[i], errs[i] = runOne(ctx, plan.run(sc, st, prog))
			}
			if cfg.Sequential {
				run()
				continue
			}
			wg.Go(run)
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return out, err
			}
		}
		out = append(out, results...)
	}
	return out, nil
}

// plan is a Config resolved into scenarios, strategies and their loads.
type plan struct {
	cfg        Config
	scenarios  []scenario
	strategies []Strategy
	loads      map[time.Duration][]arrival // by duration: one schedule per length
}

func newPlan(cfg Config, strategies []Strategy) *plan {
	p := &plan{cfg: cfg, scenarios: cfg.scenarios(), strategies: strategies, loads: make(map[time.Duration][]arrival)}
	for _, sc := range p.scenarios {
		if _, ok := p.loads[sc.duration]; !ok {
			p.loads[sc.duration] = schedule(cfg.Clients, cfg.Rate, sc.duration, cfg.Seed)
		}
	}
	return p
}

// totalOps is the number of operations of all runs, for the progress bar.
func (p *plan) totalOps() int {
	n := 0
	for _, sc := range p.scenarios {
		n += len(p.loads[sc.duration]) * len(p.strategies)
	}
	return n
}

// run returns the parameters of one run.
func (p *plan) run(sc scenario, st Strategy, prog *progress) runParams {
	return runParams{cfg: p.cfg, sc: sc, strategy: st, arrivals: p.loads[sc.duration], progress: prog}
}

// runParams is one strategy in one scenario.
type runParams struct {
	cfg      Config
	sc       scenario
	strategy Strategy
	arrivals []arrival
	progress *progress
}

// serverScenario is the fake server's scenario at failure rate p: every
// POST fails with 503 with probability p, after holding a capacity slot for
// its service time, or loses its response with probability cfg.Lost.
//
// The outage is this scenario at p = 1, switched on and off by the harness
// (see outage), rather than a fakeserver.Outage: the fake server answers an
// Outage before admission, at no cost, so retries during it would not load
// the server at all. Here, as when a server's database is down, every
// request still takes a slot while it fails, and what retries cost shows.
func (rp runParams) serverScenario(p float64) fakeserver.Scenario {
	cfg := rp.cfg
	route := fakeserver.Route{Match: "POST /v1/charges", FailureRate: p}
	if lost := min(cfg.Lost, 1-p); lost > 0 {
		route.Mix = []fakeserver.Fault{{Kind: fakeserver.FaultLostResponse, Probability: lost}}
	}
	s := fakeserver.Scenario{Seed: cfg.Seed, Routes: []fakeserver.Route{route}}
	if c := cfg.Capacity; c.MaxConcurrent > 0 {
		s.Capacity = &fakeserver.Capacity{
			MaxConcurrent: c.MaxConcurrent,
			ServiceTime:   fakeserver.Duration(c.ServiceTime),
			Queue:         c.Queue,
			QueueTimeout:  fakeserver.Duration(c.QueueTimeout),
		}
	}
	return s
}

// outage switches srv to failing everything from cfg.OutageStart to
// cfg.OutageEnd after start, then back to the scenario's failure rate. It
// returns early when ctx is done.
func (rp runParams) outage(ctx context.Context, srv *fakeserver.Server, start time.Time) {
	cfg := rp.cfg
	for _, step := range []struct {
		at time.Duration
		p  float64
	}{{cfg.OutageStart, 1}, {cfg.OutageEnd, rp.sc.p}} {
		if d := time.Until(start.Add(step.at)); d > 0 && !sleep(ctx, d) {
			return
		}
		// Cannot fail: the scenario is valid (it was validated at the start).
		_ = srv.SetScenario(rp.serverScenario(step.p))
	}
}

// span is how long a run can last: the load, then the longest operation,
// with a margin.
func (rp runParams) span() time.Duration {
	return rp.sc.duration + rp.cfg.OpTimeout + time.Second
}

// runOne runs one strategy in one scenario against a fresh server: on a
// loopback socket, or in-process when rp.cfg.Virtual (then it must run in a
// synctest bubble, and ctx must belong to it).
func runOne(ctx context.Context, rp runParams) (Result, error) {
	cfg := rp.cfg
	srv := fakeserver.NewUnstarted(fakeserver.WithScenario(rp.serverScenario(rp.sc.p)))
	defer srv.Close()
	load := newSeries(cfg.Bin, rp.span())

	var base http.RoundTripper
	url := "http://fakeserver.test"
	if cfg.Virtual {
		base = countingTransport{rt: srv.Transport(), load: load}
	} else {
		ts := httptest.NewServer(countingHandler(srv.Handler(), load))
		defer ts.Close()
		defer srv.Close() // first: it releases requests waiting for capacity
		url = ts.URL
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 0 // no limit
		tr.MaxIdleConnsPerHost = 4096
		tr.DisableCompression = true
		defer tr.CloseIdleConnections()
		base = tr
	}
	url += "/v1/charges"

	clients := make([]*http.Client, cfg.Clients)
	for i := range clients {
		clients[i] = rp.strategy.NewClient(base)
	}

	ops := make([]opResult, len(rp.arrivals))
	ctx, cancel := context.WithTimeout(ctx, rp.span()+5*time.Second) // a bound on the whole run
	defer cancel()
	srv.Reset() // counters start now
	start := time.Now()
	load.begin(start)
	var (
		wg     sync.WaitGroup
		maxLag time.Duration
	)
	if rp.sc.outage {
		wg.Go(func() { rp.outage(ctx, srv, start) })
	}
	for i, a := range rp.arrivals {
		if d := time.Until(start.Add(a.at)); d > 0 {
			if !sleep(ctx, d) {
				break
			}
		}
		maxLag = max(maxLag, time.Since(start)-a.at)
		wg.Go(func() {
			ops[i] = operation(ctx, clients[a.client], url, rp, i, a.at)
			rp.progress.add(1)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("storm: %s/%s p=%v: %w", rp.sc.name, rp.strategy.Name, rp.sc.p, err)
	}

	st := srv.Stats()
	r := Result{
		Strategy:       rp.strategy.Name,
		Scenario:       rp.sc.name,
		P:              rp.sc.p,
		Keyed:          rp.strategy.Keyed,
		Ops:            len(ops),
		ServerRequests: st.Requests,
		Duplicates:     duplicates(srv.Ledger()),
		Shed:           st.CapacityRejections,
		MaxLagMs:       float64(maxLag) / float64(time.Millisecond),
		BinS:           cfg.Bin.Seconds(),
		Load:           load.values(),
		Goodput:        goodput(ops, cfg.Bin),
	}
	if r.Ops > 0 {
		r.Amplification = float64(r.ServerRequests) / float64(r.Ops)
		ok := 0
		for _, o := range ops {
			if o.ok {
				ok++
			}
		}
		r.SuccessRate = float64(ok) / float64(r.Ops)
	}
	r.P50Ms, r.P99Ms = latencyPercentiles(ops)
	if rp.sc.outage {
		rec := recovery(r.Goodput, cfg.Bin, cfg.OutageStart, cfg.OutageEnd, rp.sc.duration)
		r.RecoveryS = &rec
	}
	return r, nil
}

// operation runs logical operation i (a keyed POST when the strategy is
// keyed) with client c and records its outcome.
func operation(ctx context.Context, c *http.Client, url string, rp runParams, i int, at time.Duration) opResult {
	ctx, cancel := context.WithTimeout(ctx, rp.cfg.OpTimeout)
	defer cancel()
	body := `{"op":` + strconv.Itoa(i) + `,"amount":1000,"currency":"usd"}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return opResult{start: at}
	}
	req.Header.Set("Content-Type", "application/json")
	if rp.strategy.SetsKey {
		req.Header.Set(resilient.DefaultKeyHeader, "op-"+strconv.FormatUint(rp.cfg.Seed, 10)+"-"+strconv.Itoa(i))
	}
	t0 := time.Now()
	resp, err := c.Do(req)
	ok := false
	if err == nil {
		_, rerr := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ok = rerr == nil && resp.StatusCode == http.StatusCreated
	}
	return opResult{ok: ok, start: at, latency: time.Since(t0)}
}

// sleep waits d or until ctx is done; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// countingHandler counts every request h gets in load.
func countingHandler(h http.Handler, load *series) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		load.add(time.Now())
		h.ServeHTTP(w, r)
	})
}

// countingTransport counts every request it sends through rt in load.
type countingTransport struct {
	rt   http.RoundTripper
	load *series
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.load.add(time.Now())
	return t.rt.RoundTrip(req)
}
