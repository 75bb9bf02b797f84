package resilient

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Regression: a call whose set was evicted (table full: an outage where
// every call is answered non-2xx) must not have its retry take the key of
// a later call with the same fingerprint: "never one key for two calls".
func TestPendingEvictionNeverSharesAKey(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var p pendingCalls
	// Call A (fingerprint X) sends its first attempt, gets a 500.
	assert.Equal(t, "A", p.key("X", 0, "A", now))
	// Other calls fill the table within the window (all answered non-2xx).
	for i := 1; i < maxPendingCalls+1; i++ {
		p.key(fmt.Sprint("other", i), 0, "k", now.Add(time.Duration(i)*time.Millisecond))
	}
	// Call C: the same request as A (same method, URL and body), a new
	// logical call, sends its first attempt.
	t1 := now.Add(10 * time.Second)
	assert.Equal(t, "C", p.key("X", 0, "C", t1))
	// A's SDK retries (mark 1) a second later.
	got := p.key("X", 1, "A2", t1.Add(time.Second))
	assert.NotEqual(t, "C", got, "A's retry took C's key: two logical calls share one key")
}
