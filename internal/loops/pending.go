package loops

import (
	"sync"
	"time"
)

// pendingWindow is how long a pending call is remembered after its last
// attempt. It is longer than the longest wait of the SDKs that send no call
// id. A Stainless SDK honours Retry-After up to 60 s, openai-go up to 2 min.
const pendingWindow = 3 * time.Minute

// maxPendingCalls bounds the calls remembered.
const maxPendingCalls = 4096

// Pending remembers the recent calls of outer loops that send a retry
// count but no call id (Stainless SDKs). It keys them by request
// fingerprint, so that a retry takes its call's key. Only marked requests
// touch it.
//
// A call is forgotten with every other call of the same fingerprint. It is
// never forgotten alone, but when its success ends it. A fingerprint
// forgotten to make room is remembered as gone for the window. Retries of
// it get new keys meanwhile. So a retry finds either its own call among the
// others, or none of them. It never takes another call's key because its
// own was forgotten. A streamed body is not matched at all.
type Pending struct {
	mu    sync.Mutex
	calls map[string]*pendingSet // by fingerprint
	n     int                    // calls in all sets
	// gone holds, for a window, the fingerprints whose sets evict dropped
	// (Unix ns until when). A retry of a forgotten call must not match a
	// later call of the same fingerprint. So retries of them get new keys
	// while it lasts. maxPendingCalls bounds it. When full, it is emptied
	// and every retry gets a new key until lossyUntil.
	gone       map[string]int64
	lossyUntil int64
}

// pendingSet is the calls of one fingerprint.
type pendingSet struct {
	last  int64 // Unix ns of the latest attempt of any of them
	calls []pendingCall
}

type pendingCall struct {
	key   string
	count int // the mark of its latest attempt
}

// Key returns the key for an attempt with fingerprint fp and mark count.
// It is the key of the one pending call of fp whose latest mark is
// count-1. Otherwise it is minted, the key of a new call, which key
// records.
func (p *Pending) Key(fp string, count int, minted string, ns int64) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.calls[fp]
	if s != nil && ns-s.last > int64(pendingWindow) {
		p.drop(fp, s)
		s = nil
	}
	if s != nil && count > 0 && ns >= p.lossyUntil && p.gone[fp] <= ns {
		match := -1
		for i, pc := range s.calls {
			if pc.count != count-1 {
				continue
			}
			if match >= 0 {
				match = -2 // several: none is taken
				break
			}
			match = i
		}
		if match >= 0 {
			s.calls[match].count = count
			s.last = ns
			return s.calls[match].key
		}
	}
	if p.calls == nil {
		p.calls = make(map[string]*pendingSet)
	}
	if p.n >= maxPendingCalls {
		p.evict(ns)
		s = p.calls[fp] // evict may have dropped it
	}
	if s == nil {
		s = &pendingSet{}
		p.calls[fp] = s
	}
	p.resize(s, append(s.calls, pendingCall{key: minted, count: count}))
	s.last = ns
	return minted
}

// Forget removes the call with key from fp's set.
func (p *Pending) Forget(fp, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.calls[fp]
	if s == nil {
		return
	}
	for i, pc := range s.calls {
		if pc.key == key {
			p.resize(s, append(s.calls[:i], s.calls[i+1:]...))
			break
		}
	}
	if len(s.calls) == 0 {
		delete(p.calls, fp)
	}
}

// evict makes room. It drops the sets idle past the window. If none was,
// it drops the set idle longest and every set last used within a quarter
// of its idle time after it. So a full table does not scan all sets on
// every new call.
func (p *Pending) evict(ns int64) {
	oldest := ns
	dropped := false
	for fp, s := range p.calls {
		if ns-s.last > int64(pendingWindow) {
			p.drop(fp, s)
			dropped = true
			continue
		}
		oldest = min(oldest, s.last)
	}
	if dropped {
		return
	}
	cut := oldest + (ns-oldest)/4
	for fp, s := range p.calls {
		if s.last <= cut {
			p.drop(fp, s)
			p.tomb(fp, ns)
		}
	}
}

// tomb records that fp's calls were forgotten at ns with a retry still
// possible (see gone).
func (p *Pending) tomb(fp string, ns int64) {
	if p.gone == nil {
		p.gone = make(map[string]int64)
	}
	if len(p.gone) >= maxPendingCalls {
		for g, until := range p.gone {
			if until <= ns {
				delete(p.gone, g)
			}
		}
		if len(p.gone) >= maxPendingCalls {
			clear(p.gone)
			p.lossyUntil = ns + int64(pendingWindow)
		}
	}
	p.gone[fp] = ns + int64(pendingWindow)
}

// drop forgets fp's set s.
func (p *Pending) drop(fp string, s *pendingSet) {
	p.resize(s, nil)
	delete(p.calls, fp)
}

// resize makes calls the calls of set s, keeping the count of all calls.
func (p *Pending) resize(s *pendingSet, calls []pendingCall) {
	p.n += len(calls) - len(s.calls)
	s.calls = calls
}
