package loops

import (
	"context"
	"errors"
	"sync"

	"github.com/resilienthttp/resilient/internal/reason"
)

// Callers in one process of one operation — calls with the same key of the
// application's (its header, ContextWithKey, a named operation in a Store)
// at the same time — take turns: a call whose operation is already in
// flight on the Transport waits, bounded by its own context, for the call
// in flight to end, then sends its own attempts, which a server that
// dedupes answers with the committed answer (a replay). So the server never
// sees two concurrent attempts of one key from this process: no 409 "in
// progress" answers them, and no retry token is spent polling for one. A
// call whose context ends while it waits sent nothing; its *Error says the
// outcome is unknown (the operation is in flight in this process, and its
// effect may exist) and carries the key, to resolve it later.
//
// A key the Transport mints is unique: its calls never look here. Across
// processes (two machines sending one key) the server's 409 "in progress"
// remains, and its retry is paced by the server's Retry-After, not by the
// host's retry tokens (see reserve).

// ErrInFlight is the cause of an *Error returned to a call whose context
// ended while the same operation was in flight in this process.
var ErrInFlight = errors.New("resilient: operation in flight in this process")

// Flights are a Transport's calls of the application's keys that are in
// flight or waiting for their turn, by key. An entry lives while a call
// holds or waits for it: memory follows the calls in progress. A key whose
// call has no other waiting for it maps to nil: the common case, one call
// of a key at a time, takes the lock twice and allocates nothing.
type Flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

// flight is the turn of one key that other calls wait for. turn holds a
// value while a call of the key is in flight. The calls waiting for it are
// blocked sending on it, and take it in the order they came. refs counts
// the calls holding or waiting for it (guarded by flights.mu).
type flight struct {
	turn chan struct{}
	refs int
}

// Acquire waits until no other call of key is in flight on the Transport,
// or until ctx is done or cancel closed (the caller's Request.Cancel, nil
// if none); it reports whether the call had to wait for another. Unless it
// returns an error, ctx's or errRequestCanceled (then nothing is held), the
// call must release key when it ends.
func (fs *Flights) Acquire(ctx context.Context, cancel <-chan struct{}, key string) (waited bool, err error) {
	fs.mu.Lock()
	f, ok := fs.m[key]
	if !ok {
		if fs.m == nil {
			fs.m = make(map[string]*flight)
		}
		fs.m[key] = nil // held, no one waiting
		fs.mu.Unlock()
		return false, nil
	}
	if f == nil {
		// The first call to wait for the one in flight: that one's turn
		// is now a value in a channel, which it gives up on release.
		f = &flight{turn: make(chan struct{}, 1), refs: 1}
		f.turn <- struct{}{}
		fs.m[key] = f
	}
	f.refs++
	fs.mu.Unlock()
	select {
	case f.turn <- struct{}{}:
		return true, nil
	case <-ctx.Done():
		fs.leave(key, f)
		return true, ctx.Err()
	case <-cancel:
		fs.leave(key, f)
		return true, reason.ErrRequestCanceled
	}
}

// Release ends the turn of the call of key that acquired it: the next
// waiting call, if any, takes it.
func (fs *Flights) Release(key string) {
	fs.mu.Lock()
	f := fs.m[key]
	if f == nil {
		delete(fs.m, key)
		fs.mu.Unlock()
		return
	}
	fs.mu.Unlock()
	<-f.turn
	fs.leave(key, f)
}

// leave drops a call's reference to f, and the entry with the last one.
func (fs *Flights) leave(key string, f *flight) {
	fs.mu.Lock()
	if f.refs--; f.refs == 0 {
		delete(fs.m, key)
	}
	fs.mu.Unlock()
}

// Size returns the number of keys with a call in flight or waiting.
func (fs *Flights) Size() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.m)
}
