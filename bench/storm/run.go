package storm

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/internal/retryafter"
	"github.com/resilienthttp/resilient/pushback"
)

// OperationHeader is the request header by which the harness names each
// operation (its index in the load), on every attempt and for every
// strategy, keyed or not: the fake server draws each attempt's fate from it
// (Config.Fates), and counts which operations reached it.
const OperationHeader = "X-Storm-Op"

// LateThreshold is how late the load generator may start an operation
// before the operation counts as disturbed (Result.LateOps): later than
// that, the machine, not the strategy, shaped what happened.
const LateThreshold = 50 * time.Millisecond

// runGrace is how long a run may last beyond its load and its longest
// operation before it is stopped and reported invalid (Result.Overran).
const runGrace = 10 * time.Second

// Run runs every scenario of cfg with every strategy, at every scale, on
// loopback sockets (127.0.0.1 only) and returns one Result per scale,
// scenario and strategy, in that order. The strategies of a scenario run side
// by side, each against its own server, unless cfg.Sequential is set.
//
// Each run is bounded on its own (its load, then its longest operation, then
// a grace period); a run that overruns is stopped and reported invalid, and
// the others go on. If ctx is done, Run returns the results of the scenarios
// that finished, with ctx's error. It requires cfg.Virtual to be false; see
// RunVirtual.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Virtual {
		return nil, fmt.Errorf("storm: Run is for real sockets; use RunVirtual for a virtual run")
	}
	plan := newPlan(cfg, cfg.strategies())
	side := len(plan.strategies)
	if cfg.Sequential {
		side = 1
	}
	plan.maxConns = connLimit(cfg.MaxConns, side)
	prog := startProgress(cfg.Progress, plan.totalOps())
	defer prog.stop()
	var out []Result
	for _, g := range plan.groups() {
		if err := ctx.Err(); err != nil {
			return Compare(out), err
		}
		prog.setLabel(g.String())
		results := make([]Result, len(plan.strategies))
		var wg sync.WaitGroup
		for i, st := range plan.strategies {
			run := func() { results[i] = runOne(ctx, plan.run(g, st, prog)) }
			if cfg.Sequential {
				run()
				continue
			}
			wg.Go(run)
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return Compare(out), err // this scenario was cut short: drop it
		}
		out = append(out, results...)
	}
	return Compare(out), nil
}

// plan is a Config resolved into scales, scenarios, strategies and their
// loads.
type plan struct {
	cfg        Config
	scenarios  []scenario
	strategies []Strategy
	loads      map[loadKey][]arrival
	maxConns   int // per strategy, on sockets
}

type loadKey struct {
	clients  int
	duration time.Duration
}

// group is one scenario at one scale: the runs whose results compare.
type group struct {
	scale string
	sc    scenario
}

func (g group) String() string { return g.sc.String() + " " + g.scale }

func newPlan(cfg Config, strategies []Strategy) *plan {
	p := &plan{cfg: cfg, scenarios: cfg.scenarios(), strategies: strategies, loads: make(map[loadKey][]arrival)}
	for _, sc := range p.scenarios {
		k := loadKey{sc.clients, sc.duration}
		if _, ok := p.loads[k]; !ok {
			p.loads[k] = schedule(sc.clients, cfg.Rate, sc.duration, cfg.Seed)
		}
	}
	return p
}

// groups lists the groups to run: every scenario at the first scale, then at
// the next.
func (p *plan) groups() []group {
	var out []group
	for _, scale := range p.cfg.Scales {
		for _, sc := range p.scenarios {
			out = append(out, group{scale, sc})
		}
	}
	return out
}

// totalOps is the number of operations of all runs, for the progress bar.
func (p *plan) totalOps() int {
	n := 0
	for _, sc := range p.scenarios {
		n += len(p.loads[loadKey{sc.clients, sc.duration}]) * len(p.strategies)
	}
	return n * len(p.cfg.Scales)
}

// run returns the parameters of one run.
func (p *plan) run(g group, st Strategy, prog *progress) runParams {
	return runParams{cfg: p.cfg, scale: g.scale, sc: g.sc, strategy: st,
		arrivals: p.loads[loadKey{g.sc.clients, g.sc.duration}], progress: prog, maxConns: p.maxConns}
}

// runParams is one strategy in one scenario at one scale.
type runParams struct {
	cfg      Config
	scale    string
	sc       scenario
	strategy Strategy
	arrivals []arrival
	progress *progress
	maxConns int
}

// serverScenario is the fake server's scenario at failure rate p: every
// POST fails with 503 with probability p, after holding a capacity slot for
// its service time, or loses its response with probability cfg.Lost; in the
// outage window (outage true) every POST fails, with cfg.OutageRetryAfter.
//
// The outage is a scenario switched on and off by the harness (see outage),
// rather than a fakeserver.Outage: the fake server answers an Outage before
// admission, at no cost, so retries during it would not load the server at
// all. Here, as when a server's database is down, every request still takes
// a slot while it fails, and what retries cost shows.
func (rp runParams) serverScenario(p float64, outage bool) fakeserver.Scenario {
	cfg := rp.cfg
	route := fakeserver.Route{Match: "POST /v1/charges", FailureRate: p, OperationHeader: OperationHeader}
	if cfg.Fates == FatesOperation {
		route.Draw = fakeserver.DrawOperation
	}
	if outage {
		route.FailureRate = 0
		route.Mix = []fakeserver.Fault{{Kind: fakeserver.FaultStatus, Status: http.StatusServiceUnavailable,
			RetryAfter: fakeserver.Duration(cfg.OutageRetryAfter), Probability: 1}}
	} else if lost := min(cfg.Lost, 1-p); lost > 0 {
		route.Mix = []fakeserver.Fault{{Kind: fakeserver.FaultLostResponse, Probability: lost}}
	}
	if !outage && p > 0 && cfg.FailRetryAfter > 0 {
		// The failures carry a Retry-After: a 503 fault instead of the
		// failure rate's plain 503, drawn the same way.
		route.FailureRate = 0
		route.Mix = append([]fakeserver.Fault{{Kind: fakeserver.FaultStatus, Status: http.StatusServiceUnavailable,
			RetryAfter: fakeserver.Duration(cfg.FailRetryAfter), Probability: p}}, route.Mix...)
	}
	s := fakeserver.Scenario{Seed: cfg.Seed, Routes: []fakeserver.Route{route}}
	if c := cfg.Capacity; c.MaxConcurrent > 0 && !rp.driverCapacity() {
		s.Capacity = &fakeserver.Capacity{
			MaxConcurrent: c.MaxConcurrent,
			ServiceTime:   fakeserver.Duration(c.ServiceTime),
			Queue:         c.Queue,
			QueueTimeout:  fakeserver.Duration(c.QueueTimeout),
			RetryAfter:    fakeserver.Duration(cfg.ShedRetryAfter),
			ShedCost:      cfg.ShedCost,
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
		at     time.Duration
		outage bool
	}{{cfg.OutageStart, true}, {cfg.OutageEnd, false}} {
		if d := time.Until(start.Add(step.at)); d > 0 && !sleep(ctx, d) {
			return
		}
		// Cannot fail: the scenario is valid (it was validated at the start).
		_ = srv.SetScenario(rp.serverScenario(rp.sc.p, step.outage))
	}
}

// driverCapacity reports whether the capacity model of a virtual run is
// the driver's (vcapacity) rather than the fake server's: always, but for
// a strategy with server options of its own. The pushback middleware, if
// any, then runs in front of it in the driver's transport (turnTransport)
// rather than inside the fake server.
func (rp runParams) driverCapacity() bool {
	return rp.cfg.Virtual && rp.cfg.Capacity.MaxConcurrent > 0 && len(rp.strategy.ServerOptions) == 0
}

// outageSteps are the outage's switches, for a virtual run's driver; none
// without an outage.
func (rp runParams) outageSteps(srv *fakeserver.Server) []step {
	if !rp.sc.outage {
		return nil
	}
	set := func(on bool) func() {
		// Cannot fail: the scenario is valid (it was validated at the start).
		return func() { _ = srv.SetScenario(rp.serverScenario(rp.sc.p, on)) }
	}
	return []step{{rp.cfg.OutageStart, set(true)}, {rp.cfg.OutageEnd, set(false)}}
}

// span is how long a run can last: the load, then the longest operation,
// with a margin.
func (rp runParams) span() time.Duration {
	return rp.sc.duration + rp.cfg.OpTimeout + time.Second
}

// probe watches what reaches the server in one run: the requests per bin,
// which operations arrived, and the last Retry-After the server sent during
// the outage window.
type probe struct {
	load  *series
	seen  []atomic.Bool // by operation index
	start atomic.Int64  // Unix nanoseconds of the start of the load; 0 before
	from  time.Duration // the outage window, since start
	to    time.Duration
	outOn bool

	mu        sync.Mutex
	lastRAAt  time.Duration // when the last Retry-After of the window was sent
	lastRA    float64       // its value in seconds; -1: none
	requests  atomic.Int64  // every request, counted as it arrives
	accepts   atomic.Int64  // accept errors of the socket server
	serverErr atomic.Int64  // other errors the socket server logged
}

func newProbe(rp runParams) *probe {
	p := &probe{load: newSeries(rp.cfg.Bin, rp.span()), seen: make([]atomic.Bool, len(rp.arrivals)), lastRA: -1}
	if rp.sc.outage {
		p.outOn, p.from, p.to = true, rp.cfg.OutageStart, rp.cfg.OutageEnd
	}
	return p
}

func (p *probe) begin(now time.Time) {
	p.start.Store(now.UnixNano())
	p.load.begin(now)
}

// request counts one request arriving at now.
func (p *probe) request(now time.Time, h http.Header) {
	p.requests.Add(1)
	p.load.add(now)
	if i, err := strconv.Atoi(h.Get(OperationHeader)); err == nil && i >= 0 && i < len(p.seen) {
		p.seen[i].Store(true)
	}
}

// response notes the Retry-After of a response sent at now.
func (p *probe) response(now time.Time, h http.Header) {
	start := p.start.Load()
	if !p.outOn || start == 0 {
		return
	}
	at := time.Duration(now.UnixNano() - start)
	if at < p.from || at >= p.to {
		return
	}
	d, ok := retryafter.Parse(h.Get("Retry-After"), now)
	p.mu.Lock()
	defer p.mu.Unlock()
	if at >= p.lastRAAt {
		p.lastRAAt = at
		p.lastRA = -1
		if ok {
			p.lastRA = d.Seconds()
		}
	}
}

// Write counts the lines the socket server logs: accept errors (too many
// open files…) and any other error.
func (p *probe) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(line, "Accept error") {
			p.accepts.Add(1)
		} else if line != "" {
			p.serverErr.Add(1)
		}
	}
	return len(b), nil
}

// runOne runs one strategy in one scenario at one scale against a fresh
// server: on a loopback socket, or in-process when rp.cfg.Virtual (then it
// must run in a synctest bubble, and ctx must belong to it). It never fails:
// what went wrong in the harness is reported in the Result.
func runOne(ctx context.Context, rp runParams) Result {
	cfg := rp.cfg
	srv := fakeserver.NewUnstarted(rp.serverOptions()...)
	defer srv.Close()
	pr := newProbe(rp)
	lateBins := newSeries(cfg.Bin, rp.span())

	var base http.RoundTripper
	url := "http://fakeserver.test"
	var tn *turns
	var pb *pushback.Budget // the pushback middleware in front of the driver's capacity model
	if cfg.Virtual {
		tn = newTurns(cfg.Seed, len(rp.arrivals))
		if rp.driverCapacity() {
			tn.cap = newVCapacity(cfg, tn.notify)
			if c := rp.pushbackConfig(); c != nil {
				pb = pushback.New(*c)
			}
		}
		base = turnTransport{rt: srv.Transport(), turns: tn, probe: pr, pushback: pb}
	} else {
		ts := httptest.NewUnstartedServer(countingHandler(srv.Handler(), pr))
		ts.Config.ErrorLog = log.New(pr, "", 0)
		ts.Start()
		defer ts.Close()
		defer srv.Close() // first: it releases requests waiting for capacity
		url = ts.URL
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 0 // no limit but the per-host one
		tr.MaxConnsPerHost = rp.maxConns
		tr.MaxIdleConnsPerHost = rp.maxConns
		tr.DisableCompression = true
		defer tr.CloseIdleConnections()
		base = tr
	}
	url += "/v1/charges"

	n := rp.sc.clients
	if rp.scale == ScaleShared {
		n = 1
	}
	newClient, release := rp.strategy.clients()
	defer release()
	clients := make([]*http.Client, n)
	for i := range clients {
		clients[i] = newClient(clientBase(base, cfg.Seed, i))
	}

	ops := make([]opResult, len(rp.arrivals))
	ctx, cancel := context.WithTimeout(ctx, rp.span()+runGrace)
	defer cancel()
	srv.Reset() // counters start now
	start := time.Now()
	pr.begin(start)
	lateBins.begin(start)
	var (
		wg      sync.WaitGroup
		maxLag  time.Duration
		late    int
		started int
	)
	if cfg.Virtual {
		started = len(rp.arrivals)
		tn.drive(start, rp.arrivals, rp.outageSteps(srv), func(i int) {
			a := rp.arrivals[i]
			ops[i] = operation(ctx, clients[a.client%n], url, rp, i, a.at)
			rp.progress.add(1)
		})
	} else if rp.sc.outage {
		wg.Go(func() { rp.outage(ctx, srv, start) })
	}
	for i, a := range rp.arrivals {
		if cfg.Virtual {
			break // drive ran them
		}
		if d := time.Until(start.Add(a.at)); d > 0 {
			if !sleep(ctx, d) {
				break
			}
		}
		if lag := time.Since(start) - a.at; lag > LateThreshold {
			late++
			lateBins.add(time.Now())
			maxLag = max(maxLag, lag)
		} else {
			maxLag = max(maxLag, lag)
		}
		started++
		c := clients[a.client%n]
		wg.Go(func() {
			ops[i] = operation(ctx, c, url, rp, i, a.at)
			rp.progress.add(1)
		})
	}
	wg.Wait()
	overran := ctx.Err() != nil
	rp.progress.add(len(ops) - started)

	st := srv.Stats()
	if cfg.Virtual {
		st.Requests = pr.requests.Load()
		if tn.cap != nil {
			st.CapacityRejections = tn.cap.shed
		}
		if pb != nil {
			ps := pb.Stats()
			st.PushbackRefused = int64(ps.RetriesShed + ps.FirstAttemptsShed)
			st.PushbackHinted = int64(ps.Hinted)
		}
	}
	r := Result{
		Strategy:       rp.strategy.Name,
		Scenario:       rp.sc.name,
		Scale:          rp.scale,
		P:              rp.sc.p,
		Factor:         rp.sc.factor,
		Keyed:          rp.strategy.Keyed,
		Ops:            len(ops),
		ServerRequests: st.Requests,
		Duplicates:     duplicates(srv.Ledger()),
		Shed:           st.CapacityRejections,
		MaxLagMs:       float64(maxLag) / float64(time.Millisecond),
		LateOps:        late + len(ops) - started,
		AcceptErrors:   pr.accepts.Load(),
		Overran:        overran,
		DurationS:      rp.sc.duration.Seconds(),
		BinS:           cfg.Bin.Seconds(),
		Load:           pr.load.values(),
		Goodput:        goodput(ops, cfg.Bin),
		LateBins:       lateBins.values(),
		ok:             make([]bool, len(ops)),
	}
	for i := range pr.seen {
		if !pr.seen[i].Load() {
			r.Unsent++
		}
	}
	r.summarize(rp, ops, st, pr)
	return r
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
	req.Header.Set(OperationHeader, strconv.Itoa(i))
	if rp.strategy.SetsKey {
		req.Header.Set(resilient.DefaultKeyHeader, "op-"+strconv.FormatUint(rp.cfg.Seed, 10)+"-"+strconv.Itoa(i))
	}
	t0 := time.Now()
	resp, err := c.Do(req)
	ok, status := false, 0
	if err == nil {
		_, rerr := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ok, status = rerr == nil && resp.StatusCode == http.StatusCreated, resp.StatusCode
	}
	return opResult{ok: ok, start: at, latency: time.Since(t0), status: status}
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

// countingHandler shows every request h gets, and its answer, to p.
func countingHandler(h http.Handler, p *probe) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.request(time.Now(), r.Header)
		h.ServeHTTP(w, r)
		p.response(time.Now(), w.Header())
	})
}

// countingTransport shows every request it sends through rt, and its
// answer, to probe.
type countingTransport struct {
	rt    http.RoundTripper
	probe *probe
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.probe.request(time.Now(), req.Header)
	resp, err := t.rt.RoundTrip(req)
	if err == nil {
		t.probe.response(time.Now(), resp.Header)
	}
	return resp, err
}
