// Package persist keeps the idempotency keys of pending operations in durable
// storage, so that an operation interrupted by a crash resumes with the same key.
//
// A Store maps an operation name (chosen by the application, for example
// "refund:ch_123") to a Record holding the operation's idempotency key and a
// fingerprint of its request. Claim is atomic: two goroutines, or two processes
// sharing a durable backend, that claim the same operation receive the same
// record and therefore the same key.
//
// This package holds the interface and an in-memory Store. Durable backends live
// in subpackages: persist/bolt (an embedded bbolt file, the default for
// durability) and persist/redis (a separate module, for many processes).
//
// persist does not import the resilient package; any client may use it.
package persist

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// State is the lifecycle state of an operation's record.
type State uint8

const (
	// Pending means the operation has been claimed and its outcome is not
	// known to be final: it may not have been sent, or it may have reached the
	// server without a definitive answer. A restarted process resumes it with
	// the same key.
	Pending State = iota + 1
	// Done means the operation received a definitive answer (success or a
	// terminal error). Claiming it again returns the same key, so a replay of
	// the operation is answered by the server's stored response.
	Done
)

// String returns "pending", "done" or "state(N)".
func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Done:
		return "done"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Record is what a Store keeps for one operation.
type Record struct {
	// Operation is the application's name for the logical operation.
	Operation string
	// Key is the idempotency key sent on every attempt of the operation.
	Key string
	// Fingerprint identifies the request the operation was claimed with (the
	// resilient Transport uses a hex SHA-256 of method, URL and body). A later
	// claim with another fingerprint is a different request under the same
	// name; the caller decides what to do about it.
	Fingerprint string
	// Created is when the record was first claimed.
	Created time.Time
	// State is Pending or Done.
	State State
	// Attempts is the number of attempts recorded by Finish calls.
	Attempts int
}

// Store persists operation records. Implementations are safe for concurrent use
// by multiple goroutines. Every method takes a context; a Store whose backend is
// unreachable returns an error wrapping the cause (never a zero Record with a nil
// error).
//
// A caller that gives up (its context ends while a method is in flight) gets
// an error, but the write it started may still take effect, as if the call
// had succeeded: a Claim may store its candidate — nothing else — and never
// replaces a record that a later Claim returned. Each Store documents what a
// caller that gave up may leave, and when; persisttest checks the rule.
type Store interface {
	// Claim returns the record of candidate.Operation. If none exists it stores
	// candidate (with State Pending) and returns it with claimed true; the write
	// is durable when Claim returns. If one exists it returns the stored record,
	// unchanged, with claimed false. Concurrent claims of one operation return
	// the same record to every caller, and exactly one of them sees claimed true.
	Claim(ctx context.Context, candidate Record) (rec Record, claimed bool, err error)

	// Finish records the outcome of an operation: its state (Pending when the
	// outcome is still unknown, Done when it is final) and the number of
	// attempts made so far. Done is final: Finish with Pending on a Done
	// record keeps it Done (two callers of one operation may finish it in
	// any order, and one definitive answer settles it). It returns
	// ErrNotFound if the operation has no record.
	Finish(ctx context.Context, op string, state State, attempts int) error

	// Pending lists the records in state Pending, oldest first.
	Pending(ctx context.Context) ([]Record, error)

	// Delete removes the record of op. Deleting a missing record is not an error.
	Delete(ctx context.Context, op string) error

	// Expire deletes every record created before cutoff and reports how many it
	// deleted.
	Expire(ctx context.Context, cutoff time.Time) (int, error)
}

// ErrNotFound is returned by Finish when the operation has no record.
var ErrNotFound = errors.New("persist: operation not found")
