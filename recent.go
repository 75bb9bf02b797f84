package resilient

import (
	"sync"
	"time"
)

// An SDK that retries on its own (stripe-go, say) calls RoundTrip again
// with the same key after a failure. Each of those calls is a retry of the
// same operation, not a new one: the Transport numbers its attempts after
// the earlier calls' (Retry-Attempt, Report, Events), and the gate admits
// its first attempt as a retry (a retry token, not a first attempt's free
// pass). Attempts are not capped across calls: re-sending a key is also how
// a caller resolves an unknown outcome. When the SDK's marks, or
// WithOuterRetries(true), say a loop retries, each call sends one attempt
// and the loop drives (outerloop.go).

// recentWindow is how long a key is remembered after its last attempt: an
// outer retry loop comes back within seconds.
const recentWindow = time.Minute

// maxRecentKeys bounds the keys remembered.
const maxRecentKeys = 4096

// recentKeys remembers, for the application's own keys only (a key the
// Transport minted is never seen again), how many attempts were sent under
// each in recent calls. Not on the path of requests with minted keys.
type recentKeys struct {
	mu   sync.Mutex
	keys map[string]recentKey
}

type recentKey struct {
	attempts int   // attempts sent under the key so far
	last     int64 // Unix ns of the last call's end
}

// attempts returns the number of attempts already sent under key in calls
// that ended within recentWindow of now.
func (r *recentKeys) attempts(key string, now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.keys[key]
	if !ok || now.UnixNano()-e.last > int64(recentWindow) {
		return 0
	}
	return e.attempts
}

// record notes that attempts attempts have now been sent under key.
func (r *recentKeys) record(key string, attempts int, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = make(map[string]recentKey)
	}
	ns := now.UnixNano()
	if _, ok := r.keys[key]; !ok && len(r.keys) >= maxRecentKeys {
		for k, e := range r.keys {
			if ns-e.last > int64(recentWindow) {
				delete(r.keys, k)
			}
		}
		if len(r.keys) >= maxRecentKeys {
			return // forget this one rather than grow
		}
	}
	r.keys[key] = recentKey{attempts: attempts, last: ns}
}
