package storm

import (
	"cmp"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/bench"
	"github.com/resilienthttp/resilient/internal/backoff"
	"github.com/resilienthttp/resilient/pushback"
)

// turns makes a virtual run a function of its seed alone. synctest makes
// time virtual, not scheduling: goroutines that wake at one instant run in
// any order, and where they touch shared state (a server's capacity slots,
// a Transport's retry tokens and jitter source) the order changes the
// outcome. So in a virtual run every request a client sends to the server,
// and every answer it gets back, waits for its turn, and one goroutine —
// the driver (drive) — gives the turns: only when every other goroutine of
// the bubble is blocked (synctest.Wait), one at a time, the smallest key
// first, where the key is a hash of the seed, the operation and how many
// turns it took before; and at most one per nanosecond, so that no two
// answers, and no two waits that start from one, share an instant. The
// driver also starts the operations and switches the outage on and off,
// itself, at their instants.
//
// What a turn orders is the harness and the fake server; the clients run
// between their turns as they would. Jitter is drawn from a source seeded
// per client (seededBase); the command runs virtual runs with GOMAXPROCS=1,
// so that goroutines the clients' own timers wake at one instant (which the
// nanosecond rule makes rare) run in the runtime's order.
type turns struct {
	seed uint64
	wake chan struct{} // the driver sleeps on it; buffered, 1
	cap  *vcapacity    // the server's capacity, when the driver runs it

	mu      sync.Mutex
	pending []turn
	taken   []uint32          // by operation: turns taken so far
	other   uint32            // turns of requests that name no operation
	named   map[uint64]uint32 // by waitFor's id: turns taken so far
	stopped bool              // the driver returned: waitFor waits no more
}

// turn is a goroutine waiting for its turn.
type turn struct {
	key   uint64
	op, n int
	ch    chan struct{}
}

func newTurns(seed uint64, ops int) *turns {
	return &turns{seed: seed, wake: make(chan struct{}, 1), taken: make([]uint32, ops)}
}

// wait blocks until the driver gives the caller, a goroutine of operation
// op (-1: none), its turn.
func (d *turns) wait(op int) uint64 {
	ch := make(chan struct{})
	d.mu.Lock()
	var n uint32
	if op >= 0 && op < len(d.taken) {
		n = d.taken[op]
		d.taken[op]++
	} else {
		op = -1
		n = d.other
		d.other++
	}
	key := mix(d.seed, uint64(op+1), uint64(n))
	d.pending = append(d.pending, turn{key: key, op: op, n: int(n), ch: ch})
	d.mu.Unlock()
	d.notify()
	<-ch
	return key
}

// waitFor blocks until the driver gives the caller its turn, as wait does,
// for a goroutine of no operation that names itself id (a client's fleet
// flusher, fleet.go). Its key is a function of the seed, id and how many
// turns id took before, never of the order the runtime ran the callers in.
func (d *turns) waitFor(id uint64) {
	ch := make(chan struct{})
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return // the run is over: a fleet closing flushes at once
	}
	if d.named == nil {
		d.named = make(map[uint64]uint32)
	}
	n := d.named[id]
	d.named[id]++
	key := mix(d.seed, id|1<<63, uint64(n))
	d.pending = append(d.pending, turn{key: key, op: -2, n: int(n), ch: ch})
	d.mu.Unlock()
	d.notify()
	<-ch
}

// stop ends the driver's turns: it releases waitFor's callers still
// pending, and later ones do not wait. The run is over: every operation
// has ended, and what is left is the fleets' flushes as they close.
func (d *turns) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	for _, t := range d.pending {
		close(t.ch)
	}
	d.pending = nil
}

// notify wakes the driver if it sleeps.
func (d *turns) notify() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// next removes and returns the pending turn with the smallest key, if any.
func (d *turns) next() (turn, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.pending) == 0 {
		return turn{}, false
	}
	i := 0
	for j, t := range d.pending[1:] {
		if cmp.Or(cmp.Compare(t.key, d.pending[i].key), cmp.Compare(t.op, d.pending[i].op), cmp.Compare(t.n, d.pending[i].n)) < 0 {
			i = j + 1
		}
	}
	t := d.pending[i]
	d.pending = slices.Delete(d.pending, i, i+1)
	return t, true
}

// step is something the driver does itself at an instant (since the start
// of the load): switching the outage on or off.
type step struct {
	at time.Duration
	do func()
}

// drive runs a virtual load from start, in the bubble: it calls spawn(i) at
// arrivals[i].at (in a goroutine of its own), does each step at its
// instant, runs the server's capacity (d.cap) and gives turns, until every
// operation has ended. At an instant, the steps come first, then the
// capacity's verdicts, then the operations that start, then the turns; one
// release each time the bubble has settled.
func (d *turns) drive(start time.Time, arrivals []arrival, steps []step, spawn func(i int)) {
	var live atomic.Int64
	next := 0
	var last time.Time // the last release: one per nanosecond
	for {
		synctest.Wait()
		now := time.Now()
		for len(steps) > 0 && !start.Add(steps[0].at).After(now) {
			steps[0].do()
			steps = steps[1:]
		}
		if d.cap != nil {
			d.cap.tick(now)
			if d.cap.next() {
				continue
			}
		}
		arrive := next < len(arrivals) && !start.Add(arrivals[next].at).After(now)
		d.mu.Lock()
		waiting := len(d.pending) > 0
		d.mu.Unlock()
		if (arrive || waiting) && !now.After(last) {
			time.Sleep(time.Nanosecond)
			continue
		}
		switch {
		case arrive:
			last = now
			live.Add(1)
			i := next
			next++
			go func() {
				defer func() {
					live.Add(-1)
					d.notify()
				}()
				spawn(i)
			}()
			continue
		case waiting:
			t, _ := d.next()
			last = now
			close(t.ch)
			continue
		case next == len(arrivals) && live.Load() == 0:
			d.stop()
			return
		}
		var at time.Time
		if next < len(arrivals) {
			at = start.Add(arrivals[next].at)
		}
		if len(steps) > 0 {
			at = earliest(at, start.Add(steps[0].at))
		}
		if d.cap != nil {
			at = earliest(at, d.cap.nextEvent())
		}
		d.sleep(at)
	}
}

// earliest returns the earlier of a and b, where the zero time is never.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// sleep waits until at (never when at is zero) or until a goroutine wakes
// the driver. Which comes first does not matter: the driver then waits for
// the bubble to settle and looks at what is due.
func (d *turns) sleep(at time.Time) {
	if at.IsZero() {
		<-d.wake
		return
	}
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
	case <-d.wake:
	}
}

// mix hashes the seed with two values (splitmix64's finalizer over each).
func mix(seed, a, b uint64) uint64 {
	h := seed
	for _, v := range []uint64{a, b} {
		h ^= v + 0x9e3779b97f4a7c15 + h<<6 + h>>2
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

// opOf returns the operation a request names in OperationHeader, or -1.
func opOf(h http.Header) int {
	i, err := strconv.Atoi(h.Get(OperationHeader))
	if err != nil || i < 0 {
		return -1
	}
	return i
}

// turnTransport sends each request through rt, the server, in its turn,
// and hands the answer back in the next one. With the driver's capacity
// model (turns.cap), the request first takes a slot, waits in the queue or
// is shed, as the model says; with pushback, the server's pushback
// middleware sees it before the capacity model, as in a fake server that
// mounts both. probe, if not nil, sees every request as it arrives and
// every answer.
type turnTransport struct {
	rt       http.RoundTripper
	turns    *turns
	probe    *probe
	pushback *pushback.Budget // nil: none in front of the capacity model
}

func (t turnTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	op := opOf(req.Header)
	key := t.turns.wait(op)
	if t.probe != nil {
		t.probe.request(time.Now(), req.Header)
	}
	var resp *http.Response
	var err error
	if t.pushback != nil {
		resp, err = t.behindPushback(req, key)
	} else {
		resp, err = t.serve(req, key)
	}
	if err == nil && t.probe != nil {
		t.probe.response(time.Now(), resp.Header)
	}
	t.turns.wait(op)
	return resp, err
}

// serve is the server's side of req, whose turn's key is key: the capacity
// model, if the driver runs it, then rt.
func (t turnTransport) serve(req *http.Request, key uint64) (*http.Response, error) {
	if c := t.turns.cap; c != nil {
		served, gone := c.admit(req.Context(), time.Now(), key)
		switch {
		case gone:
			closeRequest(req)
			return nil, req.Context().Err()
		case !served:
			closeRequest(req)
			return c.shedAnswer(req), nil
		}
	}
	return t.rt.RoundTrip(req)
}

// behindPushback is serve behind the pushback middleware: the middleware
// refuses req or passes it on to serve, whose answer it counts (and hints,
// when the budget is exhausted). Its answers are recorded and handed back as
// a response. The middleware's every step then happens in the request's
// turn or in the capacity model's release, one at a time, as the driver
// orders them: in the fake server, the middleware would see the ends of
// services and the queue's timeouts that fall at one instant in the
// runtime's order. An error of serve (the client gave up, a lost response)
// counts as the middleware counts a handler that drops the request.
func (t turnTransport) behindPushback(req *http.Request, key uint64) (resp *http.Response, err error) {
	handled := false
	h := t.pushback.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled = true
		resp, err = t.serve(r, key)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		defer resp.Body.Close()
		maps.Copy(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	rec := httptest.NewRecorder()
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler || err == nil {
				panic(v)
			}
			resp = nil // err is serve's
		}
	}()
	h.ServeHTTP(rec, req)
	if !handled {
		closeRequest(req) // refused: nothing read it
	}
	resp = rec.Result()
	resp.Request = req
	return resp, nil
}

func closeRequest(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// seededBase is the base RoundTripper of one client of a run, with the seed
// of the client's jitter (see jitter) and keys (see seededKeys).
type seededBase struct {
	http.RoundTripper
	seed uint64
}

// clientBase returns the base of client i of a run seeded with seed.
func clientBase(rt http.RoundTripper, seed uint64, i int) http.RoundTripper {
	return seededBase{rt, mix(seed, 0x6a177e4, uint64(i))}
}

// jitter returns b drawing its randomness from a source seeded for the
// client whose base is base, when b is one of resilient's Backoffs and base
// a seededBase; b itself otherwise.
func jitter(base http.RoundTripper, b resilient.Backoff) resilient.Backoff {
	if s, ok := base.(seededBase); ok {
		return backoff.Seeded(b, s.seed)
	}
	return b
}

// Resilient's default backoff (resilient.WithBackoff's documentation).
const (
	defaultBackoffBase = 100 * time.Millisecond
	defaultBackoffMax  = 2 * time.Second
)

// resilientClient is bench.Resilient(base, opts...) with resilient's
// default backoff drawn from the client's seeded source (opts may set
// another; see jitter), and its keys minted from it (see seededKeys).
func resilientClient(base http.RoundTripper, opts ...resilient.Option) *http.Client {
	first := append(seededKeys(base), resilient.WithBackoff(jitter(base, resilient.FullJitter(defaultBackoffBase, defaultBackoffMax))))
	return bench.Resilient(base, append(first, opts...)...)
}
