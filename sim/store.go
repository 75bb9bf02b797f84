package sim

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/resilienthttp/resilient/persist"
)

// errStoreFault is the error of a Store call the plan fails.
var errStoreFault = errors.New("sim: injected store fault")

// errCrashed is the error of every Store call a crashed process makes.
var errCrashed = errors.New("sim: process crashed")

// faultyStore is one process's view of the durable Store: it fails or
// freezes the calls the plan says, counts each call as an event of the
// process (a crash may happen at any), and writes nothing once the process
// has crashed.
type faultyStore struct {
	s      persist.Store
	proc   *process
	faults []StoreFault

	mu    sync.Mutex
	calls map[[2]string]int // (op, method) → calls so far

	// inflight counts the calls in progress: a frozen call that the
	// Transport stopped waiting for (its context ended) still ends, in
	// virtual time, and the process waits for it before it is gone.
	inflight sync.WaitGroup
}

func (f *faultyStore) fault(op, method string) (StoreFault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = make(map[[2]string]int)
	}
	k := [2]string{op, method}
	f.calls[k]++
	for _, sf := range f.faults {
		if sf.Op == op && sf.Method == method && sf.N == f.calls[k] {
			return sf, true
		}
	}
	return StoreFault{}, false
}

// call runs one Store call as an event of the process: the crash may come
// before it (it is not made) or after it; a planned fault fails it or
// freezes it first, ignoring ctx as a stalled disk or network would.
func (f *faultyStore) call(op, method string, do func() error) error {
	f.inflight.Add(1)
	defer f.inflight.Done()
	if !f.proc.event() {
		return errCrashed
	}
	if sf, ok := f.fault(op, method); ok {
		if sf.Freeze <= 0 {
			f.proc.eventDone()
			return errStoreFault
		}
		time.Sleep(sf.Freeze)
	}
	if f.proc.isCrashed() {
		return errCrashed
	}
	err := do()
	f.proc.eventDone()
	return err
}

func (f *faultyStore) Claim(ctx context.Context, c persist.Record) (rec persist.Record, claimed bool, err error) {
	err = f.call(c.Operation, "claim", func() (err error) {
		rec, claimed, err = f.s.Claim(ctx, c)
		return err
	})
	return rec, claimed, err
}

func (f *faultyStore) Finish(ctx context.Context, op string, state persist.State, attempts int) error {
	return f.call(op, "finish", func() error { return f.s.Finish(ctx, op, state, attempts) })
}

func (f *faultyStore) Pending(ctx context.Context) (recs []persist.Record, err error) {
	err = f.call("", "pending", func() (err error) {
		recs, err = f.s.Pending(ctx)
		return err
	})
	return recs, err
}

func (f *faultyStore) Delete(ctx context.Context, op string) error {
	return f.call(op, "delete", func() error { return f.s.Delete(ctx, op) })
}

func (f *faultyStore) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	var n int
	err := f.call("", "expire", func() (err error) {
		n, err = f.s.Expire(ctx, cutoff)
		return err
	})
	return n, err
}
