package loops

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPendingCalls(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var p Pending
	// A call and its retries: one key.
	assert.Equal(t, "a", p.Key("fp", 0, "a", now.UnixNano()))
	assert.Equal(t, "a", p.Key("fp", 1, "b", now.UnixNano()))
	assert.Equal(t, "a", p.Key("fp", 2, "c", now.UnixNano()))
	// A retry whose previous mark is nobody's: a new call.
	assert.Equal(t, "d", p.Key("fp", 5, "d", now.UnixNano()))
	// Another fingerprint is another call.
	assert.Equal(t, "e", p.Key("other", 1, "e", now.UnixNano()))

	// Two calls with one fingerprint at once: their retries cannot be told
	// apart, and each gets a new key.
	var q Pending
	assert.Equal(t, "x", q.Key("fp", 0, "x", now.UnixNano()))
	assert.Equal(t, "y", q.Key("fp", 0, "y", now.UnixNano()))
	assert.Equal(t, "z", q.Key("fp", 1, "z", now.UnixNano()))
	assert.Equal(t, "w", q.Key("fp", 1, "w", now.UnixNano()))
	// Once one has succeeded (forget), the other's retries match it alone.
	q.Forget("fp", "x")
	q.Forget("fp", "z")
	q.Forget("fp", "w")
	assert.Equal(t, "y", q.Key("fp", 1, "v", now.UnixNano()))

	// Past the window, a set is forgotten whole.
	assert.Equal(t, "n", q.Key("fp", 2, "n", now.Add(pendingWindow+1).UnixNano()))
}

func TestPendingCallsBounded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var p Pending
	for i := range 3 * maxPendingCalls {
		fp := string(rune('a'+i%7)) + string(rune(i))
		p.Key(fp, 0, "k", now.Add(time.Duration(i)*time.Millisecond).UnixNano())
		assert.LessOrEqual(t, p.n, maxPendingCalls)
	}
	total := 0
	for _, s := range p.calls {
		total += len(s.calls)
	}
	assert.Equal(t, p.n, total)
	// Many calls with one fingerprint: the set is dropped whole when room
	// is needed, never one of its calls alone.
	var q Pending
	for range maxPendingCalls + 3 {
		q.Key("same", 0, "k", now.UnixNano())
		assert.LessOrEqual(t, q.n, maxPendingCalls)
	}
	assert.Len(t, q.calls["same"].calls, q.n)
}

// Regression: a call whose set was evicted (table full: an outage where
// every call is answered non-2xx) must not have its retry take the key of
// a later call with the same fingerprint: "never one key for two calls".
func TestPendingEvictionNeverSharesAKey(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var p Pending
	// Call A (fingerprint X) sends its first attempt, gets a 500.
	assert.Equal(t, "A", p.Key("X", 0, "A", now.UnixNano()))
	// Other calls fill the table within the window (all answered non-2xx).
	for i := 1; i < maxPendingCalls+1; i++ {
		p.Key(fmt.Sprint("other", i), 0, "k", now.Add(time.Duration(i)*time.Millisecond).UnixNano())
	}
	// Call C: the same request as A (same method, URL and body), a new
	// logical call, sends its first attempt.
	t1 := now.Add(10 * time.Second)
	assert.Equal(t, "C", p.Key("X", 0, "C", t1.UnixNano()))
	// A's SDK retries (mark 1) a second later.
	got := p.Key("X", 1, "A2", t1.Add(time.Second).UnixNano())
	assert.NotEqual(t, "C", got, "A's retry took C's key: two logical calls share one key")
}
