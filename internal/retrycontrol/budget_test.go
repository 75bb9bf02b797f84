package retrycontrol

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// budgetT0 is aligned to a bucket boundary for every window that divides a
// second into whole buckets.
var budgetT0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// budgetDeposit deposits n first attempts at now.
func budgetDeposit(b *Budget, now time.Time, n int) {
	for range n {
		b.DepositAt(now)
	}
}

func TestBudgetArithmetic(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cfg      BudgetConfig
		deposits int
		want     int // retries allowed
	}{
		{"ratio 0.1 of 100", BudgetConfig{Ratio: 0.1, MinPerSecond: -1, Window: 10 * time.Second}, 100, 10},
		{"ratio 0.2 of 50", BudgetConfig{Ratio: 0.2, MinPerSecond: -1, Window: 10 * time.Second}, 50, 10},
		{"ratio 0.5 of nothing", BudgetConfig{Ratio: 0.5, MinPerSecond: -1, Window: 10 * time.Second}, 0, 0},
		{"fraction rounds up: 0.1 of 3", BudgetConfig{Ratio: 0.1, MinPerSecond: -1, Window: 10 * time.Second}, 3, 1},
		{"ratio 1", BudgetConfig{Ratio: 1, MinPerSecond: -1, Window: 10 * time.Second}, 37, 37},
		{"floor alone", BudgetConfig{Ratio: -1, MinPerSecond: 1, Window: 10 * time.Second}, 0, 10},
		{"floor alone, 2s window", BudgetConfig{Ratio: -1, MinPerSecond: 5, Window: 2 * time.Second}, 0, 10},
		{"floor ignores deposits when ratio is 0", BudgetConfig{Ratio: -1, MinPerSecond: 1, Window: 10 * time.Second}, 500, 10},
		{"ratio plus floor", BudgetConfig{Ratio: 0.1, MinPerSecond: 2, Window: 10 * time.Second}, 100, 30},
		{"defaults, idle", DefaultBudgetConfig(), 0, 100},
		{"defaults, 1000 first attempts", DefaultBudgetConfig(), 1000, 300},
		{"all zero means the defaults", BudgetConfig{}, 1000, 300},
		{"negative means none", BudgetConfig{Ratio: -1, MinPerSecond: -1}, 1000, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := NewBudget(tt.cfg)
			budgetDeposit(b, budgetT0, tt.deposits)
			assert.Equal(t, float64(tt.want), b.AvailableAt(budgetT0), "available before")
			assert.Equal(t, tt.want, drain(b.WithdrawAt, budgetT0, 1e6))
			assert.Zero(t, b.AvailableAt(budgetT0), "available after")
			for range 3 {
				assert.False(t, b.WithdrawAt(budgetT0), "refused retries are not counted, and stay refused")
			}
		})
	}
}

// The ratio must multiply the first attempts. A port that computed 1/ratio
// and truncated it to an integer (one token per int(1/0.6) = 1 request) let
// every request retry at ratio 0.6.
func TestBudgetRatio0_6IsNotTruncatedInverse(t *testing.T) {
	t.Parallel()
	b := NewBudget(BudgetConfig{Ratio: 0.6, MinPerSecond: -1, Window: 10 * time.Second})
	budgetDeposit(b, budgetT0, 100)
	assert.Equal(t, 60, drain(b.WithdrawAt, budgetT0, 1000), "60 %, not 100 %")

	// Interleaved, as a Transport does it: 100 operations, one retry each wanted.
	b = NewBudget(BudgetConfig{Ratio: 0.6, MinPerSecond: -1, Window: 10 * time.Second})
	retries := 0
	for range 100 {
		b.DepositAt(budgetT0)
		if b.WithdrawAt(budgetT0) {
			retries++
		}
	}
	assert.Equal(t, 60, retries)
}

func TestBudgetRecoversAfterWindow(t *testing.T) {
	t.Parallel()
	b := NewBudget(BudgetConfig{Ratio: 0.5, MinPerSecond: -1, Window: 10 * time.Second})
	budgetDeposit(b, budgetT0, 10)
	require.Equal(t, 5, drain(b.WithdrawAt, budgetT0, 100))

	// Still exhausted at the end of the window, with its first attempts
	// still counted: one more deposit buys half a retry, rounded up.
	end := budgetT0.Add(10*time.Second - 1)
	assert.False(t, b.WithdrawAt(end))
	b.DepositAt(end)
	assert.True(t, b.WithdrawAt(end))
	assert.False(t, b.WithdrawAt(end))

	// One window later the first bucket has expired; the last one has not.
	next := budgetT0.Add(10 * time.Second)
	assert.Zero(t, b.AvailableAt(next), "1 deposit and 1 retry remain, in the last bucket")
	budgetDeposit(b, next, 4)
	assert.Equal(t, 2, drain(b.WithdrawAt, next, 100), "(1+4)·0.5 = 2.5 → 3 retries, one already spent")

	// Two windows later everything has expired.
	later := budgetT0.Add(20 * time.Second)
	assert.Zero(t, b.AvailableAt(later))
	budgetDeposit(b, later, 10)
	assert.Equal(t, 5, drain(b.WithdrawAt, later, 100))
}

func TestBudgetExpiry(t *testing.T) {
	t.Parallel()
	cfg := BudgetConfig{Ratio: 0.5, MinPerSecond: 0.1, Window: 10 * time.Second} // floor: 1 retry
	tests := []struct {
		name string
		gap  time.Duration
		live bool // the first bucket still counts after gap
	}{
		{"same bucket", 999 * time.Millisecond, true},
		{"next bucket", time.Second, true},
		{"last bucket of the window", 10*time.Second - 1, true},
		{"exactly one window", 10 * time.Second, false},
		{"one window and a half", 15 * time.Second, false},
		{"two windows", 20 * time.Second, false},
		{"hours, same slot", 3 * time.Hour, false},
		{"hours, other slot", 3*time.Hour + 3500*time.Millisecond, false},
		{"a year", 365 * 24 * time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := NewBudget(cfg)
			budgetDeposit(b, budgetT0, 20)
			require.Equal(t, 11, drain(b.WithdrawAt, budgetT0, 100)) // 1 + 20·0.5
			now := budgetT0.Add(tt.gap)
			if tt.live {
				assert.Zero(t, b.AvailableAt(now), "still spent")
				assert.False(t, b.WithdrawAt(now))
				budgetDeposit(b, now, 2)
				assert.Equal(t, 1, drain(b.WithdrawAt, now, 100))
				return
			}
			// Read-only first: stale buckets are ignored without being reset.
			assert.Equal(t, 1.0, b.AvailableAt(now), "only the floor")
			budgetDeposit(b, now, 4)
			assert.Equal(t, 3.0, b.AvailableAt(now))
			assert.Equal(t, 3, drain(b.WithdrawAt, now, 100))
		})
	}
}

// Buckets written at several times expire one by one.
func TestBudgetBucketsExpireOneByOne(t *testing.T) {
	t.Parallel()
	b := NewBudget(BudgetConfig{Ratio: 1, MinPerSecond: -1, Window: 10 * time.Second})
	for i := range 10 { // one deposit in each bucket
		b.DepositAt(budgetT0.Add(time.Duration(i)*time.Second + 500*time.Millisecond))
	}
	for i := range 12 {
		now := budgetT0.Add(time.Duration(9+i) * time.Second)
		assert.Equal(t, float64(max(10-i, 0)), b.AvailableAt(now), "at %ds", 9+i)
	}
}

func TestBudgetConfigResolution(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		b      *Budget
		idle   int           // retries allowed with no deposits
		per100 int           // extra retries allowed by 100 deposits
		window time.Duration // the effective window
	}{
		{"zero Budget is the default", new(Budget), 100, 20, 10 * time.Second},
		{"default", NewBudget(DefaultBudgetConfig()), 100, 20, 10 * time.Second},
		{"zero config is the default", NewBudget(BudgetConfig{}), 100, 20, 10 * time.Second},
		{"negative window", NewBudget(BudgetConfig{Ratio: 0.1, MinPerSecond: -1, Window: -time.Second}), 0, 10, 10 * time.Second},
		{"negative values", NewBudget(BudgetConfig{Ratio: -1, MinPerSecond: -5, Window: time.Second}), 0, 0, time.Second},
		{"NaN values are the defaults", NewBudget(BudgetConfig{Ratio: math.NaN(), MinPerSecond: math.NaN(), Window: time.Second}), 10, 20, time.Second},
		{"1s window", NewBudget(BudgetConfig{Ratio: 0.5, MinPerSecond: 3, Window: time.Second}), 3, 50, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.idle, drain(tt.b.WithdrawAt, budgetT0, 1e6), "idle")
			budgetDeposit(tt.b, budgetT0, 100)
			assert.Equal(t, tt.per100, drain(tt.b.WithdrawAt, budgetT0, 1e6), "after 100 deposits")
			assert.Zero(t, tt.b.AvailableAt(budgetT0.Add(tt.window-1)), "within the window")
			assert.Equal(t, float64(tt.idle), tt.b.AvailableAt(budgetT0.Add(tt.window)), "after the window")
		})
	}
}

func TestBudgetUnlimited(t *testing.T) {
	t.Parallel()
	for _, cfg := range []BudgetConfig{{Ratio: math.Inf(1), MinPerSecond: -1}, {Ratio: -1, MinPerSecond: math.Inf(1)}} {
		b := NewBudget(cfg)
		if cfg.Ratio > 0 {
			assert.Zero(t, b.AvailableAt(budgetT0), "no deposits, no retries: never 0 × Inf")
			b.DepositAt(budgetT0)
		}
		assert.Equal(t, math.Inf(1), b.AvailableAt(budgetT0))
		assert.Equal(t, 10000, drain(b.WithdrawAt, budgetT0, 10000))
	}
}

func TestBudgetOddTimes(t *testing.T) {
	t.Parallel()
	b := NewBudget(BudgetConfig{Ratio: 1, MinPerSecond: -1, Window: 10 * time.Second})
	// Before 1970: buckets are floored, so a window still spans 10 of them.
	pre := time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)
	budgetDeposit(b, pre, 3)
	assert.Equal(t, 3.0, b.AvailableAt(pre.Add(9*time.Second)))
	assert.Zero(t, b.AvailableAt(pre.Add(10*time.Second)))
	// A bucket stamped a little after now still counts: it holds the events
	// of goroutines whose clock read came later.
	assert.Equal(t, 3.0, b.AvailableAt(pre.Add(-time.Nanosecond)))

	// The zero Time and the far future saturate without panicking.
	for _, now := range []time.Time{{}, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)} {
		b := NewBudget(BudgetConfig{Ratio: 1, MinPerSecond: -1, Window: time.Nanosecond})
		budgetDeposit(b, now, 2)
		assert.Equal(t, 2, drain(b.WithdrawAt, now, 100))
	}

	// A tiny window has buckets of at least 1ns.
	b = NewBudget(BudgetConfig{Ratio: 1, MinPerSecond: -1, Window: 3})
	budgetDeposit(b, budgetT0, 1)
	assert.Equal(t, 1.0, b.AvailableAt(budgetT0.Add(9)))
	assert.Zero(t, b.AvailableAt(budgetT0.Add(10)))
}

// A retry storm against a dependency that always fails: 1,000 operations,
// each wanting 3 retries, within one window.
func TestBudgetRetryStormSimulation(t *testing.T) {
	t.Parallel()
	b := NewBudget(BudgetConfig{Ratio: 0.1, MinPerSecond: -1, Window: 10 * time.Second})
	retries := 0
	for i := range 1000 {
		now := budgetT0.Add(time.Duration(i) * 5 * time.Millisecond) // 5 s in all
		b.DepositAt(now)
		for range 3 {
			if !b.WithdrawAt(now) {
				break
			}
			retries++
		}
	}
	assert.LessOrEqual(t, retries, 100, "not 3,000")
	assert.GreaterOrEqual(t, retries, 99)

	// The same storm sustained for 100 s: retries stay near 10 % of traffic.
	b = NewBudget(BudgetConfig{Ratio: 0.1, MinPerSecond: -1, Window: 10 * time.Second})
	retries = 0
	for i := range 10000 {
		now := budgetT0.Add(time.Duration(i) * 10 * time.Millisecond)
		b.DepositAt(now)
		for range 3 {
			if !b.WithdrawAt(now) {
				break
			}
			retries++
		}
	}
	t.Logf("sustained storm: %d retries for 10000 operations", retries)
	assert.InDelta(t, 1000, retries, 120)
}

func TestBudgetConcurrentUse(t *testing.T) {
	t.Parallel()
	const goroutines, ops = 16, 2000
	run := func(b *Budget, now func() time.Time) (deposits, retries int64) {
		var d, r atomic.Int64
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range ops {
					b.DepositAt(now())
					d.Add(1)
					for range 3 {
						if !b.WithdrawAt(now()) {
							break
						}
						r.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return d.Load(), r.Load()
	}

	t.Run("fixed time is exact", func(t *testing.T) {
		t.Parallel()
		b := NewBudget(BudgetConfig{Ratio: 0.1, MinPerSecond: 1, Window: 10 * time.Second})
		d, r := run(b, func() time.Time { return budgetT0 })
		assert.Equal(t, int64(goroutines*ops), d)
		assert.Equal(t, int64(10+goroutines*ops/10), r)
		assert.Zero(t, b.AvailableAt(budgetT0))
	})
	t.Run("real time within slack", func(t *testing.T) {
		t.Parallel()
		// Buckets of 1ms roll constantly under the goroutines.
		b := NewBudget(BudgetConfig{Ratio: 0.1, MinPerSecond: 100, Window: 10 * time.Millisecond})
		var clock atomic.Int64
		now := func() time.Time { return budgetT0.Add(time.Duration(clock.Add(997))) }
		d, r := run(b, now)
		assert.Equal(t, int64(goroutines*ops), d)
		// Summed over the consecutive windows the test spanned, retries
		// stay within 10 % of deposits plus, per window, the floor of 1
		// and a slack of one per goroutine.
		windows := clock.Load()/int64(10*time.Millisecond) + 1
		t.Logf("rolling buckets: %d retries for %d operations over %d windows", r, d, windows)
		assert.LessOrEqual(t, r, d/10+windows*(1+goroutines))
		for i := range b.buckets {
			bk := &b.buckets[i]
			require.GreaterOrEqual(t, bk.deposits.Load(), int64(0))
			require.GreaterOrEqual(t, bk.withdrawals.Load(), int64(0))
			require.LessOrEqual(t, bk.deposits.Load(), d)
			require.LessOrEqual(t, bk.withdrawals.Load(), r)
		}
		// Every window's retries respect the bound, up to one per goroutine.
		at := budgetT0.Add(time.Duration(clock.Load()))
		var deps, wds int64
		for i := range b.buckets {
			dd, ww, ok := b.buckets[i].read(b.params().epoch(at))
			if ok {
				deps, wds = deps+dd, wds+ww
			}
		}
		t.Logf("last window: %d retries for %d operations", wds, deps)
		assert.LessOrEqual(t, float64(wds), 0.1*float64(deps)+1+goroutines)
	})
	t.Run("wall clock", func(t *testing.T) {
		t.Parallel()
		b := NewBudget(BudgetConfig{Ratio: 0.1, MinPerSecond: -1, Window: time.Hour})
		var wg sync.WaitGroup
		var d, r atomic.Int64
		for range goroutines {
			wg.Go(func() {
				for range ops {
					b.Deposit()
					d.Add(1)
					if b.Withdraw() {
						r.Add(1)
					}
					_ = b.Available()
				}
			})
		}
		wg.Wait()
		// Within one bucket the bound is exact; each bucket boundary crossed
		// during the test may add one retry per goroutine.
		assert.LessOrEqual(t, r.Load(), d.Load()/10+1+goroutines)
	})
}

func TestBudgetDoesNotAllocate(t *testing.T) {
	b := NewBudget(DefaultBudgetConfig())
	var zero Budget
	rolled := budgetT0 // a new bucket on each call
	tests := map[string]func(){
		"Deposit":        b.Deposit,
		"DepositAt":      func() { b.DepositAt(budgetT0) },
		"Withdraw":       func() { b.Withdraw() },
		"Available":      func() { b.Available() },
		"zero Deposit":   zero.Deposit,
		"zero Withdraw":  func() { zero.Withdraw() },
		"DepositAt roll": func() { rolled = rolled.Add(time.Second); b.DepositAt(rolled) },
	}
	for name, f := range tests {
		assert.Zero(t, testing.AllocsPerRun(1000, f), name)
	}
}

func BenchmarkBudget(b *testing.B) {
	b.Run("Deposit", func(b *testing.B) {
		b.ReportAllocs()
		bu := NewBudget(DefaultBudgetConfig())
		for b.Loop() {
			bu.Deposit()
		}
	})
	b.Run("Withdraw", func(b *testing.B) {
		b.ReportAllocs()
		bu := NewBudget(BudgetConfig{Ratio: 0.2, MinPerSecond: 1e12, Window: 10 * time.Second})
		for b.Loop() {
			bu.Withdraw()
		}
	})
	// The At forms leave out the cost of reading the clock.
	b.Run("DepositAt", func(b *testing.B) {
		b.ReportAllocs()
		bu, now := NewBudget(DefaultBudgetConfig()), time.Now()
		for b.Loop() {
			bu.DepositAt(now)
		}
	})
	b.Run("WithdrawAt", func(b *testing.B) {
		b.ReportAllocs()
		bu, now := NewBudget(BudgetConfig{Ratio: 0.2, MinPerSecond: 1e12, Window: 10 * time.Second}), time.Now()
		for b.Loop() {
			bu.WithdrawAt(now)
		}
	})
	b.Run("DepositParallel", func(b *testing.B) {
		b.ReportAllocs()
		bu := NewBudget(DefaultBudgetConfig())
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bu.Deposit()
			}
		})
	})
	b.Run("WithdrawParallel", func(b *testing.B) {
		b.ReportAllocs()
		bu := NewBudget(BudgetConfig{Ratio: 0.2, MinPerSecond: 1e12, Window: 10 * time.Second})
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bu.Withdraw()
			}
		})
	})
}

// TestBudgetSpendAt: a retry another budget allowed is counted whatever the
// rule says, and leaves the window with its bucket.
func TestBudgetSpendAt(t *testing.T) {
	b := NewBudget(BudgetConfig{Ratio: 0.5, MinPerSecond: -1, Window: 10 * time.Second})
	budgetDeposit(b, budgetT0, 10)
	for range 8 {
		b.SpendAt(budgetT0) // 8 spent where the rule allows 5
	}
	assert.Zero(t, drain(b.WithdrawAt, budgetT0, 100))
	budgetDeposit(b, budgetT0, 6)
	assert.Zero(t, drain(b.WithdrawAt, budgetT0, 100), "16 first attempts allow 8: all spent")
	budgetDeposit(b, budgetT0, 2)
	assert.Equal(t, 1, drain(b.WithdrawAt, budgetT0, 100))
	b.RefundAt(budgetT0)
	assert.Equal(t, 1, drain(b.WithdrawAt, budgetT0, 100), "a refund gives one back")
	later := budgetT0.Add(10 * time.Second)
	budgetDeposit(b, later, 10)
	assert.Equal(t, 5, drain(b.WithdrawAt, later, 100), "spent retries leave with their bucket")
	assert.Zero(t, testing.AllocsPerRun(100, func() { b.SpendAt(later) }))
}

// depositByDivision is deposit as it was before the latest bucket's hint:
// the epoch of now by division, always. The reference for
// TestDepositMatchesDivision.
func depositByDivision(b *Budget, now time.Time) {
	e := b.params().epoch(now)
	bk := b.bucket(e)
	if bk.epoch.Load() == e || bk.current(e) {
		bk.deposits.Add(1)
	}
}

// TestDepositMatchesDivision: deposits through the latest bucket's hint
// leave every bucket (epoch and counts) as deposits that divide each time
// would. The times walk forward and back, across bucket boundaries, before
// 1970, at the ends of time.Time's range (saturated), with monotonic
// readings and without, for widths down to 1 ns, and for the zero Budget.
func TestDepositMatchesDivision(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	starts := []time.Time{
		budgetT0, time.Now(), time.Unix(0, 0), time.Unix(-1, 999_999_999), time.Unix(0, -3),
		time.Unix(math.MaxInt64/int64(time.Second)-5, 0), time.Unix(-math.MaxInt64/int64(time.Second)+5, 0),
		time.Unix(1<<40, 0), time.Unix(-1<<40, 0), {}, time.Date(2262, 4, 11, 23, 47, 16, 854_775_000, time.UTC),
	}
	windows := []time.Duration{0, 10 * time.Second, time.Second, 30 * time.Nanosecond, 10 * time.Nanosecond, 7 * time.Millisecond}
	// From the saturated past to the saturated future: with 5 ns buckets the
	// past's epoch times the width is below MinInt64, and the difference
	// between the two wraps into the first bucket's width.
	far := []time.Time{time.Unix(-1<<40, 0), time.Unix(1<<40, 0), time.Unix(-1<<40, 0), time.Unix(1<<40, 0)}
	for _, w := range []time.Duration{50 * time.Nanosecond, 70 * time.Nanosecond, 10 * time.Second} {
		hinted, divided := NewBudget(BudgetConfig{Window: w}), NewBudget(BudgetConfig{Window: w})
		for _, now := range far {
			hinted.DepositAt(now)
			depositByDivision(divided, now)
		}
		for j := range hinted.buckets {
			h, d := &hinted.buckets[j], &divided.buckets[j]
			require.Equal(t, d.epoch.Load(), h.epoch.Load(), "window %v, bucket %d", w, j)
			require.Equal(t, d.deposits.Load(), h.deposits.Load(), "window %v, bucket %d", w, j)
		}
	}
	for _, w := range windows {
		for _, t0 := range starts {
			hinted, divided := &Budget{}, &Budget{}
			if w != 0 {
				hinted, divided = NewBudget(BudgetConfig{Window: w}), NewBudget(BudgetConfig{Window: w})
			}
			width := hinted.params().width
			now := t0
			for i := range 2000 {
				switch rng.IntN(6) {
				case 0: // the same time again
				case 1:
					now = now.Add(time.Duration(rng.Int64N(width + 1)))
				case 2:
					now = now.Add(-time.Duration(rng.Int64N(width + 1)))
				case 3:
					now = now.Add(time.Duration(rng.Int64N(30*width + 1)))
				case 4:
					now = now.Add(-time.Duration(rng.Int64N(30*width + 1)))
				case 5:
					now = t0.Add(time.Duration(rng.Int64N(3*width+1) - width))
				}
				hinted.DepositAt(now)
				depositByDivision(divided, now)
				for j := range hinted.buckets {
					h, d := &hinted.buckets[j], &divided.buckets[j]
					if h.epoch.Load() != d.epoch.Load() || h.deposits.Load() != d.deposits.Load() || h.withdrawals.Load() != d.withdrawals.Load() {
						t.Fatalf("window %v, start %v, deposit %d at %v: bucket %d is epoch %d with %d deposits, want epoch %d with %d",
							w, t0, i, now, j, h.epoch.Load(), h.deposits.Load(), d.epoch.Load(), d.deposits.Load())
					}
				}
			}
		}
	}
}
