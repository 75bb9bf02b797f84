package storm

import (
	"regexp"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient"
)

// TestKeyFunc checks the keys of a client's seeded source: valid keys, UUIDv7s
// holding the bubble's time, unique, the same for a seed, other for another.
func TestKeyFunc(t *testing.T) {
	uuid7 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	mint := func(seed uint64) []string {
		var keys []string
		synctest.Test(t, func(t *testing.T) {
			f := keyFunc(seed)
			for range 1000 {
				k, err := f()
				require.NoError(t, err)
				require.NoError(t, resilient.ValidateKey(k))
				require.Regexp(t, uuid7, k)
				// The first 48 bits are the Unix milliseconds of the bubble's clock.
				ms := time.Now().UnixMilli()
				assert.Equal(t, ms>>16, parseHex(t, k[:8]), k)
				assert.Equal(t, ms&0xffff, parseHex(t, k[9:13]), k)
				keys = append(keys, k)
				time.Sleep(time.Millisecond / 3)
			}
		})
		return keys
	}
	a := mint(1)
	unique := map[string]bool{}
	for _, k := range a {
		unique[k] = true
	}
	assert.Len(t, unique, len(a))
	assert.Equal(t, a, mint(1), "the same seed")
	b := mint(2)
	for i := range a {
		assert.NotEqual(t, a[i], b[i], "seeds 1 and 2, key %d", i)
	}
}

func parseHex(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 16, 64)
	require.NoError(t, err)
	return n
}
