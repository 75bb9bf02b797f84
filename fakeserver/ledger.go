package fakeserver

import (
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"
)

// Entry is one effect in the ledger: an object created by a POST.
type Entry struct {
	// Seq numbers the effects from 1, in the order they were committed.
	Seq int `json:"seq"`
	// ID is the object's id, e.g. "ch_00000001" for the collection "charges".
	ID string `json:"id"`
	// Collection is the {collection} of POST /v1/{collection}.
	Collection string `json:"collection"`
	// Key is the Idempotency-Key the request carried, "" for none.
	Key string `json:"key,omitempty"`
	// Principal is the first 16 hex digits of SHA-256(Authorization), "" for
	// none; the header itself is never stored.
	Principal string `json:"principal,omitempty"`
	// Object is the JSON of the created object, as answered.
	Object json.RawMessage `json:"object"`
	// Created is when the effect was committed (by the server's clock).
	Created time.Time `json:"created"`
}

// ledger is the append-only record of effects, with the indexes the oracles
// need. One mutex guards it.
type ledger struct {
	mu         sync.Mutex
	entries    []Entry        // guarded by mu
	byID       map[string]int // guarded by mu; index into entries
	perKey     map[string]int // guarded by mu; effects per Idempotency-Key
	perScope   map[scope]int  // guarded by mu; effects per (principal, route, key)
	duplicates int            // guarded by mu; effects beyond the first per scope
}

func newLedger() *ledger {
	l := &ledger{}
	l.reset()
	return l
}

func (l *ledger) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = nil
	l.byID = make(map[string]int)
	l.perKey = make(map[string]int)
	l.perScope = make(map[scope]int)
	l.duplicates = 0
}

// add appends e, assigning its Seq. A keyed effect (hasKey) also counts under
// its key and its scope.
func (l *ledger) add(e Entry, s scope, hasKey bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.Seq = len(l.entries) + 1
	l.byID[e.ID] = len(l.entries)
	l.entries = append(l.entries, e)
	if hasKey {
		l.perKey[e.Key]++
		l.perScope[s]++
		if l.perScope[s] > 1 {
			l.duplicates++
		}
	}
}

// get returns the entry with the id.
func (l *ledger) get(id string) (Entry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.byID[id]
	if !ok {
		return Entry{}, false
	}
	return l.entries[i], true
}

func (l *ledger) effects(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.perKey[key]
}

func (l *ledger) counts() (total, duplicates int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries), l.duplicates
}

// snapshot copies the entries and their objects.
func (l *ledger) snapshot() []Entry {
	l.mu.Lock()
	out := append([]Entry(nil), l.entries...)
	l.mu.Unlock()
	for i := range out {
		out[i].Object = append(json.RawMessage(nil), out[i].Object...)
	}
	return out
}

// principalID is the short, non-reversible form of a principal used in Entry.
func principalID(p [32]byte) string {
	if p == ([32]byte{}) {
		return ""
	}
	return hex.EncodeToString(p[:8])
}
