package resilient

import (
	"sync"
)

// A server's delay holds on every path. The Transport's own retries wait
// it (decide.go); a 429's pause holds the host (settle.go). A retry that
// an outer loop sends, an SDK's marked loop or a hand-written one, is a
// call of its own: the time its server named for the operation's next try
// is kept here between the calls. The loop's next try waits what is left
// of it (hostState.outerWait), within the caller's deadline: the one wait
// the Transport adds to a loop, the server's.

// maxAsked bounds the delays kept.
const maxAsked = 4096

// askedDelays are the times servers named for operations' next tries, by
// operation: an outer loop's key (string), or the failure a loop without
// marks sends again (*failure). Touched on the failure path and by the
// calls of outer loops only.
type askedDelays struct {
	mu    sync.Mutex
	until map[any]int64 // Unix ns
}

// set records that the operation k is not to be tried again before until,
// at now.
func (a *askedDelays) set(k any, until, now int64) {
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

// get returns the time recorded for k, 0 if none is still on at now.
func (a *askedDelays) get(k any, now int64) int64 {
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

// askedBefore returns the time the server named for the next try of the
// operation c, an outer loop's call, continues: 0 if none.
func (c *call) askedBefore(now int64) int64 {
	switch {
	case c.loop != nil && c.loop.from != nil:
		return c.t.asked.get(c.loop.from, now)
	case c.outer != nil && c.outer.marked && c.op.key != "":
		return c.t.asked.get(c.op.key, now)
	}
	return 0
}
