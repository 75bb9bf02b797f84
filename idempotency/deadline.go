package idempotency

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// lazyDeadline is a context that ends at a deadline, or when its cancel
// is called, whichever comes first, with parent's values (parent is never
// cancelled: context.WithoutCancel). It arms its timer only when asked
// whether it ended (Done, Err, a child context, context.AfterFunc): an
// operation that never asks costs no timer. Until then it ends all the
// same, for whoever asks: the timer's context is made with the same
// deadline, and is cancelled at once if cancel was called.
// Its end is the cancel.
type lazyDeadline struct {
	parent   context.Context
	deadline time.Time
	real     atomic.Pointer[context.Context] // the timer's context, once asked
	mu       sync.Mutex
	cancel   context.CancelFunc // guarded by mu
	ended    bool               // guarded by mu; cancel was called
}

func (l *lazyDeadline) ctx() context.Context {
	if p := l.real.Load(); p != nil {
		return *p
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.real.Load(); p != nil {
		return *p
	}
	ctx, cancel := context.WithDeadline(l.parent, l.deadline)
	if l.ended {
		cancel()
	}
	l.cancel = cancel
	l.real.Store(&ctx)
	return ctx
}

func (l *lazyDeadline) end() {
	l.mu.Lock()
	l.ended = true
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (l *lazyDeadline) Deadline() (time.Time, bool) { return l.deadline, true }
func (l *lazyDeadline) Done() <-chan struct{}       { return l.ctx().Done() }
func (l *lazyDeadline) Err() error                  { return l.ctx().Err() }
func (l *lazyDeadline) Value(key any) any           { return l.parent.Value(key) }

// AfterFunc lets the context package register a child's cancellation
// without a goroutine (as for its own contexts).
func (l *lazyDeadline) AfterFunc(f func()) (stop func() bool) {
	return context.AfterFunc(l.ctx(), f)
}

func (l *lazyDeadline) String() string { return "idempotency.lazyDeadline" }
