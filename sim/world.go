package sim

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
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
