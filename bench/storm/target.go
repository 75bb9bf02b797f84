package storm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
)

// TargetConfig configures a storm against a server the user runs (the
// command's -target): the same strategies, one after the other, each
// against the same load. Against the fakeserver binary (its admin API at
// /_fake/ answers) the faults are scripted through the admin API, so every
// scenario runs and the server's ledger counts duplicates and harm; against
// any other server only the scenarios that need no fault injection run.
//
// The load is capped: Rate, Concurrency and the plan's longest possible
// time must stay within MaxRate, MaxConcurrency and MaxTime, or PlanTarget
// refuses the plan.
type TargetConfig struct {
	// URL is the target: the fakeserver's base URL, or the URL each
	// operation calls on any other server.
	URL string
	// Method and Body are the request of each operation on a server
	// without the admin API: GET (default) or POST, with Body as its
	// JSON body. Against the fakeserver, operations are keyed POSTs to
	// /v1/charges and, in the tail scenario, GETs of one object.
	Method string
	Body   string
	// Rate is the offered load in operations per second (default 20), and
	// Duration how long each run offers it (default 2 s).
	Rate     float64
	Duration time.Duration
	// Concurrency bounds the operations in flight and the connections to
	// the target (default 32: what 20 operations/s that each last the
	// whole OpTimeout need). An operation that waits for a slot starts
	// late, and counts as such (Result.LateOps).
	Concurrency int
	// OpTimeout bounds each operation, retries included (default 1.5 s:
	// time for go-retryablehttp's first retry, after 1 s).
	OpTimeout time.Duration
	// MaxRate, MaxConcurrency and MaxTime are the caps (defaults 100
	// operations per second, 64, 60 s): a plan that offers more, or could
	// last longer, is refused.
	MaxRate        float64
	MaxConcurrency int
	MaxTime        time.Duration
	// IOwnThisTarget must be set for a target that is not on a loopback
	// address.
	IOwnThisTarget bool
	// Burst is the offered load of the burst scenario on a server without
	// the admin API, as a multiple of Rate (default 4); it must stay
	// within MaxRate.
	Burst float64
}

// DefaultTargetConfig returns the defaults of TargetConfig.
func DefaultTargetConfig() TargetConfig {
	return TargetConfig{Method: http.MethodGet, Rate: 20, Duration: 2 * time.Second, Concurrency: 32, OpTimeout: 1500 * time.Millisecond,
		MaxRate: 100, MaxConcurrency: 64, MaxTime: 60 * time.Second, Burst: 4}
}

// TargetPlan is a checked plan of a -target run: PlanTarget builds it,
// DryRun says what it will send, Run runs it.
type TargetPlan struct {
	tc      TargetConfig
	cfg     Config // the storm's configuration the runs use
	admin   bool   // the target serves the fakeserver's admin API
	origin  string // scheme://host of the target
	runs    []targetRun
	tail    []TailStrategy
	skipped []string
	nonce   string
	// adminClient calls the admin API; its idle connections are closed
	// when PlanTarget fails and when Run returns.
	adminClient *http.Client
}

// targetRun is one strategy in one scenario of a TargetPlan.
type targetRun struct {
	sc   scenario
	st   Strategy
	rate float64 // offered operations per second
}

// attemptsOf is the most requests an operation of a strategy sends (net/http
// may add a re-send on a dead keep-alive connection).
func attemptsOf(name string, own []Strategy) int {
	switch name {
	case "none":
		return 1
	case "retryablehttp":
		return 5
	case "failsafe":
		return 3
	}
	for _, s := range own {
		if s.Name == name && s.MaxAttempts > 0 {
			return s.MaxAttempts
		}
	}
	return 4 // resilient's default, and the naive loop's
}

// PlanTarget checks tc against its caps, finds out whether the target
// serves the fakeserver's admin API, and returns the plan: the scenarios
// cfg's strategies run against it. It refuses a target off loopback
// without IOwnThisTarget, and any rate, concurrency or length beyond the
// caps.
func PlanTarget(ctx context.Context, tc TargetConfig, cfg Config) (*TargetPlan, error) {
	d := DefaultTargetConfig()
	tc.Method = strings.ToUpper(cmpOr(tc.Method, d.Method))
	u, err := url.Parse(tc.URL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("storm: -target: %w", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("storm: -target %q: want an http:// or https:// URL", tc.URL)
	case tc.Method != http.MethodGet && tc.Method != http.MethodPost:
		return nil, fmt.Errorf("storm: -target-method %q: want GET or POST", tc.Method)
	case !(tc.Rate > 0) || math.IsInf(tc.Rate, 0) || tc.Duration <= 0 || tc.Concurrency < 1 || tc.OpTimeout <= 0:
		return nil, errors.New("storm: -target-rate, -target-duration, -target-concurrency and -target-op-timeout must be positive")
	case tc.Rate > tc.MaxRate:
		return nil, fmt.Errorf("storm: -target-rate %g ops/s is over the cap -max-rate %g", tc.Rate, tc.MaxRate)
	case tc.Concurrency > tc.MaxConcurrency:
		return nil, fmt.Errorf("storm: -target-concurrency %d is over the cap -max-concurrency %d", tc.Concurrency, tc.MaxConcurrency)
	}
	if !tc.IOwnThisTarget {
		if err := requireLoopback(ctx, u.Hostname()); err != nil {
			return nil, err
		}
	}
	p := &TargetPlan{tc: tc, origin: u.Scheme + "://" + u.Host, nonce: strconv.FormatInt(time.Now().UnixNano(), 36),
		adminClient: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}
	p.admin = p.probeAdmin(ctx)
	p.adminClient.CloseIdleConnections()

	c := cfg
	c.Virtual = false
	c.Clients, c.Rate = 1, tc.Rate
	c.OpTimeout = tc.OpTimeout
	c.Scales = []string{ScaleShared}
	c.Fates = FatesOperation
	c.Lost = 0.02
	c.Bin = 100 * time.Millisecond
	c.Duration, c.SteadyDuration, c.Ops = tc.Duration, tc.Duration, 0
	c.OutageStart, c.OutageEnd = tc.Duration/4, tc.Duration*5/8
	c.OutageP, c.OutageRetryAfter = 0, 0
	// The server serves 1.6× the offered load, as in the default storm;
	// the overload scenario halves its capacity instead of raising the
	// load, so that no scenario offers more than Rate.
	c.Capacity = Capacity{MaxConcurrent: 4, ServiceTime: time.Duration(4 / (1.6 * tc.Rate) * float64(time.Second)),
		Queue: 16, QueueTimeout: 100 * time.Millisecond}
	c.ShedCost, c.ShedRetryAfter = 0.1, 0
	p.cfg = c

	var scens []scenario
	if p.admin {
		scens = []scenario{
			{name: ScenarioSteady, p: 0.2, clients: 1, duration: tc.Duration},
			{name: ScenarioOutage, clients: 1, duration: tc.Duration, outage: true},
			{name: ScenarioOverload, factor: 2, clients: 1, duration: tc.Duration},
		}
	} else {
		if tc.Rate*tc.Burst > tc.MaxRate {
			return nil, fmt.Errorf("storm: the burst scenario offers %g× -target-rate = %g ops/s, over the cap -max-rate %g",
				tc.Burst, tc.Burst*tc.Rate, tc.MaxRate)
		}
		scens = []scenario{
			{name: ScenarioTarget, clients: 1, duration: tc.Duration},
			{name: ScenarioOverload, factor: tc.Burst, clients: 1, duration: tc.Duration},
		}
		p.skipped = append(p.skipped, "injected failures, outage and lost responses (no fakeserver admin API at "+p.origin+"/_fake/)")
	}
	for _, sc := range scens {
		rate := tc.Rate
		if sc.name == ScenarioOverload && !p.admin {
			rate *= tc.Burst
		}
		for _, st := range c.strategies() {
			p.runs = append(p.runs, targetRun{sc: sc, st: st, rate: rate})
		}
	}
	if p.admin || tc.Method == http.MethodGet {
		for _, name := range headlineTail {
			i := indexTail(name)
			p.tail = append(p.tail, tailStrategies[i])
		}
		p.tail = append(p.tail, cfg.Tail.Own...)
	} else {
		p.skipped = append(p.skipped, "tail (hedging applies to GETs; -target-method is POST)")
	}
	if worst := p.worstTime(); worst > tc.MaxTime {
		return nil, fmt.Errorf("storm: this plan could last %v (%d runs × (%v of load + %v for the last operations)), over the cap -max-time %v",
			worst.Round(time.Second), len(p.runs)+len(p.tail), tc.Duration, tc.OpTimeout, tc.MaxTime)
	}
	return p, nil
}

func indexTail(name string) int {
	for i, s := range tailStrategies {
		if s.Name == name {
			return i
		}
	}
	panic("storm: unknown tail strategy " + name)
}

// requireLoopback returns an error unless host is a loopback address, or a
// name all of whose addresses are.
func requireLoopback(ctx context.Context, host string) error {
	refuse := fmt.Errorf("storm: -target host %q is not a loopback address: pass -i-own-this-target if it is yours to load", host)
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() {
			return refuse
		}
		return nil
	}
	if host == "localhost" {
		return nil
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return refuse
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return refuse
		}
	}
	return nil
}

// worstTime is the longest the plan can last: every run's load, then its
// slowest operation.
func (p *TargetPlan) worstTime() time.Duration {
	return time.Duration(len(p.runs)+len(p.tail)) * (p.tc.Duration + p.tc.OpTimeout)
}

// Admin reports whether the target serves the fakeserver's admin API.
func (p *TargetPlan) Admin() bool { return p.admin }

// Skipped lists the scenarios the plan leaves out, and why.
func (p *TargetPlan) Skipped() []string { return p.skipped }

// DryRun says in one line what the plan will send before it starts: the
// runs, the operations, the most requests they can make, the offered load,
// the concurrency and the longest time.
func (p *TargetPlan) DryRun() string {
	ops, reqs := 0, 0
	maxRate := 0.0
	for _, r := range p.runs {
		n := len(schedule(1, r.rate, r.sc.duration, p.cfg.Seed))
		ops += n
		reqs += n * attemptsOf(r.st.Name, p.cfg.Own)
		maxRate = max(maxRate, r.rate)
	}
	for range p.tail {
		n := len(schedule(1, p.tc.Rate, p.tc.Duration, p.cfg.Seed))
		ops += n
		reqs += 2 * n // one hedge at most
		maxRate = max(maxRate, p.tc.Rate)
	}
	mode := "no admin API: the target's own behaviour"
	if p.admin {
		mode = "fakeserver admin API: faults scripted"
	}
	return fmt.Sprintf("storm -target %s (%s): %d runs, %d operations, at most %d requests; ≤ %g ops/s offered, ≤ %d in flight, ≤ %v",
		p.tc.URL, mode, len(p.runs)+len(p.tail), ops, reqs, maxRate, p.tc.Concurrency, p.worstTime())
}

// probeAdmin reports whether GET /_fake/stats answers the fakeserver's
// Stats.
func (p *TargetPlan) probeAdmin(ctx context.Context) bool {
	var st map[string]json.RawMessage
	if err := p.adminCall(ctx, http.MethodGet, "/_fake/stats", nil, &st); err != nil {
		return false
	}
	_, ok := st["requests"]
	return ok
}

// adminCall sends one request to the admin API and decodes its JSON answer
// into out (if not nil).
func (p *TargetPlan) adminCall(ctx context.Context, method, path string, body any, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.origin+path, rd)
	if err != nil {
		return err
	}
	resp, err := p.adminClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("storm: %s %s: %s", method, path, resp.Status)
	}
	if out == nil {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return err
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(out)
}

// Run runs the plan, one run after the other, and returns what finished.
// When ctx is done it stops: the run under way is dropped, the summary
// holds the runs that finished and a note, and the error is ctx's.
func (p *TargetPlan) Run(ctx context.Context) (Summary, error) {
	defer p.adminClient.CloseIdleConnections()
	s := Summary{Engine: EngineTarget, Config: p.cfg, Target: p.tc.URL}
	for _, sk := range p.skipped {
		s.Notes = append(s.Notes, "skipped: "+sk+".")
	}
	if !p.admin {
		s.Notes = append(s.Notes, "load counts the requests the clients sent; duplicates and harm are not countable without the fakeserver's ledger.")
	}
	if len(p.runs) > 0 {
		var names []string
		var counts []int
		for _, r := range p.runs {
			names, counts = append(names, r.sc.name), append(counts, len(p.runParams(r).arrivals))
		}
		s.Notes = append(s.Notes, opsNote(names, counts))
	}
	for _, st := range p.cfg.Own {
		s.Own = append(s.Own, st.Name)
	}
	total := 0
	for _, r := range p.runs {
		total += len(schedule(1, r.rate, r.sc.duration, p.cfg.Seed))
	}
	total += len(p.tail) * len(schedule(1, p.tc.Rate, p.tc.Duration, p.cfg.Seed))
	prog := startProgress(p.cfg.Progress, total)
	defer prog.stop()
	done := 0
	for i, r := range p.runs {
		prog.setLabel(r.sc.String() + " " + r.st.Name + " (target)")
		res, err := p.runOne(ctx, i, r, prog)
		if err != nil {
			return p.partial(s, done, ctx, err)
		}
		s.Results = append(s.Results, res)
		done++
	}
	s.Results = Compare(s.Results)
	for _, st := range p.tail {
		prog.setLabel("tail " + st.Name + " (target)")
		res, err := p.runTail(ctx, st, prog)
		if err != nil {
			return p.partial(s, done, ctx, err)
		}
		s.Tail = append(s.Tail, res)
		done++
	}
	s.Tail = compareTail(s.Tail)
	return s, nil
}

// partial ends an interrupted Run.
func (p *TargetPlan) partial(s Summary, done int, ctx context.Context, err error) (Summary, error) {
	s.Results = Compare(s.Results)
	s.Tail = compareTail(s.Tail)
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	s.Notes = append(s.Notes, fmt.Sprintf("INTERRUPTED (%v) after %d of %d runs: a partial report; the run under way was dropped.",
		err, done, len(p.runs)+len(p.tail)))
	return s, err
}

// runParams returns the storm's parameters of run r.
func (p *TargetPlan) runParams(r targetRun) runParams {
	cfg := p.cfg
	cfg.Rate = r.rate
	if r.sc.name == ScenarioOverload && p.admin {
		cfg.Capacity.ServiceTime = time.Duration(float64(cfg.Capacity.MaxConcurrent) / (p.tc.Rate / r.sc.factor) * float64(time.Second))
	}
	return runParams{cfg: cfg, scale: ScaleShared, sc: r.sc, strategy: r.st, arrivals: schedule(1, r.rate, r.sc.duration, cfg.Seed)}
}

// newBase returns the transport of one run: at most Concurrency
// connections to the target.
func (p *TargetPlan) newBase() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxConnsPerHost = p.tc.Concurrency
	tr.MaxIdleConnsPerHost = p.tc.Concurrency
	tr.DisableCompression = true
	return tr
}

// runOne runs one strategy in one scenario against the target. An error
// means the run could not be done (ctx is done, or the admin API failed).
func (p *TargetPlan) runOne(ctx context.Context, idx int, r targetRun, prog *progress) (Result, error) {
	rp := p.runParams(r)
	cfg := rp.cfg
	if p.admin {
		if err := p.adminCall(ctx, http.MethodPut, "/_fake/scenario", rp.serverScenario(r.sc.p, false), nil); err != nil {
			return Result{}, err
		}
		if err := p.adminCall(ctx, http.MethodPost, "/_fake/reset", nil, nil); err != nil {
			return Result{}, err
		}
	}
	pr := newProbe(rp)
	tr := p.newBase()
	defer tr.CloseIdleConnections()
	newClient, release := r.st.clients()
	defer release()
	client := newClient(countingTransport{rt: tr, probe: pr})

	target := p.tc.URL
	if p.admin {
		target = p.origin + "/v1/charges"
	}
	op := func(ctx context.Context, i int) (bool, time.Duration, int) {
		method, body := p.tc.Method, p.tc.Body
		if p.admin {
			method, body = http.MethodPost, `{"op":`+strconv.Itoa(i)+`,"run":`+strconv.Itoa(idx)+`,"amount":1000,"currency":"usd"}`
		}
		var rd io.Reader
		if method == http.MethodPost {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, target, rd)
		if err != nil {
			return false, 0, 0
		}
		if rd != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set(OperationHeader, strconv.Itoa(i))
		if r.st.SetsKey && method == http.MethodPost {
			req.Header.Set(resilient.DefaultKeyHeader, "storm-"+p.nonce+"-"+strconv.Itoa(idx)+"-"+strconv.Itoa(i))
		}
		return do(client, req)
	}
	var scripted sync.WaitGroup
	outageCtx, endOutage := context.WithCancel(ctx)
	defer endOutage()
	onStart := func(start time.Time) {
		pr.begin(start)
		if r.sc.outage && p.admin {
			scripted.Go(func() { p.outage(outageCtx, rp, start) })
		}
	}
	d := p.drive(ctx, rp.arrivals, op, onStart, prog)
	endOutage()
	scripted.Wait()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}

	var st fakeserver.Stats
	var dups int
	if p.admin {
		// Requests the clients gave up on may still be queued at the
		// server: let them finish (up to 2 s) so that they count in this
		// run, not the next.
		for wait := 0; ; wait++ {
			if err := p.adminCall(ctx, http.MethodGet, "/_fake/stats", nil, &st); err != nil {
				return Result{}, err
			}
			if st.InFlight == 0 || wait == 20 || !sleep(ctx, 100*time.Millisecond) {
				break
			}
		}
		var ledger []fakeserver.Entry
		if err := p.adminCall(ctx, http.MethodGet, "/_fake/ledger", nil, &ledger); err != nil {
			return Result{}, err
		}
		dups = runDuplicates(ledger, idx)
	} else {
		for _, n := range pr.load.values() {
			st.Requests += int64(n)
		}
	}
	res := Result{
		Strategy: r.st.Name, Scenario: r.sc.name, Scale: ScaleShared, P: r.sc.p, Factor: r.sc.factor, Keyed: r.st.Keyed,
		Ops: len(d.ops), ServerRequests: st.Requests, Duplicates: dups, NoLedger: !p.admin, Shed: st.CapacityRejections,
		MaxLagMs: float64(d.maxLag) / float64(time.Millisecond), LateOps: d.late, Overran: d.overran,
		DurationS: r.sc.duration.Seconds(), BinS: cfg.Bin.Seconds(), Load: pr.load.values(), Goodput: goodput(d.ops, cfg.Bin),
		ok: make([]bool, len(d.ops)),
	}
	for i := range pr.seen {
		if !pr.seen[i].Load() {
			res.Unsent++
		}
	}
	res.summarize(rp, d.ops, st, pr)
	return res, nil
}

// outage scripts the outage through the admin API: every POST fails from
// OutageStart to OutageEnd after start.
func (p *TargetPlan) outage(ctx context.Context, rp runParams, start time.Time) {
	for _, step := range []struct {
		at     time.Duration
		outage bool
	}{{rp.cfg.OutageStart, true}, {rp.cfg.OutageEnd, false}} {
		if d := time.Until(start.Add(step.at)); d > 0 && !sleep(ctx, d) {
			return
		}
		_ = p.adminCall(ctx, http.MethodPut, "/_fake/scenario", rp.serverScenario(rp.sc.p, step.outage), nil)
	}
}

// runTail runs one tail strategy against the target: GETs of one object
// the fakeserver serves with a slow tail of latency, or GETs of the URL.
func (p *TargetPlan) runTail(ctx context.Context, st TailStrategy, prog *progress) (TailResult, error) {
	tc := p.cfg.Tail.resolved()
	tr := p.newBase()
	defer tr.CloseIdleConnections()
	var gets atomic.Int64
	base := countGets{tr, &gets}
	target := p.tc.URL
	if p.admin {
		run := tailRun{cfg: p.cfg, tc: tc}
		if err := p.adminCall(ctx, http.MethodPut, "/_fake/scenario", run.tailScenario(), nil); err != nil {
			return TailResult{}, err
		}
		// Forget the earlier runs: each operation's k-th request meets
		// the same latency in every run.
		if err := p.adminCall(ctx, http.MethodPost, "/_fake/reset", nil, nil); err != nil {
			return TailResult{}, err
		}
		loc, err := createItem(ctx, tr, p.origin)
		if err != nil {
			return TailResult{}, err
		}
		target = p.origin + loc
	}
	gets.Store(0)
	client := st.NewClient(base, tc)
	arrivals := schedule(1, p.tc.Rate, p.tc.Duration, p.cfg.Seed)
	op := func(ctx context.Context, i int) (bool, time.Duration, int) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return false, 0, 0
		}
		req.Header.Set(OperationHeader, strconv.Itoa(i))
		return do(client, req)
	}
	d := p.drive(ctx, arrivals, op, func(time.Time) {}, prog)
	if err := ctx.Err(); err != nil {
		return TailResult{}, err
	}
	return tailResult(st.Name, ScaleShared, d, gets.Load(), p.cfg.MaxDisturbed), nil
}

// do sends req with c and reports whether it got a 2xx, its latency, and
// the status of its answer (0: none).
func do(c *http.Client, req *http.Request) (bool, time.Duration, int) {
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return false, time.Since(t0), 0
	}
	_, rerr := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return rerr == nil && resp.StatusCode/100 == 2, time.Since(t0), resp.StatusCode
}

// driven is what drive did.
type driven struct {
	ops     []opResult
	late    int // started more than LateThreshold late, or never
	maxLag  time.Duration
	overran bool
}

// drive starts operation i at arrivals[i].at (open loop), with at most
// Concurrency in flight — an operation waits for a slot, and counts as late
// if it starts late — each bounded by OpTimeout, and waits for them. The
// run is bounded by its load, OpTimeout and a second of grace; ctx stops it.
func (p *TargetPlan) drive(ctx context.Context, arrivals []arrival, op func(context.Context, int) (bool, time.Duration, int),
	onStart func(time.Time), prog *progress) driven {
	var last time.Duration
	if len(arrivals) > 0 {
		last = arrivals[len(arrivals)-1].at
	}
	runCtx, cancel := context.WithTimeout(ctx, last+p.tc.OpTimeout+time.Second)
	defer cancel()
	d := driven{ops: make([]opResult, len(arrivals))}
	slots := make(chan struct{}, p.tc.Concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	onStart(start)
	started := 0
	for i, a := range arrivals {
		if w := time.Until(start.Add(a.at)); w > 0 && !sleep(runCtx, w) {
			break
		}
		select {
		case slots <- struct{}{}:
		case <-runCtx.Done():
		}
		if runCtx.Err() != nil {
			break
		}
		lag := time.Since(start) - a.at
		d.maxLag = max(d.maxLag, lag)
		if lag > LateThreshold {
			d.late++
		}
		started++
		wg.Go(func() {
			defer func() { <-slots }()
			octx, ocancel := context.WithTimeout(runCtx, p.tc.OpTimeout)
			defer ocancel()
			ok, lat, status := op(octx, i)
			d.ops[i] = opResult{ok: ok, start: a.at, latency: lat, status: status}
			prog.add(1)
		})
	}
	wg.Wait()
	d.overran = runCtx.Err() != nil && ctx.Err() == nil
	d.late += len(arrivals) - started
	prog.add(len(arrivals) - started)
	return d
}

// tailResult summarizes a tail run.
func tailResult(name, scale string, d driven, gets int64, maxDisturbed float64) TailResult {
	res := TailResult{Strategy: name, Scenario: ScenarioTail, Scale: scale, Ops: len(d.ops), ServerRequests: gets,
		Overran: d.overran, LateOps: d.late}
	if res.Ops == 0 {
		return res
	}
	res.Load = float64(gets) / float64(res.Ops)
	lat := make([]time.Duration, len(d.ops))
	good := 0
	for i, o := range d.ops {
		lat[i] = o.latency
		if o.ok {
			good++
		}
	}
	res.SuccessRate = float64(good) / float64(res.Ops)
	slices.Sort(lat)
	res.P50Ms, res.P99Ms, res.P999Ms = rankMs(lat, 0.5), rankMs(lat, 0.99), rankMs(lat, 0.999)
	res.Disturbed = res.Overran || res.LateOps > 0
	res.Invalid = res.Overran || float64(res.LateOps) > maxDisturbed*float64(res.Ops)
	return res
}

// runDuplicates counts the effects beyond the first per operation of run
// idx in a ledger that may also hold effects of earlier runs (requests they
// gave up on that the server executed later).
func runDuplicates(ledger []fakeserver.Entry, idx int) int {
	seen := map[int64]int{}
	dup := 0
	for _, e := range ledger {
		var obj struct {
			Op  int64 `json:"op"`
			Run *int  `json:"run"`
		}
		if json.Unmarshal(e.Object, &obj) != nil || obj.Run == nil || *obj.Run != idx {
			continue
		}
		seen[obj.Op]++
		if seen[obj.Op] > 1 {
			dup++
		}
	}
	return dup
}

// opsNote says how many operations each run of a -target plan sends, from
// the runs' own schedules (names[i] is run i's scenario, counts[i] its
// operations), and what one operation is worth in points of success.
func opsNote(names []string, counts []int) string {
	var order []int
	by := map[int][]string{}
	for i, n := range counts {
		if _, ok := by[n]; !ok {
			order = append(order, n)
		}
		if !slices.Contains(by[n], names[i]) {
			by[n] = append(by[n], names[i])
		}
	}
	const tail = "; late starts include waits for a -target-concurrency slot."
	if len(order) == 1 {
		n := order[0]
		return fmt.Sprintf("%d operations per run: one operation is %.1f points", n, 100/float64(max(n, 1))) + tail
	}
	var parts []string
	for _, n := range order {
		parts = append(parts, fmt.Sprintf("%d (%s: one is %.1f points)", n, strings.Join(by[n], ", "), 100/float64(max(n, 1))))
	}
	return "operations per run: " + strings.Join(parts, ", ") + tail
}
