package redisbudget

import (
	"sync/atomic"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/retrycontrol"
)

// budget is one host's budget in one process: the lease of retry permits the
// shared window granted, the first attempts not flushed yet, and the local
// budget that takes over in StateLocal. Its methods are the hot path: atomics
// only, no lock, no I/O.
type budget struct {
	f     *Fleet
	name  string
	local *retrycontrol.Budget // always counts this process's first attempts, and its retries

	shared  atomic.Bool  // StateShared; false: StateLocal
	lease   atomic.Int64 // permits left of the last grant (negative: given back too many, see RefundAt)
	pending atomic.Int64 // first attempts since the last flush
	demand  atomic.Int64 // retries asked for since the last flush
	asked   atomic.Bool  // the last flush told the window this process wants retries

	firsts, hits, misses, localOK, localNo atomic.Int64 // for Stats

	// Owned by the flusher (and Close after it).
	epoch  int64 // the bucket charged for the lease
	quiet  bool  // the lease was given back and nothing happened since
	primed bool  // a flush was sent at least once
}

func newBudget(f *Fleet, name string) *budget {
	b := &budget{f: f, name: name, local: retrycontrol.NewBudget(f.s.local)}
	b.shared.Store(!f.s.unlimited)
	return b
}

// DepositAt counts a first attempt: in the local budget, and towards the
// next flush, which it asks for when Config.FlushEvery are pending.
func (b *budget) DepositAt(now time.Time) {
	b.local.DepositAt(now)
	b.firsts.Add(1)
	if b.pending.Add(1) == b.f.s.every {
		b.f.wake()
	}
}

// WithdrawAt takes a permit from the lease in StateShared (and counts the
// retry in the local budget too, whether or not its own rule has room, so
// that a fallback starts from every retry this process sent recently), or asks the local budget in StateLocal. now
// only matters to the local budget: the shared window runs on Redis's clock.
func (b *budget) WithdrawAt(now time.Time) bool {
	if b.f.s.unlimited {
		return true
	}
	if !b.shared.Load() {
		ok := b.local.WithdrawAt(now)
		if ok {
			b.localOK.Add(1)
		} else {
			b.localNo.Add(1)
		}
		return ok
	}
	b.demand.Add(1)
	for {
		l := b.lease.Load()
		if l <= 0 {
			b.misses.Add(1)
			// The window does not know yet that this process wants
			// retries (it was quiet): one early flush tells it, rather
			// than refusing them until the next interval.
			if !b.asked.Load() && b.asked.CompareAndSwap(false, true) {
				b.f.wake()
			}
			return false
		}
		if b.lease.CompareAndSwap(l, l-1) {
			b.hits.Add(1)
			b.local.SpendAt(now) // counted even when the local rule would refuse it
			return true
		}
	}
}

// RefundAt gives back a permit taken by WithdrawAt(at): to the lease in
// StateShared, to the local budget in any case. A permit taken in one state
// and given back in the other goes where the budget is now: across a
// fallback it is lost (the safe side); across a recovery it adds one permit
// to the lease that the window never granted (at most one per retry whose
// backoff spans the recovery).
func (b *budget) RefundAt(at time.Time) {
	if b.shared.Load() {
		b.lease.Add(1)
	}
	b.local.RefundAt(at)
}

// request returns the budget's next flush, and false if it has nothing to
// report. It takes the pending first attempts and demand: apply must follow.
func (b *budget) request(closing bool) (Request, bool) {
	pending, demand, lease := b.pending.Load(), b.demand.Load(), b.lease.Load()
	idle := pending == 0 && demand == 0
	switch {
	case closing && idle && lease == 0:
		return Request{}, false
	case !closing && idle && b.primed && (b.quiet || lease == 0 && b.shared.Load()):
		return Request{}, false // nothing to say, and no lease to give back
	}
	b.primed = true
	r := Request{
		Name:        b.name,
		Process:     b.f.process,
		Deposits:    b.pending.Swap(0),
		Demand:      b.demand.Swap(0),
		Unused:      lease,
		UnusedEpoch: b.epoch,
		Want:        !closing && !idle,
	}
	if !b.shared.Load() {
		r.Unused = 0 // the lease was dropped when the budget fell back
	}
	return r, true
}

// apply applies the reply to the flush r: the new lease, or the fallback.
// The last flush, made by Close, changes no state: the budgets are local
// from then on, and Close says so.
func (b *budget) apply(r Request, rep Reply, closing bool) {
	f := b.f
	if closing {
		if rep.Err != nil {
			f.flushErrors.Add(1)
			f.dropped.Add(r.Deposits)
		} else {
			f.flushes.Add(1)
			f.deposits.Add(r.Deposits)
		}
		return
	}
	if rep.Err != nil {
		f.flushErrors.Add(1)
		f.dropped.Add(r.Deposits)
		was := b.shared.Swap(false)
		b.lease.Store(0) // the permits stay charged in the window: conservative
		b.quiet = false
		if was {
			f.fallbacks.Add(1)
			if f.s.onChange != nil {
				f.s.onChange(b.name, StateShared, StateLocal, rep.Err)
			}
		}
		return
	}
	f.flushes.Add(1)
	f.deposits.Add(r.Deposits)
	f.granted.Add(rep.Grant)
	if b.shared.Load() {
		// Permits used or given back while the flush was under way are
		// charged to the new grant: the lease becomes
		// Grant - (r.Unused - lease now).
		b.lease.Add(rep.Grant - r.Unused)
	} else {
		b.lease.Store(rep.Grant) // nothing used the lease while local
	}
	b.epoch = rep.Epoch
	b.quiet = !r.Want
	b.asked.Store(r.Demand > 0)
	if !b.shared.Swap(true) {
		f.recoveries.Add(1)
		if f.s.onChange != nil {
			f.s.onChange(b.name, StateLocal, StateShared, nil)
		}
	}
}

var _ resilient.Budget = (*budget)(nil)
