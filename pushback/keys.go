package pushback

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
)

// recentKeys remembers the idempotency keys of recent requests, to tell a
// retry from a first attempt when a client sends no attempt header. It is a
// direct-mapped table of 64-bit words, each packing 32 bits of a key's hash
// (the tag) and the time it was last seen in milliseconds (mod 2³²): memory
// is fixed, a lookup is one hash and one atomic swap, and nothing is
// allocated.
//
// Its mistakes are bounded and documented in the README: two keys with the
// same slot and tag (a 2⁻³² chance per pair that share a slot) make the
// second look like a retry, which only makes the budget more conservative;
// a key whose slot was taken by another key before its retry arrived makes
// that retry look like a first attempt, which happens to a share of about
// (keys per second × retry delay) ÷ slots of the retries.
//
// Which keys share a slot depends on the hash's seed: random per table
// (maphash's), unless Config.Seed fixes it (seededHash).
//
// It is safe for concurrent use by multiple goroutines.
type recentKeys struct {
	slots  []atomic.Uint64
	mask   uint64
	seed   maphash.Seed // used when fixed is 0
	fixed  uint64       // Config.Seed: if not 0, keys are hashed by seededHash with it
	window uint32       // milliseconds
}

func newRecentKeys(slots int, windowMs uint32, seed uint64) *recentKeys {
	n := 1 << bits.Len(uint(max(slots, 2)-1)) // a power of two, at least slots
	return &recentKeys{slots: make([]atomic.Uint64, n), mask: uint64(n - 1), seed: maphash.MakeSeed(), fixed: seed, window: windowMs}
}

// seen records key as seen at nowMs and reports whether it had been seen
// within the window before.
func (k *recentKeys) seen(key string, nowMs uint32) bool {
	var h uint64
	if k.fixed != 0 {
		h = seededHash(k.fixed, key)
	} else {
		h = maphash.String(k.seed, key)
	}
	tag := uint32(h>>32) | 1 // never 0, the tag of an empty slot
	old := k.slots[h&k.mask].Swap(uint64(tag)<<32 | uint64(nowMs))
	return uint32(old>>32) == tag && nowMs-uint32(old) < k.window
}
