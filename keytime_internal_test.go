package resilient

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeyTime(t *testing.T) {
	before := time.Now().Truncate(time.Millisecond) // UUIDv7 keeps milliseconds
	k, err := NewKey()
	require.NoError(t, err)
	after := time.Now()
	ts, ok := keyTime(k)
	require.True(t, ok)
	assert.False(t, ts.Before(before) || ts.After(after), "the key's time is when it was minted")
	_, ok = keyTime("not-a-uuid")
	assert.False(t, ok)
}
