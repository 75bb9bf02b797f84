package fakeserver

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"
)

// MaxKeyLength is the longest Idempotency-Key accepted, in bytes after
// unquoting; a longer key is answered with 400.
const MaxKeyLength = 255

// scope identifies an idempotency record: the principal (SHA-256 of the
// Authorization header, never the header itself), the method and route, and
// the key.
type scope struct {
	principal [sha256.Size]byte
	route     string // e.g. "POST /v1/charges"
	key       string
}

// principalOf hashes the Authorization header; no header is the zero principal.
func principalOf(r *http.Request) [sha256.Size]byte {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return [sha256.Size]byte{}
	}
	return sha256.Sum256([]byte(auth))
}

// parseKey reads the Idempotency-Key header, bare (abc) or as a Structured Field
// string ("abc", RFC 8941 §3.3.3, as the IETF draft sends it). present is false
// when there is no header.
func parseKey(h http.Header) (key string, present bool, err error) {
	vals := h.Values("Idempotency-Key")
	switch len(vals) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", true, errors.New("more than one Idempotency-Key header")
	}
	v := strings.Trim(vals[0], " \t")
	if strings.HasPrefix(v, `"`) {
		key, err = parseSFString(v)
		if err != nil {
			return "", true, err
		}
	} else {
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 || v[i] > 0x7e {
				return "", true, errors.New("Idempotency-Key must be printable ASCII")
			}
		}
		key = v
	}
	switch {
	case key == "":
		return "", true, errors.New("Idempotency-Key is empty")
	case len(key) > MaxKeyLength:
		return "", true, errors.New("Idempotency-Key is longer than 255 characters")
	}
	return key, true, nil
}

// parseSFString parses an sf-string that must be the whole value.
func parseSFString(v string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", errors.New("Idempotency-Key: invalid escape in quoted string")
			}
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", errors.New("Idempotency-Key: data after the quoted string")
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", errors.New("Idempotency-Key: quoted string must be printable ASCII")
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("Idempotency-Key: unterminated quoted string")
}

// response is a complete answer: what an idempotency record stores and replays.
// It is never modified once built.
type response struct {
	status int
	header http.Header
	body   []byte
}

// claim is the outcome of table.begin.
type claim uint8

const (
	claimed    claim = iota // the caller owns the key: execute, then complete or release
	replay                  // the key is completed: replay the stored response
	inProgress              // another request holds the key
	mismatch                // the key was used with another fingerprint
)

type recordState uint8

const (
	stateInProgress recordState = iota
	stateCompleted
)

type record struct {
	state       recordState
	fingerprint [sha256.Size]byte
	expires     time.Time
	resp        *response // set when completed
}

type fifoEntry struct {
	scope scope
	rec   *record
}

// table is the idempotency store: records keyed by scope, bounded in number and
// expiring after a TTL. One mutex guards it; it is never held while a request is
// served.
type table struct {
	mu   sync.Mutex
	recs map[scope]*record // guarded by mu
	fifo []fifoEntry       // guarded by mu; records in claim order, some stale
	head int               // guarded by mu; fifo[head] is the oldest entry
}

func newTable() *table { return &table{recs: make(map[scope]*record)} }

// begin looks the key up and, when it is free, claims it atomically: of two
// concurrent begins with one scope exactly one gets claimed. For a replay it
// also returns the stored response.
func (t *table) begin(s scope, fp [sha256.Size]byte, now time.Time, ttl time.Duration, maxRecords int) (*record, claim, *response) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.evict(now, maxRecords)
	if r, ok := t.recs[s]; ok {
		if r.state == stateCompleted && !now.Before(r.expires) {
			delete(t.recs, s)
		} else {
			switch {
			case r.fingerprint != fp:
				return r, mismatch, nil
			case r.state == stateInProgress:
				return r, inProgress, nil
			default:
				return r, replay, r.resp
			}
		}
	}
	r := &record{state: stateInProgress, fingerprint: fp, expires: now.Add(ttl)}
	t.recs[s] = r
	t.fifo = append(t.fifo, fifoEntry{s, r})
	return r, claimed, nil
}

// complete stores resp in a record claimed by begin.
func (t *table) complete(s scope, r *record, resp *response) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.recs[s] == r { // not evicted or reset meanwhile
		r.state, r.resp = stateCompleted, resp
	}
}

// release forgets a record claimed by begin, so that a retry executes again.
func (t *table) release(s scope, r *record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.recs[s] == r {
		delete(t.recs, s)
	}
}

func (t *table) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.recs)
}

func (t *table) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recs = make(map[scope]*record)
	t.fifo, t.head = nil, 0
}

// evict drops expired records from the old end of the fifo, then the oldest
// completed records while the table is full. In-progress records are never
// evicted: that would let a duplicate execute. evict requires t.mu held.
func (t *table) evict(now time.Time, maxRecords int) {
	for t.head < len(t.fifo) {
		e := t.fifo[t.head]
		if t.recs[e.scope] == e.rec {
			if e.rec.state != stateCompleted || now.Before(e.rec.expires) {
				break
			}
			delete(t.recs, e.scope)
		}
		t.pop()
	}
	for budget := len(t.fifo) - t.head; len(t.recs) >= maxRecords && budget > 0; budget-- {
		e := t.fifo[t.head]
		t.pop()
		if t.recs[e.scope] != e.rec {
			continue // stale: released or replaced
		}
		if e.rec.state == stateInProgress {
			t.fifo = append(t.fifo, e) // keep it; look at the next one
			continue
		}
		delete(t.recs, e.scope)
	}
	// Compact when the consumed prefix or the stale entries dominate.
	if live := len(t.fifo) - t.head; t.head > 1024 && t.head > live || live > 2*len(t.recs)+1024 {
		kept := make([]fifoEntry, 0, len(t.recs)+1)
		for _, e := range t.fifo[t.head:] {
			if t.recs[e.scope] == e.rec {
				kept = append(kept, e)
			}
		}
		t.fifo, t.head = kept, 0
	}
}

// pop drops the oldest fifo entry; it requires t.mu held.
func (t *table) pop() {
	t.fifo[t.head] = fifoEntry{}
	t.head++
}
