package fakeserver

import (
	"net/http"
	"sync"
)

// Draw says how a route draws the random outcome of a request (FailureRate,
// then Mix) once its Script is used up.
type Draw string

const (
	// DrawStream draws from one random stream per route, seeded by
	// Scenario.Seed, in the order requests arrive: the same seed and the same
	// order of requests give the same outcomes. It is the default.
	DrawStream Draw = "stream"
	// DrawOperation draws each request's outcome from a hash of
	// (Scenario.Seed, the route's Match, the request's operation, its attempt
	// number), so that the k-th attempt of an operation meets the same fate
	// whatever the client did before and whatever other requests arrived
	// meanwhile. The operation is the value of the route's OperationHeader
	// (default DefaultOperationHeader), else the request's Idempotency-Key;
	// a request with neither is drawn from the stream, as with DrawStream.
	// The attempt number is how many requests of that operation the route
	// has drawn an outcome for, this one included (1 for the first): the
	// server counts what it sees rather than trusting a Retry-Attempt header
	// that some clients do not send. Requests shed by the capacity model, or
	// answered by an outage or a validation error, do not count. The counts
	// survive SetScenario and are cleared by Reset.
	DrawOperation Draw = "operation"
)

// DefaultOperationHeader is the request header that names a request's
// operation for DrawOperation, unless Route.OperationHeader says otherwise.
const DefaultOperationHeader = "X-Operation-Id"

// maxOpCounts bounds the attempt counts kept for DrawOperation; when it is
// reached the counts start over (each operation's next attempt counts as its
// first), so a long-running server's memory stays bounded.
const maxOpCounts = 1 << 20

// OperationFate returns the draw in [0, 1) that DrawOperation gives to the
// attempt-th attempt (1 for the first) of operation op on the route whose
// Match is match, under seed. The route's outcome is a FailureRate failure if
// the draw is below FailureRate, else the first Mix entry whose cumulative
// probability (after FailureRate) exceeds it, else no fault. It is a pure
// function, the same in every process: a test can tell from it which
// attempts of which operations fail.
func OperationFate(seed uint64, match, op string, attempt int) float64 {
	return fate(seed, fnv1a(normalMatch(match)), op, uint64(max(attempt, 0)))
}

// fate hashes (seed, route, op, attempt) with FNV-1a and splitmix64 into a
// float64 in [0, 1).
func fate(seed, route uint64, op string, attempt uint64) float64 {
	h := splitmix64(seed ^ 0x6a09e667f3bcc908)
	h = splitmix64(h ^ route)
	h = splitmix64(h ^ fnv1a(op))
	h = splitmix64(h ^ attempt)
	return float64(h>>11) / (1 << 53)
}

// splitmix64 is the finaliser of the SplitMix64 generator: a bijective mix
// of the 64 bits of x.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// fnv1a is the 64-bit FNV-1a hash of s.
func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// opCounts counts the attempts of each operation per route, for
// DrawOperation. It is safe for concurrent use.
type opCounts struct {
	mu sync.Mutex
	n  map[opID]uint64 // guarded by mu
}

type opID struct {
	route uint64
	op    string
}

// next counts one more attempt of op on route and returns its number (1 for
// the first).
func (c *opCounts) next(route uint64, op string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil || len(c.n) >= maxOpCounts {
		c.n = make(map[opID]uint64)
	}
	id := opID{route, op}
	c.n[id]++
	return c.n[id]
}

// reset forgets every count.
func (c *opCounts) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = nil
}

// operationOf returns the operation identity of r for p's DrawOperation: its
// operation header, else its idempotency key (key), else "".
func (p *routePlan) operationOf(r *http.Request, key string) string {
	if p == nil || p.draw != DrawOperation {
		return ""
	}
	if op := r.Header.Get(p.opHeader); op != "" {
		return op
	}
	return key
}
