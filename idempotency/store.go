package idempotency

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"time"
)

// Scope names one idempotency record: what was asked (method and route
// template) and the key. Two routes may use one key independently. The
// middleware sets no Principal: the record keeps who asked, so that a
// retry with a rotated credential finds it. A Principal names the scopes
// of records stored before that (scope version 1).
type Scope struct {
	Principal string // hex SHA-256 of the principal (scope version 1); "" in version 2
	Route     string // method and route template: "POST /payments"
	Key       string // the idempotency key, at most MaxKeyLength bytes
}

// Hash returns SHA-256 over the scope's parts, each followed by a NUL byte:
// a fixed-size name for stores that index by it.
func (s Scope) Hash() [sha256.Size]byte {
	b := make([]byte, 0, len(s.Principal)+len(s.Route)+len(s.Key)+3)
	b = append(append(b, s.Principal...), 0)
	b = append(append(b, s.Route...), 0)
	b = append(append(b, s.Key...), 0)
	return sha256.Sum256(b)
}

// Fingerprint identifies a request's payload: SHA-256 of what
// Config.Fingerprint returns. The same key with another fingerprint is a
// mismatch.
type Fingerprint [sha256.Size]byte

// Response is a stored answer: what a record replays. Stores keep it as
// given and never modify it.
type Response struct {
	Status int
	Header http.Header // the allow-listed headers (Config.Headers); the middleware adds Idempotency-Principal, never sent
	Body   []byte
}

// State is what Store.Begin found for a scope.
type State uint8

// The states Begin reports.
const (
	// Claimed: the caller owns the scope; it runs the operation, then
	// calls Claim.Complete or Claim.Release.
	Claimed State = iota + 1
	// Replay: the scope holds a stored answer with the same fingerprint.
	Replay
	// Busy: another request holds the scope and has not finished.
	Busy
	// Mismatch: the scope holds a stored answer with another fingerprint.
	Mismatch
)

// Begun is the result of Store.Begin.
type Begun struct {
	State    State
	Claim    Claim     // set when State is Claimed
	Response *Response // set when State is Replay
	// Expired is true when an expired record of the scope was found and
	// ignored (and, for State Claimed, is being replaced).
	Expired bool
}

// Store keeps idempotency records. Implementations are safe for
// concurrent use by multiple goroutines and take ctx on every call.
type Store interface {
	// Begin looks up s at time now and, when it holds no live record,
	// claims it atomically: of concurrent Begins with one scope, at most
	// one gets Claimed while the claim lasts. lease is when the claim may
	// be taken over if it was neither completed, released nor renewed
	// (Renewer) by then.
	Begin(ctx context.Context, s Scope, fp Fingerprint, now, lease time.Time) (Begun, error)
	// Atomic reports whether a claim shares one transaction with the
	// operation's effects, so that releasing it undoes them.
	Atomic() bool
	// Sweep deletes the records that expired before now and returns
	// how many it deleted.
	Sweep(ctx context.Context, now time.Time) (int, error)
}

// Claim is the right to run one scope's operation once. Exactly one of
// Complete and Release must be called; later calls return ErrClaimEnded.
// A claim that is also a Renewer is kept while its operation runs.
type Claim interface {
	// Context returns ctx carrying what the operation needs of the store
	// (the Postgres transaction); it returns ctx itself when nothing.
	Context(ctx context.Context) context.Context
	// Complete stores resp as the scope's answer until expires and ends
	// the claim (committing the transaction of an atomic store).
	Complete(ctx context.Context, resp *Response, expires time.Time) error
	// Release ends the claim without storing anything (rolling back the
	// transaction of an atomic store): the next request runs again.
	Release(ctx context.Context) error
}

// Renewer is a Claim that can be kept past its lease. While the
// operation runs, its owner calls Renew from another goroutine, so that
// the claim passes on only when its owner stopped renewing it. Every
// store of this module and its sub-modules makes Renewers. A claim that
// is not one passes on at its lease even while its owner lives: the
// middleware and Inbox log that once (event no_renewal).
type Renewer interface {
	// Renew moves the claim's lease to lease, a time on the records' clock.
	// It returns ErrClaimEnded if the claim ended or was taken over. It
	// may be called while the operation uses the claim's context.
	Renew(ctx context.Context, lease time.Time) error
}

// Errors of stores and of Inbox.Do.
var (
	// ErrClaimEnded: Complete or Release was called on a claim that had
	// already ended, or whose lease was taken over.
	ErrClaimEnded = errors.New("idempotency: claim already ended or taken over")
	// ErrInProgress: another run of the key has not finished.
	ErrInProgress = errors.New("idempotency: a run with this key is in progress")
	// ErrMismatch: the key was used with another payload.
	ErrMismatch = errors.New("idempotency: key already used with another payload")
)
