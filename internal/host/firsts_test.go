package host

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The window judges the host shedding from firstsMin first attempts with
// more than 1 in 7 failed, and never from fewer (a cold host); a bucket
// closes after firstsPer first attempts or firstsAge, and what is older
// than two buckets is forgotten.
func TestFirstsShedding(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	tests := []struct {
		name       string
		ok, failed int
		after      time.Duration // when healthy is asked, after the notes
		want       bool
	}{
		{"nothing sent: no evidence", 0, 0, 0, false},
		{"too few to judge, one failed", 0, 1, 0, false},
		{"too few to judge, two of three failed", 1, 2, 0, false},
		{"few, but most failed", 1, FirstsMin - 2, 0, true},
		{"enough, all healthy", FirstsMin, 0, 0, false},
		{"1 in 7 failed", 6 * FirstsMin, FirstsMin, 0, false},
		{"a third failed (a host shedding a third)", 2 * FirstsMin, FirstsMin, 0, true},
		{"1 in 10 failed of two buckets (one bad backend of ten)", 360, 40, 0, false},
		{"1 in 5 failed of two buckets", 320, 80, 0, true},
		{"most failed", FirstsMin, 2 * FirstsMin, 0, true},
		{"all failed, just enough", 0, FirstsMin, 0, true},
		{"an aged bucket still counts", 0, FirstsMin, firstsAge + time.Second, true},
		{"forgotten after two ages", 0, FirstsMin, 2*firstsAge + time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f Firsts
			for range tt.ok {
				f.note(t0.UnixNano(), true)
			}
			for range tt.failed {
				f.note(t0.UnixNano(), false)
			}
			assert.Equal(t, tt.want, f.shedding(t0.Add(tt.after).UnixNano()))
		})
	}
}

// The window holds the last one to two buckets of first attempts: a full
// bucket counts as the bucket before while the next fills; two buckets of
// failures push earlier healthy ones out; a bucket aged out starts afresh,
// its counts kept as the bucket before.
func TestFirstsWindowSlides(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	notes := func(f *Firsts, n int, at time.Time, ok bool) {
		for range n {
			f.note(at.UnixNano(), ok)
		}
	}
	var full Firsts
	notes(&full, FirstsPer, t0, true)
	full.note(t0.UnixNano(), false) // a new bucket
	assert.False(t, full.shedding(t0.UnixNano()), "the full bucket still counts")

	var pushed Firsts
	notes(&pushed, FirstsPer, t0, true)
	notes(&pushed, 2*FirstsPer, t0, false)
	assert.True(t, pushed.shedding(t0.UnixNano()), "two buckets of failures: the healthy ones are out of the window")

	var aged Firsts
	notes(&aged, FirstsPer/2, t0, true)
	later := t0.Add(firstsAge + time.Millisecond)
	aged.note(later.UnixNano(), false) // the aged bucket becomes the one before
	assert.False(t, aged.shedding(later.UnixNano()), "%d healthy before, 1 failed now", FirstsPer/2)
	var agedFail Firsts
	notes(&agedFail, FirstsMin, t0, false)
	assert.True(t, agedFail.shedding(t0.UnixNano()))
	assert.False(t, agedFail.shedding(t0.Add(3*firstsAge).UnixNano()), "all aged out")
}

// A fresh surge of failures is not hidden by a healthy bucket before it:
// once the current bucket holds firstsMin first attempts, it must pass the
// ratio too. Below firstsMin it is judged with the window only.
func TestFirstsCurrentBucketMustBeHealthyToo(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	tests := []struct {
		name       string
		ok, failed int // in the current bucket, after a full healthy one
		want       bool
	}{
		{"1 in 7 failed now", 6 * 3, 3, false},
		{"2 in 5 failed now", 12, 8, true},
		{"3 in 20 failed now: within what a healthy host shows", 17, 3, false},
		{"a surge too small to judge alone", 0, FirstsMin - 1, false},
		{"a surge of firstsMin failures", 0, FirstsMin, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f Firsts
			for range FirstsPer {
				f.note(t0.UnixNano(), true)
			}
			for range tt.ok {
				f.note(t0.UnixNano(), true)
			}
			for range tt.failed {
				f.note(t0.UnixNano(), false)
			}
			pOK, pFail, cOK, cFail, _ := firstsCounts(f.W.Load(), firstsNow(t0.UnixNano()))
			require.Equal(t, [4]uint64{FirstsPer, 0, uint64(tt.ok), uint64(tt.failed)}, [4]uint64{pOK, pFail, cOK, cFail})
			ok, failed := pOK+cOK, pFail+cFail
			require.GreaterOrEqual(t, ok, firstsRatio*failed, "the window alone is healthy")
			assert.Equal(t, tt.want, f.shedding(t0.UnixNano()))
		})
	}
}

// firstsFewest holds, for each n up to two buckets, the fewest failed of
// n first attempts that a healthy host (each failing with probability 1/7)
// shows less than 1 % of the time: the binomial tail, computed here by
// another route (products, not log-gamma).
func TestFirstsFewestIsTheBinomialTail(t *testing.T) {
	const p = 1.0 / (firstsRatio + 1)
	got := firstsFewest()
	for n := range 2*FirstsPer + 1 {
		want := 0
		for k := 0; k <= n; k++ {
			tail := 0.0
			for j := k; j <= n; j++ {
				tail += binomial(n, j) * math.Pow(p, float64(j)) * math.Pow(1-p, float64(n-j))
			}
			if tail < firstsAlpha {
				want = k
				break
			}
		}
		require.Equal(t, want, int(got[n]), "n = %d", n)
	}
	assert.Equal(t, [...]uint16{0, 0, 0, 3, 4, 4}, [6]uint16(got[:6]), "a cold client's one or two failed calls are no evidence")
}

func binomial(n, k int) float64 {
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}

// Fewer than firstsMin first attempts judge the host shedding only when as
// many failed as a healthy host would rarely show: never one or two calls
// of a cold client, always three of three.
func TestFirstsFewFailedOfFew(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UnixNano()
	tests := []struct {
		ok, failed int
		want       bool
	}{
		{0, 1, false}, {0, 2, false}, {1, 1, false}, {0, 3, true}, {1, 2, false}, {1, 3, false},
		{0, 4, true}, {6, 4, false}, {5, 5, true}, {11, 8, true}, {12, 7, false}, {17, 2, false},
	}
	for _, tt := range tests {
		var f Firsts
		for range tt.ok {
			f.note(t0, true)
		}
		for range tt.failed {
			f.note(t0, false)
		}
		assert.Equal(t, tt.want, f.shedding(t0), "%d healthy, %d failed", tt.ok, tt.failed)
	}
}
