package pushback

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCounter checks the packed buckets: renewal by period, the window's
// edges, a late goroutine, saturation and the wrap of serial numbers.
func TestCounter(t *testing.T) {
	c := newCounter(4)
	c.add(10)
	c.add(10)
	c.add(11)
	assert.Equal(t, uint64(3), c.sum(11))
	assert.Equal(t, uint64(3), c.sum(13), "periods 10 to 13")
	assert.Equal(t, uint64(1), c.sum(14), "period 10 expired")
	assert.Equal(t, uint64(0), c.sum(15))

	c.add(14) // renews the bucket of period 10
	assert.Equal(t, uint64(2), c.sum(14))
	c.add(10) // late by a window: counts in the bucket that replaced it
	assert.Equal(t, uint64(3), c.sum(14))

	c.b[0].Store(uint64(20)<<32 | countMask)
	c.add(20)
	assert.Equal(t, uint64(countMask), c.sum(20), "saturated")

	w := newCounter(2)
	w.add(1<<32 - 1)
	w.add(0) // the serial wrapped
	assert.Equal(t, uint64(2), w.sum(0))
	assert.Equal(t, uint64(1), w.sum(1))
}

// TestAddBelow checks that the limit counts the whole window.
func TestAddBelow(t *testing.T) {
	c := newCounter(3)
	assert.True(t, c.addBelow(5, 2))
	assert.True(t, c.addBelow(6, 2))
	assert.False(t, c.addBelow(6, 2))
	assert.False(t, c.addBelow(7, 2))
	assert.True(t, c.addBelow(8, 2), "period 5 expired")
	assert.True(t, c.addBelow(8, 2.5), "a fractional limit admits up to its ceiling")
	assert.False(t, c.addBelow(8, 2.5))
}

// TestParseAttempt checks the attempt header's parser.
func TestParseAttempt(t *testing.T) {
	for in, want := range map[string]int{"0": 0, "1": 1, " 12\t": 12, "99999999999": 1_000_000} {
		n, ok := parseAttempt(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, n, in)
	}
	for _, in := range []string{"", " ", "-1", "+1", "1.0", "one", "1 2"} {
		_, ok := parseAttempt(in)
		assert.False(t, ok, in)
	}
}

// TestRecentKeys checks the key table's window and its slot reuse, with a
// random seed and a fixed one.
func TestRecentKeys(t *testing.T) {
	for _, seed := range []uint64{0, 42} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			k := newRecentKeys(3, 100, seed) // rounded up to 4 slots
			assert.Len(t, k.slots, 4)
			assert.False(t, k.seen("a", 1000))
			assert.True(t, k.seen("a", 1099))
			assert.False(t, k.seen("a", 1199), "100 ms after it was last seen")
			assert.True(t, k.seen("a", 1200))
			assert.False(t, k.seen("b", 1200))
			// A table of one slot forgets a key as soon as another takes its slot.
			one := newRecentKeys(1, 100, seed)
			assert.Len(t, one.slots, 2)
			n := 0
			for i := range 100 {
				if one.seen(string(rune('a'+i%26))+"x", 5) {
					n++
				}
			}
			assert.Less(t, n, 100)
		})
	}
}

// TestSeededHashSpreads checks that seededHash spreads keys that differ in
// one character over the slots and the tags, and that the seed changes it.
func TestSeededHashSpreads(t *testing.T) {
	const keys, slots = 4096, 256
	for _, seed := range []uint64{1, 42, 1 << 63} {
		perSlot := make([]int, slots)
		tags := map[uint32]bool{}
		for i := range keys {
			h := seededHash(seed, fmt.Sprintf("0190b3a4-6c1e-7d2a-8000-%012x", i))
			perSlot[h%slots]++
			tags[uint32(h>>32)] = true
			assert.NotEqual(t, h, seededHash(seed+1, fmt.Sprintf("0190b3a4-6c1e-7d2a-8000-%012x", i)))
		}
		// 16 keys per slot on average; a binomial count stays within 16 ± 20
		// for a hash that spreads them, while one that ignores some bits piles them up.
		assert.Less(t, slices.Max(perSlot), 40, "seed %d: the busiest slot", seed)
		assert.Greater(t, slices.Min(perSlot), 0, "seed %d: an empty slot", seed)
		assert.Greater(t, len(tags), keys-8, "seed %d: distinct tags", seed)
	}
}
