package redisbudget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resilienthttp/resilient"
)

// ErrTimeout is the error a budget falls back with when its flush did not
// answer within Config.CallTimeout, or was not sent because the call before
// it, which timed out, has not returned yet (errors.Is(err, ErrTimeout)).
// Other errors are the backend's (go-redis's, wrapped).
var ErrTimeout = errors.New("redisbudget: flush timed out")

// ErrClosed is the error Config.OnStateChange gets for each shared budget
// when Close makes it local.
var ErrClosed = errors.New("redisbudget: fleet closed")

// errBusy is the error of a flush not sent because the previous call to the
// backend has not returned yet (its timeout already passed).
var errBusy = fmt.Errorf("%w: the previous call has not returned yet", ErrTimeout)

// A Fleet is a set of retry budgets shared by every process that uses the
// same Redis and Config.Prefix: one per destination host, each a rolling
// window with the rule of resilient.RetryBudget — over the last Window, the
// fleet's retries to a host stay below Ratio × the fleet's first attempts to
// it + MinPerSecond × Window seconds — kept in Redis on the Redis server's
// clock.
//
// Most callers want New and
// resilient.WithRetryControl(resilient.SharedBudget(fleet.For)), and Close
// when done. The budgets For returns answer from local state only (one
// atomic add for a first attempt, a compare-and-swap on the local lease of
// retry permits for a retry) and never wait for Redis: one background
// goroutine per Fleet flushes them, all in one pipeline, when a budget has
// counted Config.FlushEvery first attempts or Config.FlushInterval has
// passed. When a flush fails or takes longer than Config.CallTimeout, the
// budgets it carried fall back to a local budget with the same
// rule (StateLocal), reported through Config.OnStateChange and Stats, until
// a flush succeeds again.
//
// A Fleet is safe for concurrent use by multiple goroutines.
type Fleet struct {
	s       settings
	backend Backend
	process string

	mu      sync.Mutex
	budgets map[string]*budget // guarded by mu; never removed
	list    []*budget          // guarded by mu; budgets in creation order

	kick      chan struct{} // a budget wants a flush now (buffer 1)
	stop      chan struct{} // closed by Close
	done      chan struct{} // closed when the flusher has returned
	inflight  sync.WaitGroup
	busy      atomic.Bool // a call to the backend has not returned
	closeOnce sync.Once
	closeErr  error

	roundTrips, flushes, flushErrors, deposits, dropped, granted atomic.Int64
	fallbacks, recoveries                                        atomic.Int64
}

// New returns a Fleet whose budgets are shared through client (a
// *redis.Client, a *redis.ClusterClient or a *redis.Ring of go-redis v9),
// configured by cfg with its zero fields resolved as documented on Config.
// It starts the Fleet's background goroutine: call Close when done.
//
// The client's own settings still apply to each call (pool size, dial
// timeout, retries); the Fleet bounds how long it waits for a call by
// Config.CallTimeout whatever they are, but a call it stopped waiting for
// goes on until the client ends it (by its ReadTimeout, unless the client was
// built with ContextTimeoutEnabled), and Close waits for it.
func New(client goredis.UniversalClient, cfg Config) *Fleet {
	s := cfg.resolve()
	return newFleet(NewRedis(client, s.prefix), s)
}

// NewWithBackend is New with another Backend, such as a Memory.
// Config.Prefix is not used.
func NewWithBackend(b Backend, cfg Config) *Fleet {
	return newFleet(b, cfg.resolve())
}

func newFleet(b Backend, s settings) *Fleet {
	var id [8]byte
	_, _ = rand.Read(id[:]) // never fails (crypto/rand)
	f := &Fleet{
		s:       s,
		backend: b,
		process: hex.EncodeToString(id[:]),
		budgets: make(map[string]*budget),
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go f.run()
	return f
}

// For returns the budget of destination host (the name of its window), the
// same one on every call; it is the function to pass to
// resilient.SharedBudget. A new budget starts in StateShared with an empty
// lease: its first retries are refused until its first flush, which For
// asks for at once. After Close, For returns budgets that are local only.
func (f *Fleet) For(host string) resilient.Budget {
	f.mu.Lock()
	b, ok := f.budgets[host]
	if !ok {
		b = newBudget(f, host)
		f.budgets[host] = b
		f.list = append(f.list, b)
	}
	f.mu.Unlock()
	if !ok {
		select {
		case <-f.stop:
			b.shared.Store(false)
		default:
			f.wake()
		}
	}
	return b
}

// wake asks the flusher for a flush now, without waiting.
func (f *Fleet) wake() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// Close stops the Fleet's background goroutine after a last flush that
// counts the first attempts not flushed yet and gives back every unused
// permit, and waits for any call to Redis still under way. It returns the
// last flush's error, if any, and nil when called again. The budgets are
// local from then on: each that was shared is reported to
// Config.OnStateChange with ErrClosed. It does not close the Redis client.
func (f *Fleet) Close() error {
	f.closeOnce.Do(func() {
		close(f.stop)
		<-f.done
		f.inflight.Wait() // a call the flusher stopped waiting for
		f.closeErr = f.flush(true)
		f.mu.Lock()
		var closed []string
		for _, b := range f.list {
			if b.shared.Swap(false) {
				closed = append(closed, b.name)
			}
		}
		f.mu.Unlock()
		if f.s.onChange != nil {
			for _, name := range closed {
				f.s.onChange(name, StateShared, StateLocal, ErrClosed)
			}
		}
		f.inflight.Wait()
	})
	return f.closeErr
}

// run is the flusher: a flush every interval since the last one, and one
// whenever a budget asks for it.
func (f *Fleet) run() {
	defer close(f.done)
	t := time.NewTimer(f.s.interval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		case <-f.kick:
		}
		_ = f.flush(false)
		t.Reset(f.s.interval)
	}
}

// flush flushes every budget with something to report in one call to the
// backend, and applies the replies. Only the flusher (and Close, after it)
// calls it. With closing, every budget gives its lease back and asks for no
// more.
func (f *Fleet) flush(closing bool) error {
	if f.s.unlimited {
		return nil
	}
	f.mu.Lock()
	list := append([]*budget(nil), f.list...)
	f.mu.Unlock()
	var due []*budget
	var reqs []Request
	for _, b := range list {
		r, ok := b.request(closing)
		if ok {
			due = append(due, b)
			reqs = append(reqs, r)
		}
	}
	if len(reqs) == 0 {
		return nil
	}
	replies, err := f.call(reqs)
	var firstErr error
	for i, b := range due {
		rep := Reply{Err: err}
		if err == nil {
			if i < len(replies) {
				rep = replies[i]
			} else {
				rep.Err = errors.New("redisbudget: backend returned too few replies")
			}
		}
		if rep.Err != nil && firstErr == nil {
			firstErr = rep.Err
		}
		b.apply(reqs[i], rep, closing)
	}
	return firstErr
}

// call runs one backend call, waiting at most the call timeout for it. A
// call it stops waiting for goes on in its goroutine; no other call starts
// until it has returned.
func (f *Fleet) call(reqs []Request) ([]Reply, error) {
	if !f.busy.CompareAndSwap(false, true) {
		return nil, errBusy
	}
	f.roundTrips.Add(1)
	type result struct {
		replies []Reply
		err     error
	}
	ch := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), f.s.timeout)
	f.inflight.Add(1)
	go func() {
		defer f.inflight.Done()
		defer cancel()
		reps, err := f.backend.Flush(ctx, f.s.rule, reqs)
		// Not busy before the flusher hears the result: it may call again
		// at once.
		f.busy.Store(false)
		ch <- result{reps, err}
	}()
	t := time.NewTimer(f.s.timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.replies, r.err
	case <-t.C:
		return nil, ErrTimeout
	}
}

// Stats is a snapshot of a Fleet's counters, since New.
type Stats struct {
	// RoundTrips is the number of calls to the backend (each a pipeline of
	// the budgets due: one round trip to a single Redis, plus one if the
	// server had lost the script).
	RoundTrips int64
	// Flushes and FlushErrors count budget flushes that succeeded and that
	// failed or timed out.
	Flushes, FlushErrors int64
	// FirstAttempts is the number of first attempts counted (DepositAt).
	FirstAttempts int64
	// Deposited is the number of first attempts flushed to the shared
	// windows; Dropped those of failed flushes, which are not counted in
	// the shared window (the local budgets count them).
	Deposited, Dropped int64
	// Granted is the number of retry permits the shared windows granted,
	// a permit counted again each time it is given back unused and granted
	// anew (LeaseHits is what was used).
	Granted int64
	// LeaseHits and LeaseMisses count WithdrawAt calls in StateShared that
	// the lease allowed and refused.
	LeaseHits, LeaseMisses int64
	// LocalAllowed and LocalRefused count WithdrawAt calls in StateLocal
	// that the local budget allowed and refused.
	LocalAllowed, LocalRefused int64
	// Fallbacks and Recoveries count switches of a budget to StateLocal
	// and back to StateShared.
	Fallbacks, Recoveries int64
	// Budgets is the number of budgets; Local how many are in StateLocal.
	Budgets, Local int
}

// Stats returns a snapshot of f's counters.
func (f *Fleet) Stats() Stats {
	s := Stats{
		RoundTrips: f.roundTrips.Load(), Flushes: f.flushes.Load(), FlushErrors: f.flushErrors.Load(),
		Deposited: f.deposits.Load(), Dropped: f.dropped.Load(), Granted: f.granted.Load(),
		Fallbacks: f.fallbacks.Load(), Recoveries: f.recoveries.Load(),
	}
	f.mu.Lock()
	list := append([]*budget(nil), f.list...)
	f.mu.Unlock()
	s.Budgets = len(list)
	for _, b := range list {
		s.FirstAttempts += b.firsts.Load()
		s.LeaseHits += b.hits.Load()
		s.LeaseMisses += b.misses.Load()
		s.LocalAllowed += b.localOK.Load()
		s.LocalRefused += b.localNo.Load()
		if !b.shared.Load() {
			s.Local++
		}
	}
	return s
}

// State returns the state of the budget of host, and false if For has not
// been called for it.
func (f *Fleet) State(host string) (State, bool) {
	f.mu.Lock()
	b, ok := f.budgets[host]
	f.mu.Unlock()
	if !ok {
		return 0, false
	}
	if b.shared.Load() {
		return StateShared, true
	}
	return StateLocal, true
}
