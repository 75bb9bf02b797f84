package host

import (
	"sync/atomic"
	"time"

	"github.com/resilienthttp/resilient/internal/clock"
)

// pauses is what the server asked of a host's requests: the gate's to
// read, observe's to set.
type pauses struct {
	// PauseUntil (Unix ns) holds back every request to the host after a 429
	// with a server-directed delay; retryPauseUntil holds back retries only,
	// after a 503 with one (a first attempt still goes out: the server may
	// be back, and a single attempt is what a bare client would send).
	PauseUntil      atomic.Int64
	RetryPauseUntil atomic.Int64
	// Renewed: the latest answer that asked for a pause came while a
	// pause was still on, or was a 503 (set only when the host's first
	// attempts show that it sheds, see observe). While that pause lasts, the host is shedding.
	Renewed atomic.Bool
	// PushbackUntil (Unix ns): the server pushed back (Decision.Pushback);
	// no retry is sent to the host before then.
	PushbackUntil atomic.Int64
	// Firsts: how the host's recent first attempts ended; it decides
	// whether a 503's delay pauses the host or one operation (observe).
	Firsts Firsts
}

// over reports whether no pause and no pushback is pending at now (Unix ns).
func (ps *pauses) over(now int64) bool {
	return ps.PauseUntil.Load() <= now && ps.RetryPauseUntil.Load() <= now && ps.PushbackUntil.Load() <= now
}

// Pause holds back requests to the host until now+d: every request if all,
// else retries only. It never shortens an existing pause. A retries' pause
// (a 503's, set when the root's call.observe takes the host as shedding), or a
// pause renewed while one is on, marks the host shedding (Shedding) until
// it ends: its retries are then refused, not waited out.
func (ps *pauses) Pause(now int64, d time.Duration, all bool) {
	p := &ps.RetryPauseUntil
	if all {
		p = &ps.PauseUntil
	}
	until := clock.Later(now, d)
	cur := p.Load()
	ps.Renewed.Store(!all || cur > now)
	for cur < until && !p.CompareAndSwap(cur, until) {
		cur = p.Load()
	}
}

// Shedding reports whether the host is shedding at now: a server-directed
// pause is on, and it came from a 503 or was renewed while on. A retry
// would only add load to a host that sheds it: the gate refuses it before
// any wait, and the caller has the last answer at once, as from a bare
// client. A 429's pause set once is waited out, and the retry sent.
func (ps *pauses) Shedding(now int64) bool {
	return ps.Renewed.Load() && ps.pausedFor(now, true) > 0
}

// clearPauses zeroes the pauses that ended at ns (Unix ns) or before, so
// that first attempts stop reading the clock for them (see wait). A pause
// renewed meanwhile is kept.
func (ps *pauses) clearPauses(ns int64) {
	for _, p := range [...]*atomic.Int64{&ps.PauseUntil, &ps.RetryPauseUntil} {
		if u := p.Load(); u != 0 && u <= ns {
			p.CompareAndSwap(u, 0)
		}
	}
}

// PushBack records the server's pushback: no retry to the host until now+d.
// It never shortens an existing pushback.
func (ps *pauses) PushBack(now int64, d time.Duration) {
	until := clock.Later(now, d)
	for {
		cur := ps.PushbackUntil.Load()
		if cur >= until || ps.PushbackUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// pushedBack reports whether the server's pushback holds retries at now.
func (ps *pauses) pushedBack(now int64) bool {
	u := ps.PushbackUntil.Load()
	return u != 0 && now < u
}

// pausedFor returns how long attempt n (0 for a first attempt) must still
// wait for a server-directed pause at now.
func (ps *pauses) pausedFor(now int64, retry bool) time.Duration {
	u := ps.PauseUntil.Load()
	if retry {
		u = max(u, ps.RetryPauseUntil.Load())
	}
	if u == 0 {
		return 0
	}
	return max(time.Duration(u-now), 0)
}
