package storm

import (
	"encoding/binary"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/resilienthttp/resilient"
)

// seededKeys returns the option that makes a resilient client mint its keys
// from the seed of its base, when base is a seededBase (see keysOf); no
// option otherwise.
func seededKeys(base http.RoundTripper) []resilient.Option {
	if _, ok := base.(seededBase); ok {
		return []resilient.Option{resilient.WithKeyFunc(keysOf(base))}
	}
	return nil
}

// keysOf returns the key function of the client whose base is base: keys
// drawn from the client's seed when base is a seededBase (keyFunc),
// resilient.NewKey otherwise.
func keysOf(base http.RoundTripper) func() (string, error) {
	if s, ok := base.(seededBase); ok {
		return keyFunc(mix(s.seed, 0x6b657973, 0))
	}
	return resilient.NewKey
}

// keyFunc returns a key function for resilient.WithKeyFunc that mints
// UUIDv7s (RFC 9562) as the Transport's default does, the current time in
// their first 48 bits, but with random bits drawn from a source seeded with
// seed rather than crypto/rand. In a virtual run the clock is the bubble's,
// so a client's keys are a function of the storm's seed, and so is what a
// server does with them: the pushback middleware's key table. Keys of
// different clients (different seeds) collide as rarely as UUIDv7s do
// (74 random bits). It is safe for concurrent use.
func keyFunc(seed uint64) func() (string, error) {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0x7575696437)) // guarded by mu
	return func() (string, error) {
		mu.Lock()
		hi, lo := rng.Uint64(), rng.Uint64()
		mu.Unlock()
		var u uuid.UUID
		binary.BigEndian.PutUint64(u[:8], uint64(time.Now().UnixMilli())<<16|hi&0xffff)
		binary.BigEndian.PutUint64(u[8:], lo)
		u[6] = 0x70 | u[6]&0x0f // version 7
		u[8] = 0x80 | u[8]&0x3f // variant 10 (RFC 9562)
		return u.String(), nil
	}
}
