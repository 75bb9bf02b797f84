// Package servercrash is the server-side crash matrix of the idempotency
// stores, shared by their modules' tests: a server process (the test
// binary, re-executed) serves POST /v1/ops through the idempotency
// middleware on a store and is killed with SIGKILL before the handler, in
// it before its effect, after the effect and before the answer is stored,
// after the answer is stored and before it is sent, and at random times;
// it is restarted on the same address and the same store each time. Its
// clients are resilient.NewClient() with defaults and no declaration. The
// oracle counts, per operation, the effects that exist at the end: more
// than one is a duplicate; none, or an answer naming an effect that does
// not exist, is lost. Each store's promise is then checked (Promise).
//
// The kill and restart machinery is internal/crashmatrix's: Child runs the
// server process and SIGKILLs it when it prints "at PHASE OP" (At) or after
// a random delay from its "ready" line.
//
// A test binary that runs the matrix calls Main first in its TestMain.
package servercrash

import (
	"context"
	"os"

	"github.com/resilienthttp/resilient/idempotency"
)

// Kill points of the server. The server stops at one itself (it prints "at
// PHASE OP" and waits for the parent's SIGKILL), at the K-th request that
// reaches it in its life; Random is a SIGKILL a random delay after "ready".
const (
	// BeforeHandler: the request arrived; the middleware has not run.
	BeforeHandler = "before-handler"
	// InHandler: the key is claimed, the handler runs; no effect yet.
	InHandler = "in-handler"
	// AfterEffect: the handler applied its effect and is about to answer;
	// the answer is not stored.
	AfterEffect = "after-effect"
	// AfterStored: the middleware stored the answer and is writing it; the
	// client has not read it.
	AfterStored = "after-stored"
	// Random: a SIGKILL at a random time.
	Random = "random"
)

// Phases are the kill points, Random last.
var Phases = []string{BeforeHandler, InHandler, AfterEffect, AfterStored, Random}

// Effect applies the handler's effect for operation op, named id, within
// ctx (the handler's: it carries the claim's transaction for an atomic
// store).
type Effect func(ctx context.Context, op, id string) error

// Opener opens, in the server process, the store and the effect its parent
// named with arg; close releases them.
type Opener func(arg string) (store idempotency.Store, effect Effect, close func(), err error)

// The environment of a server process.
const (
	addrEnv    = "IDEMPOTENCY_CRASH_ADDR"    // set: this process is a matrix server; its address
	argEnv     = "IDEMPOTENCY_CRASH_ARG"     // the Opener's argument
	journalEnv = "IDEMPOTENCY_CRASH_JOURNAL" // the file the server appends its events to
	lifeEnv    = "IDEMPOTENCY_CRASH_LIFE"    // the number of this life of the server
	killEnv    = "IDEMPOTENCY_CRASH_KILL"    // "PHASE:K": stop at the K-th request that reaches PHASE
	opHeader   = "X-Op"                      // the operation a request belongs to
)

// Main runs a matrix server, with the store open gives it, and exits with
// its status if this process is one; otherwise it returns. Call it first in
// TestMain.
func Main(open Opener) {
	if os.Getenv(addrEnv) != "" {
		os.Exit(serve(open))
	}
}
