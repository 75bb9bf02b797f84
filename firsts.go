package resilient

import (
	"sync/atomic"
	"time"
)

// firsts counts how a host's first attempts ended over a window: the
// current bucket of firstsBucket and the one before it, so the last 1 to
// 2 seconds. It tells one bad backend of many from a host that sheds (see
// call.observe). It is lock-free: every first attempt notes itself.
//
// Each bucket is one word: its bucket number (16 bits), then the healthy
// first attempts (24 bits), then the failed ones (24 bits). A word from an
// older bucket counts as empty.
type firsts struct {
	b [2]atomic.Uint64
}

// firstsBucket is the length of one bucket of firsts.
const firstsBucket = time.Second

const (
	firstsCount = 1<<24 - 1 // a count's mask; counts stop there
	firstsOK    = 1 << 24   // one healthy first attempt, in a word
)

// note counts a first attempt that ended at now, healthy if ok (a failure
// otherwise: a 5xx, a 429, a timeout).
func (f *firsts) note(now time.Time, ok bool) {
	e := uint64(now.UnixNano()/int64(firstsBucket)) & 0xffff
	w := &f.b[e&1]
	for {
		cur := w.Load()
		next := e << 48 // a new bucket: both counts 0
		if cur>>48 == e {
			next = cur
		}
		switch {
		case ok && next>>24&firstsCount < firstsCount:
			next += firstsOK
		case !ok && next&firstsCount < firstsCount:
			next++
		}
		if w.CompareAndSwap(cur, next) {
			return
		}
	}
}

// healthy reports whether the host's first attempts in the window ending
// at now were healthy: at least firstsMin of them, and at least 4 healthy
// for each failed one (at most a fifth failed).
func (f *firsts) healthy(now time.Time) bool {
	e := uint64(now.UnixNano()/int64(firstsBucket)) & 0xffff
	var ok, failed uint64
	for _, b := range [2]uint64{e, (e - 1) & 0xffff} {
		if w := f.b[b&1].Load(); w>>48 == b {
			ok += w >> 24 & firstsCount
			failed += w & firstsCount
		}
	}
	return ok+failed >= firstsMin && ok >= 4*failed
}

// firstsMin is how many first attempts firsts.healthy needs to judge.
const firstsMin = 10
