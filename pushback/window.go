package pushback

import "sync/atomic"

// counter is one count kept over a rolling window: a ring of buckets, each
// a 64-bit word that packs the serial number of the period it counts (high
// 32 bits) and its count (low 32 bits). A bucket is renewed and incremented
// by one compare-and-swap, so that no lock is taken and no count is lost
// when goroutines renew the same bucket at once; memory is constant.
//
// Serial numbers wrap after 2³² periods; a bucket left untouched for a
// multiple of that many periods would be counted again, which at a period
// of one millisecond or more takes 49 days and then needs the exact period.
type counter struct {
	b []atomic.Uint64
}

const countMask = 1<<32 - 1

func newCounter(buckets int) counter {
	return counter{b: make([]atomic.Uint64, buckets)}
}

// slot returns the bucket of period serial.
func (c *counter) slot(serial uint32) *atomic.Uint64 {
	return &c.b[serial%uint32(len(c.b))]
}

// bump returns the word w with one more count for period serial:
// incremented if it holds serial, or the period one window later (a
// goroutine late by a window's worth of periods adds to the bucket that
// replaced its own), else renewed. Counts saturate at 2³²-1.
func (c *counter) bump(w uint64, serial uint32) uint64 {
	d := uint32(w>>32) - serial
	if d != 0 && (d != uint32(len(c.b)) || w&countMask == 0) {
		return uint64(serial)<<32 | 1
	}
	if w&countMask == countMask {
		return w
	}
	return w + 1
}

// add counts one at period serial.
func (c *counter) add(serial uint32) {
	s := c.slot(serial)
	for {
		w := s.Load()
		if s.CompareAndSwap(w, c.bump(w, serial)) {
			return
		}
	}
}

// live returns the count of word w if it belongs to the window that ends
// with period serial, else 0.
func (c *counter) live(w uint64, serial uint32) uint64 {
	if serial-uint32(w>>32) < uint32(len(c.b)) {
		return w & countMask
	}
	return 0
}

// sum returns the count of the window that ends with period serial: the
// buckets of periods serial-len+1 to serial.
func (c *counter) sum(serial uint32) uint64 {
	var n uint64
	for i := range c.b {
		n += c.live(c.b[i].Load(), serial)
	}
	return n
}

// addBelow counts one at period serial if the window's count is below limit
// and reports whether it did. The check and the count are one
// compare-and-swap on the current bucket, so that goroutines admitted at
// once cannot overshoot the limit together; only the past buckets, which
// no longer grow, are read apart.
func (c *counter) addBelow(serial uint32, limit float64) bool {
	cur := serial % uint32(len(c.b))
	var past uint64
	for i := range c.b {
		if uint32(i) != cur {
			past += c.live(c.b[i].Load(), serial)
		}
	}
	s := &c.b[cur]
	for {
		w := s.Load()
		if float64(past+c.live(w, serial)) >= limit {
			return false
		}
		if s.CompareAndSwap(w, c.bump(w, serial)) {
			return true
		}
	}
}
