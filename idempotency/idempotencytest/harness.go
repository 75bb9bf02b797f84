// Package idempotencytest is a black-box conformance suite for
// idempotency stores: it runs the middleware and the Inbox over a store,
// through real HTTP on loopback, and checks every rule of package
// idempotency. A store's tests call Run with a Factory:
//
//	func TestConformance(t *testing.T) {
//		idempotencytest.Run(t, func(t *testing.T) idempotencytest.Env {
//			return idempotencytest.MemoryEnv(idempotency.NewMemoryStore())
//		})
//	}
package idempotencytest

import (
	"context"
	"sync"
	"testing"

	"github.com/resilienthttp/resilient/idempotency"
)

// Env is one store under test and the effects the test handler applies.
type Env struct {
	// Store is a store with no records of other tests.
	Store idempotency.Store
	// Apply records one effect named name, within ctx (the handler's
	// context, carrying the store's claim). With an atomic store the
	// effect must be part of the claim's transaction, so that releasing
	// the claim undoes it.
	Apply func(ctx context.Context, name string) error
	// Count returns how many effects named name exist (committed).
	Count func(name string) int
}

// Factory returns a new Env for test t; Run calls it once per subtest.
type Factory func(t testing.TB) Env

// MemoryEnv is an Env for a store that is not atomic with effects: its
// effects are counted in memory and never undone.
func MemoryEnv(store idempotency.Store) Env {
	var mu sync.Mutex
	n := make(map[string]int)
	return Env{
		Store: store,
		Apply: func(_ context.Context, name string) error {
			mu.Lock()
			defer mu.Unlock()
			n[name]++
			return nil
		},
		Count: func(name string) int {
			mu.Lock()
			defer mu.Unlock()
			return n[name]
		},
	}
}
