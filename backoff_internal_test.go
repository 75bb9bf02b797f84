package resilient

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/resilienthttp/resilient/internal/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// backoffSamples is how many delays the bounds tests draw per case.
const backoffSamples = 2000

// TestBackoffBounds draws many delays per attempt and checks each against the
// documented interval [lo, hi) (or the exact value when lo == hi).
func TestBackoffBounds(t *testing.T) {
	const ms = time.Millisecond
	t.Parallel()
	type bound struct{ lo, hi time.Duration }
	tests := []struct {
		name string
		b    Backoff
		want []bound // index 0 is attempt 1
	}{
		{"Exponential", Exponential(100*ms, 2*time.Second), []bound{
			{100 * ms, 100 * ms}, {200 * ms, 200 * ms}, {400 * ms, 400 * ms}, {800 * ms, 800 * ms},
			{1600 * ms, 1600 * ms}, {2000 * ms, 2000 * ms}, {2000 * ms, 2000 * ms},
		}},
		{"FullJitter", FullJitter(100*ms, 2*time.Second), []bound{
			{0, 100 * ms}, {0, 200 * ms}, {0, 400 * ms}, {0, 800 * ms}, {0, 1600 * ms}, {0, 2000 * ms}, {0, 2000 * ms},
		}},
		{"EqualJitter", EqualJitter(100*ms, 2*time.Second), []bound{
			{50 * ms, 100 * ms}, {100 * ms, 200 * ms}, {200 * ms, 400 * ms}, {400 * ms, 800 * ms},
			{800 * ms, 1600 * ms}, {1000 * ms, 2000 * ms}, {1000 * ms, 2000 * ms},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for i, w := range tt.want {
				attempt := i + 1
				for range backoffSamples {
					d := tt.b.Delay(attempt, 0)
					if w.lo == w.hi {
						require.Equal(t, w.lo, d, "attempt %d", attempt)
						continue
					}
					require.GreaterOrEqual(t, d, w.lo, "attempt %d", attempt)
					require.Less(t, d, w.hi, "attempt %d", attempt)
				}
			}
		})
	}
}

func TestDecorrelatedJitterGrowsFromPrev(t *testing.T) {
	const ms = time.Millisecond
	t.Parallel()
	b := DecorrelatedJitter(100*ms, 10*time.Second)
	tests := []struct {
		name    string
		prev    time.Duration
		lo, hi  time.Duration // the delay lies in [lo, hi)
		minMean time.Duration // the mean of many delays exceeds this
	}{
		{"first retry", 0, 100 * ms, 300 * ms, 150 * ms},
		{"prev below base", 10 * ms, 100 * ms, 300 * ms, 150 * ms},
		{"prev 1s", time.Second, 100 * ms, 3 * time.Second, 1400 * ms},
		{"capped", 5 * time.Second, 100 * ms, 10*time.Second + 1, 6 * time.Second},
		{"prev above max", time.Hour, 100 * ms, 10*time.Second + 1, 8 * time.Second},
		{"huge prev", math.MaxInt64, 100 * ms, 10*time.Second + 1, 8 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var sum time.Duration
			for range backoffSamples {
				d := b.Delay(1, tt.prev)
				require.GreaterOrEqual(t, d, tt.lo)
				require.Less(t, d, tt.hi)
				sum += d
			}
			// rand[base, 3·prev) grows with prev.
			assert.Greater(t, sum/backoffSamples, tt.minMean)
		})
	}

	// A chain fed its own output grows, then stays at the cap.
	prev, hit := time.Duration(0), 0
	for attempt := 1; attempt <= 200; attempt++ {
		prev = b.Delay(attempt, prev)
		require.LessOrEqual(t, prev, 10*time.Second)
		if prev == 10*time.Second {
			hit++
		}
	}
	assert.Positive(t, hit, "a long chain should reach the cap")
}

func TestFullJitterMeanIsHalfTheCeiling(t *testing.T) {
	const ms = time.Millisecond
	t.Parallel()
	b := FullJitter(100*ms, 2*time.Second)
	for _, tt := range []struct {
		attempt int
		ceiling time.Duration
	}{{1, 100 * ms}, {3, 400 * ms}, {10, 2 * time.Second}} {
		t.Run(fmt.Sprint("attempt", tt.attempt), func(t *testing.T) {
			t.Parallel()
			const n = 20000
			var sum float64
			for range n {
				sum += float64(b.Delay(tt.attempt, 0))
			}
			// Uniform on [0, c): mean c/2, standard error c/sqrt(12n) ≈ 0.002c.
			assert.InEpsilon(t, float64(tt.ceiling)/2, sum/n, 0.03)
		})
	}
}

func TestBackoffOverflow(t *testing.T) {
	const ms = time.Millisecond
	t.Parallel()
	tests := []struct {
		name string
		b    Backoff
		max  time.Duration
	}{
		{"Exponential", Exponential(100*ms, 2*time.Second), 2 * time.Second},
		{"FullJitter", FullJitter(100*ms, 2*time.Second), 2 * time.Second},
		{"EqualJitter", EqualJitter(100*ms, 2*time.Second), 2 * time.Second},
		{"DecorrelatedJitter", DecorrelatedJitter(100*ms, 2*time.Second), 2 * time.Second},
		{"Exponential huge max", Exponential(time.Nanosecond, math.MaxInt64), math.MaxInt64},
		{"FullJitter huge max", FullJitter(time.Second, math.MaxInt64), math.MaxInt64},
		{"DecorrelatedJitter huge max", DecorrelatedJitter(time.Second, math.MaxInt64), math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, attempt := range []int{62, 63, 64, 65, 100, 1000, math.MaxInt} {
				for _, prev := range []time.Duration{0, tt.max, math.MaxInt64} {
					d := tt.b.Delay(attempt, prev)
					require.GreaterOrEqual(t, d, time.Duration(0), "attempt %d prev %v", attempt, prev)
					require.LessOrEqual(t, d, tt.max, "attempt %d prev %v", attempt, prev)
				}
			}
		})
	}
	assert.Equal(t, 2*time.Second, Exponential(100*ms, 2*time.Second).Delay(1000, 0))
	assert.Equal(t, time.Duration(1<<62), Exponential(time.Nanosecond, math.MaxInt64).Delay(63, 0))
	assert.Equal(t, time.Duration(math.MaxInt64), Exponential(time.Nanosecond, math.MaxInt64).Delay(64, 0))
}

func TestBackoffInvalidInputs(t *testing.T) {
	const ms = time.Millisecond
	t.Parallel()
	kinds := map[string]func(base, max time.Duration) Backoff{
		"Exponential": Exponential, "FullJitter": FullJitter,
		"EqualJitter": EqualJitter, "DecorrelatedJitter": DecorrelatedJitter,
	}
	for name, kind := range kinds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, base := range []time.Duration{0, -time.Second, math.MinInt64} {
				for attempt := range 5 {
					assert.Zero(t, kind(base, time.Second).Delay(attempt, time.Second), "base %v", base)
				}
			}
			// max < base: max is raised to base.
			b := kind(time.Second, time.Millisecond)
			for attempt := range 10 {
				d := b.Delay(attempt, 0)
				require.GreaterOrEqual(t, d, time.Duration(0))
				require.LessOrEqual(t, d, time.Second)
			}
		})
	}
	// attempt < 1 counts as 1.
	assert.Equal(t, 100*ms, Exponential(100*ms, time.Second).Delay(0, 0))
	assert.Equal(t, 100*ms, Exponential(100*ms, time.Second).Delay(-7, 0))
	assert.Equal(t, time.Second, Exponential(time.Second, time.Millisecond).Delay(5, 0))
}

func TestSeededIsDeterministic(t *testing.T) {
	const ms = time.Millisecond
	t.Parallel()
	sequence := func(b Backoff) []time.Duration {
		var out []time.Duration
		prev := time.Duration(0)
		for attempt := 1; attempt <= 50; attempt++ {
			prev = b.Delay(attempt, prev)
			out = append(out, prev)
		}
		return out
	}
	for _, kind := range []func(base, max time.Duration) Backoff{FullJitter, EqualJitter, DecorrelatedJitter} {
		b := kind(100*ms, 20*time.Second)
		t.Run(fmt.Sprint(b), func(t *testing.T) {
			t.Parallel()
			a, a2, c := backoff.Seeded(b, 42), backoff.Seeded(b, 42), backoff.Seeded(b, 43)
			s := sequence(a)
			assert.Equal(t, s, sequence(a2), "same seed, same delays")
			assert.NotEqual(t, s, sequence(c), "different seed, different delays")
			assert.NotEqual(t, sequence(backoff.Seeded(b, 42)), sequence(b), "the original keeps its own source")
		})
	}

	exp := Exponential(100*ms, time.Second)
	assert.Equal(t, sequence(exp), sequence(backoff.Seeded(exp, 1)), "Exponential has no randomness")

	// Not one of ours: returned unchanged.
	var foreign Backoff = fixedTestBackoff(time.Second)
	assert.Equal(t, foreign, backoff.Seeded(foreign, 1))
	assert.Nil(t, backoff.Seeded(nil, 1))
}

func TestSeededConcurrentUse(t *testing.T) {
	const ms = time.Millisecond
	t.Parallel()
	b := backoff.Seeded(FullJitter(ms, time.Second), 7)
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 1000 {
				if d := b.Delay(i%12+1, 0); d < 0 || d >= time.Second {
					t.Errorf("delay %v out of range", d)
					return
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
}

func TestBackoffString(t *testing.T) {
	const ms = time.Millisecond
	t.Parallel()
	assert.Equal(t, "FullJitter(100ms, 2s)", fmt.Sprint(FullJitter(100*ms, 2*time.Second)))
	assert.Equal(t, "DecorrelatedJitter(1s, 1s)", fmt.Sprint(DecorrelatedJitter(time.Second, 0)))
}

func TestBackoffDelayDoesNotAllocate(t *testing.T) {
	const ms = time.Millisecond
	for _, b := range []Backoff{
		Exponential(ms, time.Second), FullJitter(ms, time.Second), EqualJitter(ms, time.Second),
		DecorrelatedJitter(ms, time.Second), backoff.Seeded(FullJitter(ms, time.Second), 1),
	} {
		allocs := testing.AllocsPerRun(1000, func() { b.Delay(3, 5*ms) })
		assert.Zero(t, allocs, "%v", b)
	}
}

type fixedTestBackoff time.Duration

func (c fixedTestBackoff) Delay(int, time.Duration) time.Duration { return time.Duration(c) }

func BenchmarkBackoff(b *testing.B) {
	const ms = time.Millisecond
	for _, bo := range []struct {
		name string
		b    Backoff
	}{
		{"Exponential", Exponential(100*ms, 2*time.Second)},
		{"FullJitter", FullJitter(100*ms, 2*time.Second)},
		{"EqualJitter", EqualJitter(100*ms, 2*time.Second)},
		{"DecorrelatedJitter", DecorrelatedJitter(100*ms, 2*time.Second)},
		{"SeededFullJitter", backoff.Seeded(FullJitter(100*ms, 2*time.Second), 1)},
	} {
		b.Run(bo.name, func(b *testing.B) {
			b.ReportAllocs()
			prev := time.Duration(0)
			for i := 0; b.Loop(); i++ {
				prev = bo.b.Delay(i%8+1, prev)
			}
		})
	}
}
