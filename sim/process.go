package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/backoff"
	"github.com/resilienthttp/resilient/persist"
)

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
		resilient.WithBackoff(backoff.Seeded(resilient.FullJitter(p.BackoffBase, p.BackoffMax), p.Seed)),
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
		opts = append(opts, resilient.WithRetryControl())
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

// eventDone crashes the process as an event ends, when the plan's crash
// comes after an event and the count of events has reached it: with
// events in flight at once, the first to end after the planned one
// began.
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
