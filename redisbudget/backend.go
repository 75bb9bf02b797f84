package redisbudget

import (
	"context"
	"math"
	"sync"
	"time"
)

// windowBuckets is the number of buckets of a shared window.
const windowBuckets = 10

// A Backend keeps the shared windows of a Fleet's budgets: Redis (New), or
// memory (NewMemory) for simulations and tests of a fleet inside one
// process. The Fleet calls Flush from its background goroutine only, one call
// at a time, with a context that ends after Config.CallTimeout.
type Backend interface {
	// Flush applies each request to the window of its budget, in one
	// round trip if it can, and returns one Reply per request, in order.
	// An error that concerns all requests may be returned instead (then
	// the replies are ignored).
	Flush(ctx context.Context, rule Rule, reqs []Request) ([]Reply, error)
}

// Request is one budget's flush: what one process saw since its last one.
type Request struct {
	// Name is the budget's name (the destination host).
	Name string
	// Process identifies the process (the Fleet) among those sharing the
	// budget.
	Process string
	// Deposits is the number of first attempts since the last flush; they
	// are counted in the window's current bucket.
	Deposits int64
	// Unused is the part of the lease granted at the last flush that the
	// process did not use: if positive it is given back to the bucket that
	// was charged for it (if that bucket is still in the window); if
	// negative (the process used permits it was given back locally after
	// the last flush read its lease) the current bucket is charged for
	// them.
	Unused int64
	// UnusedEpoch is the Reply.Epoch of the grant Unused belongs to.
	UnusedEpoch int64
	// Demand is the number of retries the process asked for since its last
	// flush (served or refused). A process with demand shares the window's
	// permits with the other processes with demand; one without gets at
	// most one permit.
	Demand int64
	// Want is false when the process wants no permits (its budget went
	// idle, or it is closing): the grant is 0.
	Want bool
}

// Reply is the window's answer to one Request.
type Reply struct {
	// Grant is the number of retries the process may send until its next
	// flush (its lease). The window counts them as spent now; unused ones
	// come back with the next flush's Request.Unused.
	Grant int64
	// Epoch identifies the bucket charged for Grant.
	Epoch int64
	// Processes is the number of processes with demand sharing the window.
	Processes int64
	// Err is the error of this request, if any; Grant is then 0.
	Err error
}

// window is one budget's shared rolling window, as the Lua script keeps it
// in a Redis hash: 10 buckets, each stamped with its epoch (its index in the
// server's absolute time), a count of first attempts and one of retries
// (permits granted, less those given back).
type window struct {
	epoch, deposits, retries [windowBuckets]float64
	stamped                  [windowBuckets]bool
	processes                map[string]time.Time // processes with demand, by last flush
}

// apply applies r to w at server time now under rule and returns the reply.
// It is the Lua script of the Redis backend, in Go; the two must agree.
func (w *window) apply(now time.Time, rule Rule, r Request) Reply {
	us := float64(now.UnixMicro())
	e := math.Floor(us / float64(rule.Bucket/time.Microsecond))
	slot := int(math.Mod(e, windowBuckets))
	if !w.stamped[slot] || w.epoch[slot] != e {
		w.stamped[slot], w.epoch[slot], w.deposits[slot], w.retries[slot] = true, e, 0, 0
	}
	w.deposits[slot] += float64(r.Deposits)
	switch {
	case r.Unused > 0:
		re := float64(r.UnusedEpoch)
		rs := int(math.Mod(re, windowBuckets))
		if rs >= 0 && w.stamped[rs] && w.epoch[rs] == re && re > e-windowBuckets {
			w.retries[rs] = max(w.retries[rs]-float64(r.Unused), 0)
		}
	case r.Unused < 0:
		w.retries[slot] -= float64(r.Unused)
	}
	var d, t float64
	for i := range windowBuckets {
		if w.stamped[i] && w.epoch[i] > e-windowBuckets && w.epoch[i] <= e {
			d += w.deposits[i]
			t += w.retries[i]
		}
	}
	if w.processes == nil {
		w.processes = make(map[string]time.Time)
	}
	for p, at := range w.processes {
		if !at.After(now.Add(-rule.ProcessTTL)) {
			delete(w.processes, p)
		}
	}
	if r.Demand > 0 {
		w.processes[r.Process] = now
	} else {
		delete(w.processes, r.Process)
	}
	n := int64(len(w.processes))
	grant := grantFor(rule, d, t, n, r)
	w.retries[slot] += float64(grant)
	return Reply{Grant: grant, Epoch: int64(e), Processes: n}
}

// grantFor sizes a lease: of the permits left in the window (the rule's
// bound less the retries and outstanding leases, rounded up as a Budget
// rounds them), the larger of an equal share among the processes with
// demand (rounded up) and the process's demand of the last interval, which
// it is likely to ask for again; one permit for a process without demand;
// none if it wants none. Taking its demand rather than a share only, a
// process whose retries outrun the others' is not held to a share while the
// rest of the window waits unused in Redis; each process at least gets the
// permits its own first attempts just earned, since they are counted
// before the grant.
func grantFor(rule Rule, deposits, retries float64, processes int64, r Request) int64 {
	avail := rule.Reserve - retries
	if deposits > 0 {
		avail += rule.Ratio * deposits
	}
	if !r.Want || !(avail > 0) {
		return 0
	}
	permits := math.Ceil(avail)
	share := 1.0
	if r.Demand > 0 {
		share = max(math.Ceil(permits/float64(max(processes, 1))), float64(r.Demand))
	}
	return int64(min(share, permits))
}

// Memory is a Backend in memory, on the clock of the process (time.Now):
// the shared windows of Fleets that run in one process, for simulations
// (the storm benchmark runs it in simulated time) and tests. Its zero value
// is ready to use; NewMemory returns one. It is safe for concurrent use.
type Memory struct {
	mu      sync.Mutex
	windows map[string]*window // guarded by mu
	now     func() time.Time   // nil: time.Now
}

// NewMemory returns an empty Memory backend.
func NewMemory() *Memory { return &Memory{} }

// Flush applies reqs to the windows, at once. It fails only if ctx is done.
func (m *Memory) Flush(ctx context.Context, rule Rule, reqs []Request) ([]Reply, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := time.Now
	if m.now != nil {
		now = m.now
	}
	out := make([]Reply, len(reqs))
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.windows == nil {
		m.windows = make(map[string]*window)
	}
	t := now()
	for i, r := range reqs {
		w := m.windows[r.Name]
		if w == nil {
			w = &window{}
			m.windows[r.Name] = w
		}
		out[i] = w.apply(t, rule, r)
	}
	return out, nil
}
