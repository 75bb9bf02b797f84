package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/bolt"
)

// Call is what one caller saw of one call of an operation.
type Call struct {
	Op      string
	Caller  int // -1: the resumer
	Proc    int // 1: the first process, 2: the resumer's
	Start   time.Time
	Return  time.Time // when Do returned
	BodyEnd time.Time // when the body was read (or failed), if a response came
	// Bound is the time by which Do must return (the deadline, the
	// caller's cancel, the crash, the earliest); zero if none.
	Bound     time.Time
	Status    int
	ID        string // the created object's id, from a 2xx body read whole
	Err       error
	ResErr    *resilient.Error // Err as a *resilient.Error, if it is one
	Abandoned bool             // its process crashed before it returned
}

// Result is what a schedule did, for the invariants.
type Result struct {
	Plan    *Plan
	Calls   []Call
	Effects map[string][]string // op → ids of the objects created, oldest first
	// States is each named operation's record state in the Store at the
	// end (absent: never claimed).
	States  map[string]persist.State
	Crashed time.Time // when the first process crashed; zero if it did not
	Resumed map[string]bool
	End     time.Time
	Server  fakeserver.Stats // what the server saw
	// Arrivals counts the requests of each operation that reached the
	// server (redirects not included).
	Arrivals map[string]int
}

// Run runs the schedule p; it must be called inside a synctest bubble, and
// every goroutine it starts has ended when it returns. dir is a directory
// for a bolt file (used when p.Store is "bolt").
func Run(p *Plan, dir string) (*Result, error) {
	res := &Result{Plan: p, Effects: map[string][]string{}, States: map[string]persist.State{}, Resumed: map[string]bool{}}
	fs := fakeserver.NewUnstarted(fakeserver.WithScenario(fakeserver.Scenario{
		Mode: map[bool]fakeserver.Mode{false: fakeserver.ModeIETF, true: fakeserver.ModeStripe}[p.Stripe],
		TTL:  fakeserver.Duration(p.ServerTTL),
	}))
	srv := &server{fs: fs, plan: p, arrivals: map[string]int{}}
	nw := newNetwork(p)
	hs := &http.Server{Handler: srv, IdleTimeout: p.IdleTimeout, ErrorLog: quietLog}
	served := make(chan struct{})
	go func() { hs.Serve(nw); close(served) }()
	var closeOnce sync.Once
	closeServer := func() {
		closeOnce.Do(func() {
			hs.Close()
			nw.Close()
			<-served
			fs.Close() // waits for the handlers: every effect is in the ledger
		})
	}
	defer closeServer()

	var durable persist.Store
	var db *bolt.Store
	path := filepath.Join(dir, fmt.Sprintf("sim-%d.db", p.Seed))
	switch p.Store {
	case "memory":
		durable = persist.NewMemory()
	case "bolt":
		var err error
		if db, err = bolt.Open(path); err != nil {
			return nil, err
		}
		durable = db
	}
	claimed := &claimedSet{ops: map[string]bool{}}

	p1 := newProcess(1, p, nw, durable, claimed, p.Crash, p.StoreFaults)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range p.Ops {
		op := &p.Ops[i]
		for c := range max(op.Callers, 1) {
			wg.Go(func() {
				time.Sleep(op.Start)
				if p1.isCrashed() {
					return // a dead process makes no more calls
				}
				call := p1.call(op, c)
				mu.Lock()
				res.Calls = append(res.Calls, call)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	res.Crashed = p1.crashTime()
	p1.shutdown()
	if db != nil {
		// A crashed process's database is closed, never left locked:
		// the resumer opens the file again.
		if err := db.Close(); err != nil {
			return nil, err
		}
		db = nil
	}
	if p.Store == "bolt" {
		var err error
		if db, err = bolt.Open(path); err != nil {
			return nil, err
		}
		durable = db
	}
	if p.Resume && p.Store != "" {
		time.Sleep(p.ResumeAfter)
		p2 := newProcess(2, p, nw, durable, claimed, nil, nil)
		recs, err := p2.store.Pending(context.Background())
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			op := p.op(rec.Operation)
			if op == nil {
				continue
			}
			res.Resumed[op.Name] = true
			wg.Go(func() {
				call := p2.call(op, -1)
				mu.Lock()
				res.Calls = append(res.Calls, call)
				mu.Unlock()
			})
		}
		wg.Wait()
		p2.shutdown()
	}
	if durable != nil {
		pending, err := durable.Pending(context.Background())
		if err != nil {
			return nil, err
		}
		for op := range claimed.all() {
			res.States[op] = persist.Done
		}
		for _, rec := range pending {
			res.States[rec.Operation] = persist.Pending
		}
	}
	if db != nil {
		if err := db.Close(); err != nil {
			return nil, err
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	closeServer()
	res.Server = fs.Stats()
	res.Arrivals = srv.arrivals // the handlers have all returned
	for _, e := range fs.Ledger() {
		res.Effects[e.Collection] = append(res.Effects[e.Collection], e.ID)
	}
	res.End = time.Now()
	return res, nil
}

func (p *Plan) op(name string) *Op {
	for i := range p.Ops {
		if p.Ops[i].Name == name {
			return &p.Ops[i]
		}
	}
	return nil
}

// quietLog drops the http.Server's log lines (aborted handlers).
var quietLog = newDiscardLogger()

// server is the API: a redirect in front of some operations, the faults
// of the plan, and the fakeserver's handler (which dedupes by key unless
// the plan's server ignores keys: then it never sees them).
type server struct {
	fs   *fakeserver.Server
	plan *Plan

	mu       sync.Mutex
	arrivals map[string]int // op → requests arrived
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if name, ok := strings.CutPrefix(r.URL.Path, "/r/"); ok {
		op := s.plan.op(strings.Split(name, "/")[0])
		if op == nil || op.Redirect == 0 {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Location", "/v1/"+name) // name holds the rest of the path
		w.WriteHeader(op.Redirect)
		return
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	var f Fault
	if op := s.plan.op(name); op != nil {
		s.mu.Lock()
		k := s.arrivals[name]
		s.arrivals[name]++
		s.mu.Unlock()
		if k < len(op.Faults) {
			f = op.Faults[k]
		}
	}
	if s.plan.IgnoreKeys {
		r.Header.Del("Idempotency-Key")
	}
	switch f.Kind {
	case FaultNone:
	case FaultDrop:
		panic(http.ErrAbortHandler) // closed before the server handled it
	default:
		if err := s.fs.Enqueue(r.Method+" "+r.URL.Path, fakeFault(f)); err != nil {
			panic(err) // a plan's fault is always valid
		}
	}
	s.fs.Handler().ServeHTTP(w, r)
}

// fakeFault is the fakeserver's form of a server-side fault.
func fakeFault(f Fault) fakeserver.Fault {
	switch f.Kind {
	case FaultStatus:
		return fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: f.Status, RetryAfter: fakeserver.Duration(f.RetryAfter)}
	case FaultReset:
		return fakeserver.Fault{Kind: fakeserver.FaultReset}
	case FaultLost:
		return fakeserver.Fault{Kind: fakeserver.FaultLostResponse}
	case FaultHang:
		return fakeserver.Fault{Kind: fakeserver.FaultHang}
	case FaultLatency:
		return fakeserver.Fault{Kind: fakeserver.FaultLatency, Latency: fakeserver.Duration(f.Delay)}
	case FaultTruncated:
		return fakeserver.Fault{Kind: fakeserver.FaultTruncatedBody}
	case FaultSlowBody:
		return fakeserver.Fault{Kind: fakeserver.FaultSlowBody, BodyDuration: fakeserver.Duration(max(f.Delay, time.Millisecond))}
	}
	return fakeserver.Fault{}
}

// claimedSet is every operation a Store claim returned, in any process.
type claimedSet struct {
	mu  sync.Mutex
	ops map[string]bool
}

func (c *claimedSet) add(op string) {
	c.mu.Lock()
	c.ops[op] = true
	c.mu.Unlock()
}

func (c *claimedSet) all() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]bool, len(c.ops))
	for k := range c.ops {
		out[k] = true
	}
	return out
}

// process is one client process: a Transport over an http.Transport that
// dials the in-memory network, a view of the Store, and the context every
// call derives from, cancelled when the process crashes.
type process struct {
	n      int
	plan   *Plan
	ctx    context.Context
	cancel context.CancelFunc
	base   *http.Transport
	client *http.Client
	store  *faultyStore // nil without a Store

	events  atomic.Int64
	crash   *Crash
	crashed atomic.Bool
	once    sync.Once
	crashMu sync.Mutex
	crashAt time.Time
}

func newProcess(n int, p *Plan, nw *network, durable persist.Store, claimed *claimedSet, crash *Crash, faults []StoreFault) *process {
	pr := &process{n: n, plan: p, crash: crash}
	pr.ctx, pr.cancel = context.WithCancel(context.Background())
	pr.base = &http.Transport{DialContext: nw.dial, MaxIdleConnsPerHost: 4, DisableCompression: true}
	opts := []resilient.Option{
		resilient.WithMaxAttempts(p.MaxAttempts),
		resilient.WithBackoff(resilient.Seeded(resilient.FullJitter(p.BackoffBase, p.BackoffMax), p.Seed)),
		resilient.WithKeyRetention(p.KeyRetention),
	}
	if p.AttemptTimeout > 0 {
		opts = append(opts, resilient.WithAttemptTimeout(p.AttemptTimeout))
	}
	if p.RetryAfterMax > 0 {
		opts = append(opts, resilient.WithRetryAfterMax(p.RetryAfterMax))
	}
	if p.Declared {
		opts = append(opts, resilient.WithDedupingServer("sim"))
	}
	if p.NoTokens {
		opts = append(opts, resilient.WithoutRetryTokens())
	}
	if p.Hedge > 0 {
		opts = append(opts, resilient.WithHedging(resilient.HedgingConfig{Delay: p.Hedge, MaxHedges: p.Hedges}))
	}
	if durable != nil {
		pr.store = &faultyStore{s: &claimRecorder{Store: durable, claimed: claimed}, proc: pr, faults: faults}
		opts = append(opts, resilient.WithStore(pr.store))
	}
	tr := resilient.NewTransport(eventTransport{pr}, opts...)
	pr.client = &http.Client{Transport: tr}
	return pr
}

// event counts one event of the process (a base round trip, a Store
// call) and reports whether it may happen: false once the process has
// crashed, or when it crashes now, before this event.
func (pr *process) event() bool {
	if pr.crashed.Load() {
		return false
	}
	n := pr.events.Add(1)
	if pr.crash != nil && n == int64(pr.crash.Event) && !pr.crash.After {
		pr.die()
		return false
	}
	return true
}

// eventDone crashes the process after its event, if the plan says so. The
// event is identified by the count, read when it started: callers pass
// nothing, so the crash comes after the first event to end once the
// count has reached the planned one.
func (pr *process) eventDone() {
	if pr.crash != nil && pr.crash.After && pr.events.Load() >= int64(pr.crash.Event) {
		pr.die()
	}
}

func (pr *process) isCrashed() bool { return pr.crashed.Load() }

func (pr *process) die() {
	pr.once.Do(func() {
		pr.crashMu.Lock()
		pr.crashAt = time.Now()
		pr.crashMu.Unlock()
		pr.crashed.Store(true)
		pr.cancel()
	})
}

func (pr *process) crashTime() time.Time {
	pr.crashMu.Lock()
	defer pr.crashMu.Unlock()
	return pr.crashAt
}

// shutdown ends the process once its calls have returned: its context,
// its idle connections, and the Store calls still in progress (a frozen
// one ends in virtual time).
func (pr *process) shutdown() {
	pr.cancel()
	pr.base.CloseIdleConnections()
	if pr.store != nil {
		// A Store call the Transport stopped waiting for may not have
		// started yet: let every goroutine run until it blocks, so that
		// each such call is counted, then wait for them.
		synctest.Wait()
		pr.store.inflight.Wait()
	}
}

// eventTransport is the process's base transport: each round trip is an
// event at which the process may crash.
type eventTransport struct{ pr *process }

func (t eventTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.pr.event() {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errCrashed
	}
	resp, err := t.pr.base.RoundTrip(req)
	t.pr.eventDone()
	return resp, err
}

// claimRecorder notes every operation the durable Store claimed.
type claimRecorder struct {
	persist.Store
	claimed *claimedSet
}

func (c *claimRecorder) Claim(ctx context.Context, cand persist.Record) (persist.Record, bool, error) {
	rec, ok, err := c.Store.Claim(ctx, cand)
	if err == nil {
		c.claimed.add(cand.Operation)
	}
	return rec, ok, err
}

// call makes one call of op as caller c (-1: the resumer) and reports what
// it saw.
func (pr *process) call(op *Op, c int) Call {
	ctx := pr.ctx
	start := time.Now()
	out := Call{Op: op.Name, Caller: c, Proc: pr.n, Start: start}
	var bounds []time.Time
	if op.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, op.Deadline)
		defer cancel()
		bounds = append(bounds, start.Add(op.Deadline))
	}
	if op.CancelAt > 0 && c >= 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		stop := time.AfterFunc(op.CancelAt, cancel)
		defer stop.Stop()
		defer cancel()
		bounds = append(bounds, start.Add(op.CancelAt))
	}
	switch op.Keying {
	case KeyExplicit:
		ctx = resilient.ContextWithKey(ctx, "sim-"+op.Name)
	case KeyNamed:
		ctx = resilient.ContextWithOperation(ctx, op.Name)
	}
	url := "http://sim/v1/" + op.Name
	if op.Redirect != 0 {
		url = "http://sim/r/" + op.Name
	}
	var req *http.Request
	var err error
	if op.Method == http.MethodGet {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, url+"/ob_00000000", nil)
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"amount":100}`))
		req.Header.Set("Content-Type", "application/json")
	}
	if err != nil {
		panic(err)
	}
	resp, err := pr.client.Do(req)
	out.Return = time.Now()
	if err != nil {
		out.Err = err
		errors.As(err, &out.ResErr)
	} else {
		out.Status = resp.StatusCode
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		out.BodyEnd = time.Now()
		if rerr == nil && resp.StatusCode/100 == 2 {
			var obj struct{ ID string }
			if json.Unmarshal(body, &obj) == nil {
				out.ID = obj.ID
			}
		}
	}
	if t := pr.crashTime(); !t.IsZero() && !t.After(out.Return) {
		out.Abandoned = true
		bounds = append(bounds, t)
	}
	for _, b := range bounds {
		if out.Bound.IsZero() || b.Before(out.Bound) {
			out.Bound = b
		}
	}
	return out
}
