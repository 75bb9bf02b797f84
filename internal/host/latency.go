package host

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/resilienthttp/resilient/internal/wire"
)

// latencies is a host's recent attempt latencies in bounded memory, for a
// hedge delay at a quantile (HedgingConfig.Quantile). It is a histogram of
// latencyBuckets counters, four per power of two from 1 µs to about 137 s.
// Each bucket is at most 19 % wide. Its counts are halved every window
// samples, so it follows the host's recent past rather than its history.
//
// It takes no lock and allocates nothing after construction. A sample is
// two atomic adds. The sample that completes a window halves the counts.
// Concurrent samples may then be halved or not: it is an estimate. It is
// allocated only for a Transport that hedges at a quantile.
type latencies struct {
	counts [latencyBuckets]atomic.Uint32
	n      atomic.Int64 // samples since the counts were last halved
	window int64
	min    int64 // samples needed before quantile answers
}

const (
	latencyMinExp  = 10 // 2^10 ns ≈ 1 µs: shorter latencies count in the first bucket
	latencyMaxExp  = 37 // 2^37 ns ≈ 137 s: longer ones count in the last
	latencySub     = 4  // buckets per power of two
	latencyBuckets = (latencyMaxExp - latencyMinExp) * latencySub
)

// newLatencies returns the histogram for quantile q: it answers once it
// holds 5/(1−q) samples (100 for p95; at least 20), and halves its counts
// every 4 times that (at least 1,024 samples).
func newLatencies(q float64) *latencies {
	m := max(int64(math.Ceil(5/(1-q))), 20)
	return &latencies{min: m, window: max(4*m, 1024)}
}

// latencyBucket returns the bucket of d: its power of two and the next two
// bits below the leading one.
func latencyBucket(d time.Duration) int {
	v := uint64(max(d, 0))
	if v < 1<<latencyMinExp {
		return 0
	}
	e := bits.Len64(v) - 1
	if e >= latencyMaxExp {
		return latencyBuckets - 1
	}
	sub := int(v>>(e-2)) & (latencySub - 1)
	return (e-latencyMinExp)*latencySub + sub
}

// latencyUpper is the upper edge of bucket b: a quantile read from the
// histogram errs long (a later hedge, less load), never short.
func latencyUpper(b int) time.Duration {
	e, sub := b/latencySub+latencyMinExp, b%latencySub
	return time.Duration(uint64(latencySub+sub+1) << (e - 2))
}

// record counts one attempt latency.
func (l *latencies) record(d time.Duration) {
	l.counts[latencyBucket(d)].Add(1)
	if l.n.Add(1) != l.window {
		return
	}
	l.n.Add(-l.window)
	for i := range l.counts {
		c := &l.counts[i]
		for {
			v := c.Load()
			if v == 0 || c.CompareAndSwap(v, v/2) {
				break
			}
		}
	}
}

// Quantile returns the q-quantile of the recent latencies (the upper edge of
// its bucket), and false while the histogram holds too few samples.
func (l *latencies) Quantile(q float64) (time.Duration, bool) {
	var snap [latencyBuckets]uint32
	var total int64
	for i := range l.counts {
		snap[i] = l.counts[i].Load()
		total += int64(snap[i])
	}
	if total < l.min {
		return 0, false
	}
	rank := int64(math.Ceil(q * float64(total)))
	var cum int64
	for i, c := range snap {
		cum += int64(c)
		if cum >= rank {
			return latencyUpper(i), true
		}
	}
	return latencyUpper(latencyBuckets - 1), true
}

// Latency is what a host's attempts took. A moving average of their
// durations (ns) keeps a retry that cannot finish before the deadline from
// starting. For a hedge delay at a quantile, a histogram holds the recent
// ones. Every attempt writes the average. So it has a cache line of its
// own: its writes on one core do not evict the fields every request reads
// on the others.
type Latency struct {
	Hist *latencies // nil unless the Transport hedges at a quantile
	_    [cacheLine]byte
	Avg  atomic.Int64
	_    [cacheLine - 8]byte
}

// Observe folds an attempt's duration into the average (weight 1/8), and
// into the histogram when there is one. Concurrent updates may lose one
// another: it is an estimate.
func (l *Latency) Observe(d time.Duration) {
	if l.Hist != nil {
		l.Hist.record(d)
	}
	old := l.Avg.Load()
	if old == 0 {
		l.Avg.Store(int64(d))
		return
	}
	l.Avg.Store(old + (int64(d)-old)/8)
}

// Cut records, for the hedge delay's quantile, how long a loser cut short
// without an answer had taken: a lower bound of its latency.
func (l *Latency) Cut(a *wire.Attempt) {
	if l.Hist != nil && a.Sent {
		l.Hist.record(a.Took)
	}
}
