package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resilienthttp/resilient/persist"
)

// Claim returns the record of candidate.Operation, creating it with State
// Pending if there is none; the write is committed (and durable as far as the
// server's synchronous_commit makes it) when Claim returns.
//
// Claim is the call before a send. For a new record it takes the lease
// itself. For an existing record of the caller's lease generation (see the
// package documentation) it renews the lease until the context's deadline or
// for the lease length, whichever is later, counts the send, and, if the
// record was claimed with ClaimTx without a fingerprint, stores
// candidate.Fingerprint as the record's. For a record whose lease a Resumer
// took, it returns an error wrapping ErrLeaseLost and changes nothing. For
// a record with another fingerprint, it returns the record unchanged, with
// no send counted (the Transport then refuses the call).
//
// An unbound call creates the record of a name nobody committed, even if
// its Claim first waited on a transaction that inserted the name and then
// rolled back: it is the same call as one made a moment after the rollback,
// which claims afresh too. Bind refuses both.
//
// A bound call (Bind, or every call with WithBoundCalls) never creates a
// record: if none is committed, Claim returns an error wrapping
// ErrClaimNotCommitted, at once, without waiting for a transaction that
// may be inserting one. Bound to a key, it counts no send for a record
// holding another key, and returns the record (the Transport refuses the
// call).
//
// Claim runs in a transaction of its own whose lock waits end at the
// context's deadline (lock_timeout; the lease length without a deadline),
// and commits it only if the context is still live once the record is
// written: a claim the caller gave up on commits nothing (but a commit
// whose acknowledgement is lost, a send counted for a call that then
// failed, is possible: the sends count may be too high, never too low).
//
// A zero candidate.Created is set to the current time; Created is truncated
// to the microsecond. It returns an error if ctx is done, candidate has an
// empty Operation or Key or a negative Attempts, or the database fails.
func (s *Store) Claim(ctx context.Context, candidate persist.Record) (persist.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return persist.Record{}, false, fmt.Errorf("persist/postgres: claim: %w", err)
	}
	if candidate.Created.IsZero() {
		candidate.Created = time.Now()
	}
	if err := checkCandidate(candidate); err != nil {
		return persist.Record{}, false, err
	}
	op := candidate.Operation
	rec, inserted, err := s.claim(ctx, candidate)
	if err != nil {
		return persist.Record{}, false, fmt.Errorf("persist/postgres: claim %q: %w", op, err)
	}
	return rec, inserted, nil
}

// claim runs Claim's transaction on a connection of its own: BEGIN, the
// lock timeout and the claim statement in one round trip, then COMMIT if
// ctx is still live. A connection left inside the transaction (ctx ended,
// an error) is closed by the pool on release, which rolls it back.
func (s *Store) claim(ctx context.Context, c persist.Record) (persist.Record, bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return persist.Record{}, false, err
	}
	defer conn.Release()
	b, bound := boundFromContext(ctx)
	if b.none {
		return persist.Record{}, false, ErrClaimNotCommitted
	}
	bound = bound || s.bound
	gen := leaseFromContext(ctx)
	lease := s.leaseFor(ctx).Microseconds()
	op := []byte(c.Operation)
	var bq pgx.Batch
	bq.Queue("BEGIN")
	bq.Queue("SELECT set_config('lock_timeout', $1, true)", lockTimeout(ctx, s.lease))
	if bound {
		bq.Queue(s.q.claimBound, op, []byte(b.key), []byte(c.Fingerprint), lease, gen)
	} else {
		bq.Queue(s.q.claim, op, []byte(c.Key), []byte(c.Fingerprint), c.Created, c.Attempts, lease, gen)
	}
	rec, inserted, err := runClaim(ctx, conn.SendBatch(ctx, &bq), c.Operation)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.refused(ctx, conn, c.Operation, gen)
	}
	if err != nil {
		return persist.Record{}, false, err
	}
	// The record is written, not committed: commit only for a caller that
	// still wants it. A caller gone now leaves nothing (the pool closes
	// the connection inside the transaction).
	if err := ctx.Err(); err != nil {
		return persist.Record{}, false, err
	}
	tag, err := conn.Exec(ctx, "COMMIT")
	if err != nil {
		return persist.Record{}, false, fmt.Errorf("commit: %w", err)
	}
	if tag.String() != "COMMIT" {
		return persist.Record{}, false, fmt.Errorf("commit: the transaction ended with %q", tag.String())
	}
	return rec, inserted, nil
}

// runClaim reads the replies of Claim's batch: BEGIN, the lock timeout,
// then the claim's row (pgx.ErrNoRows for none).
func runClaim(ctx context.Context, br pgx.BatchResults, op string) (persist.Record, bool, error) {
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	var (
		rec      persist.Record
		inserted bool
	)
	if err == nil {
		rec, inserted, err = scanClaim(op, br.QueryRow())
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return rec, inserted, err
}

// refused says why the claim statement returned no row, inside its
// transaction, which it then rolls back: no record (a bound call's claim
// not committed), another lease generation (ErrLeaseLost), or another
// request or key under the operation (the record, returned unchanged).
func (s *Store) refused(ctx context.Context, conn *pgxpool.Conn, op string, gen int64) (persist.Record, bool, error) {
	var (
		name, key, fp []byte
		created       time.Time
		state         int16
		attempts      int32
		epoch         int64
	)
	err := conn.QueryRow(ctx, s.q.claimRead, []byte(op)).Scan(&name, &key, &fp, &created, &state, &attempts, &epoch)
	if err == nil || errors.Is(err, pgx.ErrNoRows) {
		// Nothing was written: the rollback cannot lose anything, and a
		// failed one leaves the pool to close the connection.
		_, _ = conn.Exec(ctx, "ROLLBACK")
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return persist.Record{}, false, ErrClaimNotCommitted
	case err != nil:
		return persist.Record{}, false, err
	case epoch != gen:
		return persist.Record{}, false, ErrLeaseLost
	}
	return persist.Record{Operation: op, Key: string(key), Fingerprint: string(fp),
		Created: created.UTC(), State: persist.State(state), Attempts: int(attempts)}, false, nil
}

// lockTimeout is the lock_timeout of a claim made with ctx: the time left
// until its deadline, else lease, in whole milliseconds, at least one (zero
// would mean no timeout).
func lockTimeout(ctx context.Context, lease time.Duration) string {
	d := lease
	if deadline, ok := ctx.Deadline(); ok {
		d = time.Until(deadline)
	}
	ms := max((d+time.Millisecond-1)/time.Millisecond, 1)
	return fmt.Sprintf("%dms", ms)
}

// leaseFor returns how long a Claim made with ctx holds the lease: until
// ctx's deadline (plus a margin for clock skew) or for the lease length,
// whichever is longer.
func (s *Store) leaseFor(ctx context.Context) time.Duration {
	d := s.lease
	if deadline, ok := ctx.Deadline(); ok {
		d = max(d, time.Until(deadline)+deadlineMargin)
	}
	return d
}

// deadlineMargin is added to a context's deadline when it sets a lease: the
// Transport returns by the deadline, and the lease is measured on the
// database's clock, not the caller's.
const deadlineMargin = 5 * time.Second
