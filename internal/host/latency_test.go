package host

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestLatencyBucketsBoundEveryDuration(t *testing.T) {
	for _, d := range []time.Duration{0, 1, time.Microsecond, 1500 * time.Microsecond, 20 * time.Millisecond, time.Second, time.Minute, time.Hour} {
		b := latencyBucket(d)
		assert.True(t, b >= 0 && b < latencyBuckets, "%v: bucket %d", d, b)
		if d >= 1<<latencyMinExp && d < 1<<latencyMaxExp {
			up := latencyUpper(b)
			assert.Greater(t, up, d, "%v: upper edge", d)
			assert.LessOrEqual(t, float64(up), float64(d)*1.26, "%v: a bucket is at most 25 %% wide", d)
		}
	}
}

func TestLatencyQuantile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		q     float64
		fast  int // 10 ms samples
		slow  int // 200 ms samples
		want  time.Duration
		known bool
	}{
		{"too few samples", 0.95, 50, 0, 0, false},
		{"p95 among 2 % slow", 0.95, 980, 20, 10 * time.Millisecond, true},
		{"p99 among 2 % slow", 0.99, 980, 20, 200 * time.Millisecond, true},
		{"p50", 0.5, 600, 400, 10 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLatencies(tc.q)
			for range tc.fast {
				l.record(10 * time.Millisecond)
			}
			for range tc.slow {
				l.record(200 * time.Millisecond)
			}
			got, ok := l.Quantile(tc.q)
			assert.Equal(t, tc.known, ok)
			if ok {
				assert.Equal(t, latencyUpper(latencyBucket(tc.want)), got)
			}
		})
	}
}

// The histogram halves its counts every window, so it follows a host whose
// latency changed.
func TestLatencyFollowsTheRecentPast(t *testing.T) {
	l := newLatencies(0.95)
	for range 5000 {
		l.record(200 * time.Millisecond)
	}
	for range 5000 {
		l.record(10 * time.Millisecond)
	}
	got, ok := l.Quantile(0.95)
	assert.True(t, ok)
	assert.Equal(t, latencyUpper(latencyBucket(10*time.Millisecond)), got)
}

func TestLatencyRecordDoesNotAllocate(t *testing.T) {
	l := newLatencies(0.95)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { l.record(3 * time.Millisecond) }))
	assert.Zero(t, testing.AllocsPerRun(100, func() { l.Quantile(0.95) }))
}
