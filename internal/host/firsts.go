package host

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Firsts counts how a host's recent first attempts ended, to tell one bad
// backend of many from a host that sheds (see call.observe). Only enough
// of them can tell: a host with few is not judged shedding. The window
// is two buckets: the current one and the one before it. A bucket closes
// after firstsPer first attempts or firstsAge, whichever comes first. So
// a busy shared Transport judges from its last second or so, and
// a quiet one from its last seconds, with as much evidence.
//
// It is one word, updated lock-free: when the current bucket started (ms,
// 32 bits), then the healthy and the failed first attempts of the bucket
// before it and of the current one (8 bits each).
//
// cold (Unix ns) is when the Retry-After a cold host's operation waits
// out ends: one such wait at a time (coldWait).
type Firsts struct {
	W    atomic.Uint64
	cold atomic.Int64
}

const (
	FirstsPer   = 200              // first attempts per bucket
	firstsAge   = 10 * time.Second // a bucket's longest span
	FirstsMin   = 20               // first attempts the current bucket needs to be judged alone
	firstsRatio = 6                // healthy: at least 6 healthy per failed one
	firstsAlpha = 0.01             // how rarely a healthy host shows what shows shedding
)

// firstsFewest[n] is the fewest failed of n first attempts (at most two
// buckets: 2·firstsPer) that show a host sheds; 0: none do. A healthy host,
// whose first attempts fail at most 1 in 7, shows so many less than
// firstsAlpha of the time (the binomial tail). So one or two failed calls
// of a cold client are no evidence, and three of three are. One bad backend
// of ten behind a balancer (1 in 10 failed) is not taken for a host that
// sheds a third or half of its requests. Built on first use: the failure
// path only.
var firstsFewest = sync.OnceValue(func() (t [2*FirstsPer + 1]uint16) {
	const p = 1.0 / (firstsRatio + 1)
	for n := 1; n < len(t); n++ {
		tail := 0.0 // P(at least k failed of n), k from n down
		for k := n; k >= 0; k-- {
			lg, _ := math.Lgamma(float64(n + 1))
			lk, _ := math.Lgamma(float64(k + 1))
			lnk, _ := math.Lgamma(float64(n - k + 1))
			tail += math.Exp(lg - lk - lnk + float64(k)*math.Log(p) + float64(n-k)*math.Log(1-p))
			if tail >= firstsAlpha {
				if k < n {
					t[n] = uint16(k + 1)
				}
				break
			}
		}
	}
	return t
})

// showsShedding reports whether failed of n first attempts show that the
// host sheds (firstsFewest).
func showsShedding(n, failed uint64) bool {
	few := uint64(firstsFewest()[min(n, 2*FirstsPer)])
	return few > 0 && failed >= few
}

// firstsCounts reads word w at now (ms): the healthy and failed first
// attempts of the bucket before and of the current one, buckets that aged
// out emptied (an aged current bucket counts as the one before). fresh
// reports whether the current bucket can take more: not aged, not full.
func firstsCounts(w uint64, now uint32) (pOK, pFail, cOK, cFail uint64, fresh bool) {
	pOK, pFail, cOK, cFail = w>>24&0xff, w>>16&0xff, w>>8&0xff, w&0xff
	age := time.Duration(now-uint32(w>>32)) * time.Millisecond
	switch {
	case age > 2*firstsAge:
		return 0, 0, 0, 0, false
	case age > firstsAge:
		return cOK, cFail, 0, 0, false
	}
	return pOK, pFail, cOK, cFail, cOK+cFail < FirstsPer
}

func firstsNow(now int64) uint32 { return uint32(now / 1e6) }

// note counts a first attempt that ended at now, healthy if ok (a failure
// otherwise: a 5xx, a 429, a timeout).
func (f *Firsts) note(now int64, ok bool) {
	ms := firstsNow(now)
	for {
		cur := f.W.Load()
		pOK, pFail, cOK, cFail, fresh := firstsCounts(cur, ms)
		start := cur >> 32
		if !fresh {
			start = uint64(ms)
			if cOK+cFail >= FirstsPer { // full: it becomes the bucket before
				pOK, pFail, cOK, cFail = cOK, cFail, 0, 0
			}
		}
		if ok {
			cOK++
		} else {
			cFail++
		}
		next := start<<32 | pOK<<24 | pFail<<16 | cOK<<8 | cFail
		if f.W.CompareAndSwap(cur, next) {
			return
		}
	}
}

// shedding reports whether the host's first attempts in the window show
// that it sheds at now: as many failed as a healthy host rarely shows
// (firstsFewest). The current bucket, once it holds firstsMin, is judged
// alone too: a fresh surge of failures (a server whose queue just filled)
// is not hidden by the healthy bucket before it. So a cold host (a CLI, a
// cron job, a quiet service) is not judged shedding for want of traffic,
// and its 503's Retry-After is waited out.
func (f *Firsts) shedding(now int64) bool {
	pOK, pFail, cOK, cFail, _ := firstsCounts(f.W.Load(), firstsNow(now))
	if cOK+cFail >= FirstsMin && showsShedding(cOK+cFail, cFail) {
		return true
	}
	return showsShedding(pOK+cOK+pFail+cFail, pFail+cFail)
}

// Warm reports whether the host's window holds at least firstsMin first
// attempts at now: enough to tell whether it sheds.
func (f *Firsts) Warm(now int64) bool {
	pOK, pFail, cOK, cFail, _ := firstsCounts(f.W.Load(), firstsNow(now))
	return pOK+pFail+cOK+cFail >= FirstsMin
}

// ColdWait reports whether an operation may wait out, from now, a delay d
// its first attempt's 503 asked for. On a host whose window holds fewer
// than firstsMin first attempts (too few to show that it sheds), one
// operation waits at a time. A second 503 with a delay while one is
// waited out is taken as the host shedding. So the single call of a cold
// client (a CLI, a cron job) waits and retries, as often as it is asked
// to. A fleet of cold clients on a shedding server sends one retry each,
// not one per failure until the window can tell. A warm host has no such
// bound.
func (f *Firsts) ColdWait(now int64, d time.Duration) bool {
	if f.Warm(now) {
		return true
	}
	for {
		cur := f.cold.Load()
		if cur > now {
			return false
		}
		if f.cold.CompareAndSwap(cur, now+int64(d)) {
			return true
		}
	}
}
