package loops

import (
	"sync"
	"time"
)

// pendingWindow is how long a pending call is remembered after its last
// attempt. It is longer than the longest wait of the SDKs that send no call
// id. A Stainless SDK honours Retry-After up to 60 s, openai-go up to 2 min.
const PendingWindow = 3 * time.Minute

// maxPendingCalls bounds the calls remembered.
const MaxPendingCalls = 4096

// pendingCalls remembers the recent calls of outer loops that send a retry
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
	Calls map[string]*pendingSet // by fingerprint
	N     int                    // calls in all sets
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
	Calls []pendingCall
}

type pendingCall struct {
	key   string
	count int // the mark of its latest attempt
}

// key returns the key for an attempt with fingerprint fp and mark count.
// It is the key of the one pending call of fp whose latest mark is
// count-1. Otherwise it is minted, the key of a new call, which key
// records.
func (p *Pending) Key(fp string, count int, minted string, ns int64) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.Calls[fp]
	if s != nil && ns-s.last > int64(PendingWindow) {
		p.drop(fp, s)
		s = nil
	}
	if s != nil && count > 0 && ns >= p.lossyUntil && p.gone[fp] <= ns {
		match := -1
		for i, pc := range s.Calls {
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
			s.Calls[match].count = count
			s.last = ns
			return s.Calls[match].key
		}
	}
	if p.Calls == nil {
		p.Calls = make(map[string]*pendingSet)
	}
	if p.N >= MaxPendingCalls {
		p.evict(ns)
		s = p.Calls[fp] // evict may have dropped it
	}
	if s == nil {
		s = &pendingSet{}
		p.Calls[fp] = s
	}
	p.resize(s, append(s.Calls, pendingCall{key: minted, count: count}))
	s.last = ns
	return minted
}

// forget removes the call with key from fp's set.
func (p *Pending) Forget(fp, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.Calls[fp]
	if s == nil {
		return
	}
	for i, pc := range s.Calls {
		if pc.key == key {
			p.resize(s, append(s.Calls[:i], s.Calls[i+1:]...))
			break
		}
	}
	if len(s.Calls) == 0 {
		delete(p.Calls, fp)
	}
}

// evict makes room. It drops the sets idle past the window. If none was,
// it drops the set idle longest and every set last used within a quarter
// of its idle time after it. So a full table does not scan all sets on
// every new call.
func (p *Pending) evict(ns int64) {
	oldest := ns
	dropped := false
	for fp, s := range p.Calls {
		if ns-s.last > int64(PendingWindow) {
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
	for fp, s := range p.Calls {
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
	if len(p.gone) >= MaxPendingCalls {
		for g, until := range p.gone {
			if until <= ns {
				delete(p.gone, g)
			}
		}
		if len(p.gone) >= MaxPendingCalls {
			clear(p.gone)
			p.lossyUntil = ns + int64(PendingWindow)
		}
	}
	p.gone[fp] = ns + int64(PendingWindow)
}

// drop forgets fp's set s.
func (p *Pending) drop(fp string, s *pendingSet) {
	p.resize(s, nil)
	delete(p.Calls, fp)
}

// resize makes calls the calls of set s, keeping the count of all calls.
func (p *Pending) resize(s *pendingSet, calls []pendingCall) {
	p.N += len(calls) - len(s.Calls)
	s.Calls = calls
}
