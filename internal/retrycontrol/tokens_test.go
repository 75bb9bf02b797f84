package retrycontrol

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRetryTokensBucket(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		rt     *Tokens
		firsts int // first attempts in the window before draining
		want   int // retries allowed from a full bucket
	}{
		{"zero value is the default: MinTokens 3", new(Tokens), 0, 3},
		{"default, 100 first attempts: still the minimum", NewTokens(DefaultTokensConfig()), 100, 3},
		{"default, 1000 first attempts: 2 %", NewTokens(DefaultTokensConfig()), 1000, 20},
		{"zero config is the default", NewTokens(TokensConfig{}), 1000, 20},
		{"CapRatio 0.1", NewTokens(TokensConfig{CapRatio: 0.1}), 1000, 100},
		{"negative MinTokens is 0", NewTokens(TokensConfig{MinTokens: -1}), 0, 0},
		{"NaN MinTokens is 0", NewTokens(TokensConfig{MinTokens: math.NaN()}), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for range tt.firsts {
				tt.rt.FirstAt(budgetT0)
			}
			assert.Equal(t, float64(tt.want), tt.rt.AvailableAt(budgetT0))
			assert.Equal(t, tt.want, drain(tt.rt.TakeAt, budgetT0, 1000))
			assert.False(t, tt.rt.TakeAt(budgetT0), "empty")
		})
	}
}

func TestRetryTokensInfiniteCapRatioSaturates(t *testing.T) {
	t.Parallel()
	rt := NewTokens(TokensConfig{CapRatio: math.Inf(1)})
	rt.FirstAt(budgetT0)
	assert.Equal(t, 10000, drain(rt.TakeAt, budgetT0, 10000))
	assert.Greater(t, rt.AvailableAt(budgetT0), 1e12, "no overflow into a negative capacity")
}

func TestRetryTokensEarnAndRefund(t *testing.T) {
	t.Parallel()
	rt := NewTokens(TokensConfig{Refill: 0.5, MinTokens: 3})
	assert.Equal(t, 3, drain(rt.TakeAt, budgetT0, 10))
	rt.Earn()
	assert.False(t, rt.TakeAt(budgetT0), "half a token is not a retry")
	rt.Earn()
	assert.True(t, rt.TakeAt(budgetT0), "two healthy answers earn one retry")
	rt.Refund()
	assert.True(t, rt.TakeAt(budgetT0), "a refunded token can be taken again")
	for range 100 {
		rt.Earn()
	}
	assert.Equal(t, float64(3), rt.AvailableAt(budgetT0), "never more than a full bucket")
}

// The bucket's size follows recent first attempts: when they leave the
// window, what was earned beyond the minimum is no longer spendable.
func TestRetryTokensCapacityFollowsTheWindow(t *testing.T) {
	t.Parallel()
	rt := NewTokens(TokensConfig{CapRatio: 0.1, MinTokens: 1, Window: 10 * time.Second})
	for range 200 {
		rt.FirstAt(budgetT0)
	}
	assert.Equal(t, float64(20), rt.AvailableAt(budgetT0))
	assert.Equal(t, float64(1), rt.AvailableAt(budgetT0.Add(10*time.Second)), "first attempts left the window")
}

// Refill 0 means the default; negative means retries never earn their
// tokens back.
func TestRetryTokensRefillResolution(t *testing.T) {
	t.Parallel()
	rt := NewTokens(TokensConfig{Refill: -1, MinTokens: 1})
	assert.True(t, rt.TakeAt(budgetT0))
	for range 100 {
		rt.Earn()
	}
	assert.False(t, rt.TakeAt(budgetT0))
	assert.Equal(t, DefaultTokensConfig().params(), TokensConfig{}.params())
}

func TestRetryTokensConcurrentTakesNeverExceedTheBucket(t *testing.T) {
	t.Parallel()
	rt := NewTokens(TokensConfig{MinTokens: 50})
	var taken atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if rt.TakeAt(budgetT0) {
					taken.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(50), taken.Load())
}

func TestRetryTokensDoNotAllocate(t *testing.T) {
	rt := new(Tokens)
	now := budgetT0
	assert.Zero(t, testing.AllocsPerRun(100, func() { rt.FirstAt(now) }), "FirstAt")
	assert.Zero(t, testing.AllocsPerRun(100, func() { rt.TakeAt(now) }), "TakeAt")
	assert.Zero(t, testing.AllocsPerRun(100, func() { rt.Earn() }), "Earn")
	assert.Zero(t, testing.AllocsPerRun(100, func() { rt.First() }), "First")
	assert.Zero(t, testing.AllocsPerRun(100, func() { rt.Take() }), "Take")
	assert.Zero(t, testing.AllocsPerRun(100, func() { rt.Refund() }), "Refund")
}

func BenchmarkRetryTokens(b *testing.B) {
	rt := new(Tokens)
	now := time.Now()
	b.Run("First", func(b *testing.B) {
		for b.Loop() {
			rt.FirstAt(now)
		}
	})
	b.Run("Earn", func(b *testing.B) {
		for b.Loop() {
			rt.Earn()
		}
	})
	b.Run("TakeEarn", func(b *testing.B) {
		for b.Loop() {
			if rt.TakeAt(now) {
				rt.Refund()
			}
		}
	})
}

// drain calls take at now until it refuses (or limit is reached) and
// returns how many retries it allowed: a Budget's WithdrawAt or the
// tokens' TakeAt.
func drain(take func(time.Time) bool, now time.Time, limit int) int {
	n := 0
	for n < limit && take(now) {
		n++
	}
	return n
}
