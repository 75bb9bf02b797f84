package loops

import "sync"

// maxAsked bounds the delays kept.
const maxAsked = 4096

// Asked are the times servers named for operations' next tries, by
// operation: an outer loop's key (string), or the failure a loop without
// marks sends again (*failure). Touched on the failure path and by the
// calls of outer loops only.
type Asked struct {
	mu    sync.Mutex
	until map[any]int64 // Unix ns
}

// Set records that the operation k is not to be tried again before until,
// at now.
func (a *Asked) Set(k any, until, now int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.until == nil {
		a.until = make(map[any]int64)
	}
	if len(a.until) >= maxAsked {
		for k, u := range a.until {
			if u <= now {
				delete(a.until, k)
			}
		}
		if len(a.until) >= maxAsked {
			return // full of delays still on: this one is not kept
		}
	}
	a.until[k] = max(a.until[k], until)
}

// Get returns the time recorded for k, 0 if none is still on at now.
func (a *Asked) Get(k any, now int64) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	u, ok := a.until[k]
	if !ok {
		return 0
	}
	if u <= now {
		delete(a.until, k)
		return 0
	}
	return u
}
