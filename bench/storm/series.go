package storm

import (
	"sync/atomic"
	"time"
)

// series counts events in fixed-width time bins from a start time set by
// begin. Events before begin or past the last bin are dropped. It is safe for
// concurrent use: add is one atomic load and one atomic add.
type series struct {
	start  atomic.Int64 // Unix nanoseconds; 0 until begin
	bin    time.Duration
	counts []atomic.Int64
}

// newSeries returns a series of bins of width bin covering span.
func newSeries(bin, span time.Duration) *series {
	n := int(span/bin) + 1
	return &series{bin: bin, counts: make([]atomic.Int64, n)}
}

// begin sets the start of the first bin.
func (s *series) begin(now time.Time) { s.start.Store(now.UnixNano()) }

// add counts one event at now.
func (s *series) add(now time.Time) {
	start := s.start.Load()
	if start == 0 {
		return
	}
	if i := int(time.Duration(now.UnixNano()-start) / s.bin); i >= 0 && i < len(s.counts) {
		s.counts[i].Add(1)
	}
}

// values returns the counts, trailing empty bins removed.
func (s *series) values() []int {
	out := make([]int, len(s.counts))
	last := -1
	for i := range s.counts {
		out[i] = int(s.counts[i].Load())
		if out[i] != 0 {
			last = i
		}
	}
	return out[:last+1]
}
