package loops

import (
	"sync"
	"time"
)

// recentWindow is how long a key is remembered after its last attempt: an
// outer retry loop comes back within seconds.
const recentWindow = time.Minute

// maxRecentKeys bounds the keys remembered.
const maxRecentKeys = 4096

// Recent remembers how many attempts were sent under each key in recent
// calls. It holds the application's own keys only: a key the Transport
// minted is never seen again. It is not on the path of requests with
// minted keys.
type Recent struct {
	mu   sync.Mutex
	keys map[string]recentKey
}

type recentKey struct {
	attempts int   // attempts sent under the key so far
	last     int64 // Unix ns of the last call's end
}

// Attempts returns the number of attempts already sent under key in calls
// that ended within recentWindow of now.
func (r *Recent) Attempts(key string, now int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.keys[key]
	if !ok || now-e.last > int64(recentWindow) {
		return 0
	}
	return e.attempts
}

// Record notes that attempts attempts have now been sent under key.
func (r *Recent) Record(key string, attempts int, ns int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = make(map[string]recentKey)
	}
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
