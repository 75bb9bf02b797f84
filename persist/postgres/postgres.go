// Package postgres is a persist.Store in the application's own PostgreSQL
// database, on a pgx connection pool. It is its own Go module, so that
// importing resilient does not pull in a database driver.
//
// Beside the persist.Store methods it offers what only a store in the
// application's database can: ClaimTx writes an operation's pending record
// in the application's transaction, so that the record commits with the
// business row (an order, a refund) or not at all; and a Resumer re-drives,
// after a crash, the operations whose records are still pending.
//
// # Schema
//
// CreateSchema creates the table (default name resilient_operations, see
// WithTable) and its indexes if they do not exist:
//
//	CREATE TABLE IF NOT EXISTS resilient_operations (
//	    operation   bytea       PRIMARY KEY,  -- the application's name for the operation
//	    key         bytea       NOT NULL,     -- the idempotency key
//	    fingerprint bytea       NOT NULL,     -- the request's fingerprint ('' from a ClaimTx without one, until the first send)
//	    created     timestamptz NOT NULL,
//	    state       smallint    NOT NULL,     -- 1 pending, 2 done
//	    attempts    integer     NOT NULL,
//	    lease_until timestamptz NOT NULL,     -- until when the lease's holder may send
//	    epoch       bigint      NOT NULL,     -- the lease's generation: 1, then +1 per Resumer take
//	    sends       integer     NOT NULL,     -- sends allowed so far: 0 proves it was never sent
//	    unknown     boolean     NOT NULL,     -- handed to the application as unknown by a Resumer
//	    tries       integer     NOT NULL DEFAULT 0 -- Resumes that took the record and could not finish it
//	);
//	ALTER TABLE resilient_operations ADD COLUMN IF NOT EXISTS tries integer NOT NULL DEFAULT 0; -- a table made before it
//	CREATE INDEX IF NOT EXISTS resilient_operations_pending ON resilient_operations (created, operation) WHERE state = 1;
//
// The claim rests on the primary key: a claim inserts the record and, on
// conflict, reads the one that exists. Names, keys and fingerprints are
// bytea, so that any Go string (NUL bytes included) is kept as is. Created
// is kept with microsecond precision and returned in UTC. Stores with
// different tables are independent (as Redis stores with different
// prefixes are).
//
// # Leases
//
// Each record holds a lease: until lease_until, only its holder may send
// the operation. ClaimTx gives the lease (generation 1) to the code that
// committed the transaction; Claim — what the resilient Transport calls
// before its first attempt — renews it for as long as the call may last (the
// context's deadline, or the lease length, WithLease) and counts the send.
// A Resumer takes a record only once its lease has expired, making a new
// generation; from then on a Claim by the previous holder fails with an
// error wrapping ErrLeaseLost, and nothing is sent. So the inline call and
// the Resumer never both send. An inline call must end within its lease:
// give its context a deadline, or make the lease longer than the Transport's
// retries may take.
//
// The sends column records whether a record may have been sent. It is
// one-sided: it may count a send that never happened (a Claim whose commit
// succeeded but whose acknowledgement was lost, or whose call then failed
// before sending), never miss one, because a Claim commits its count
// before the Transport sends. So sends = 0 proves the request never left.
// Against a server that ignores idempotency keys, a Resumer re-sends only
// such records, and hands the others to the application as unknown, with
// their key (see Resumer).
//
// # Bound calls
//
// A call meant to carry a ClaimTx claim should be bound to it (Bind, or
// WithBoundCalls for every call through the Store): its Claim never
// inserts a record, so if the claim did not commit (the application's
// transaction failed, rolled back, or has not committed yet) the call
// fails before sending, with ErrClaimNotCommitted, instead of sending
// under a key the Transport minted. It fails at once rather than wait for
// the transaction; see Bind for why.
//
// # What a caller that gave up leaves
//
// Claim runs in a transaction of its own, with a lock_timeout from the
// context's deadline, and sends COMMIT only while the context is live: a
// claim the caller gave up on (its statement still waiting in the server
// when the caller's deadline passed) rolls back when the server finds the
// connection closed. Only a COMMIT already sent may complete after the
// caller left; it counts a send (one-sided, as above). Finish, Delete and
// Expire are single statements: one the caller gave up on may still
// complete, which changes nothing a later call relies on (Done is final, a
// stale Pending is refused, see Finish).
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

// ErrLeaseLost is wrapped by the error Claim returns when a Resumer has taken
// the operation's lease from the caller: the Resumer drives the operation
// now, and the caller must not send it.
var ErrLeaseLost = errors.New("persist/postgres: the operation's lease was taken by a resumer")

// Store is a persist.Store in a PostgreSQL table. New returns one. A Store is
// safe for concurrent use by multiple goroutines, and any number of Stores,
// in any number of processes, may share one table.
type Store struct {
	pool  *pgxpool.Pool
	table string // quoted identifier
	lease time.Duration
	bound bool // WithBoundCalls
	q     queries
}

var _ persist.Store = (*Store)(nil)

// New returns a Store that keeps its records in a table of the database pool
// connects to. The Store does not own pool: closing it is the caller's job,
// after the last call. The table must exist: see CreateSchema.
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	o := options{table: []string{DefaultTable}, lease: DefaultLease}
	for _, opt := range opts {
		opt(&o)
	}
	if len(o.table) == 0 {
		o.table = []string{DefaultTable}
	}
	table := pgx.Identifier(o.table).Sanitize()
	return &Store{pool: pool, table: table, lease: max(o.lease, time.Microsecond), bound: o.bound, q: newQueries(table)}
}

// CreateSchema creates the Store's table and its indexes, if they do not
// exist, in one transaction. The SQL is in the package documentation.
func (s *Store) CreateSchema(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("persist/postgres: create schema: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit, a no-op
	for _, stmt := range s.q.schema {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("persist/postgres: create schema: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("persist/postgres: create schema: %w", err)
	}
	return nil
}

// Finish sets the state and attempt count of op's record. A Done state is
// always recorded. A Pending state is recorded only by the holder of the
// record's current lease generation: an earlier holder's late Finish cannot
// make pending again what a Resumer finished. It returns an error wrapping
// persist.ErrNotFound if op has no record, and an error if ctx is done, state
// is neither Pending nor Done, attempts is negative, or the database fails.
func (s *Store) Finish(ctx context.Context, op string, state persist.State, attempts int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("persist/postgres: finish: %w", err)
	}
	if state != persist.Pending && state != persist.Done {
		return fmt.Errorf("persist/postgres: finish %q: invalid state %v", op, state)
	}
	if attempts < 0 {
		return fmt.Errorf("persist/postgres: finish %q: negative attempts %d", op, attempts)
	}
	tag, err := s.pool.Exec(ctx, s.q.finish, []byte(op), int16(state), attempts, leaseFromContext(ctx))
	if err != nil {
		return fmt.Errorf("persist/postgres: finish %q: %w", op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("persist/postgres: finish %q: %w", op, persist.ErrNotFound)
	}
	return nil
}

// Pending returns the records in state Pending, oldest Created first (ties in
// operation name order, bytewise). It returns an error if ctx is done or the
// database fails.
func (s *Store) Pending(ctx context.Context) ([]persist.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("persist/postgres: pending: %w", err)
	}
	rows, err := s.pool.Query(ctx, s.q.pending)
	if err != nil {
		return nil, fmt.Errorf("persist/postgres: pending: %w", err)
	}
	recs, err := pgx.CollectRows(rows, scanRecord)
	if err != nil {
		return nil, fmt.Errorf("persist/postgres: pending: %w", err)
	}
	return recs, nil
}

// Delete removes op's record, if any. It returns an error if ctx is done or
// the database fails.
func (s *Store) Delete(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("persist/postgres: delete: %w", err)
	}
	if _, err := s.pool.Exec(ctx, s.q.delete, []byte(op)); err != nil {
		return fmt.Errorf("persist/postgres: delete %q: %w", op, err)
	}
	return nil
}

// Expire deletes every record whose Created is before cutoff, in any state,
// in one statement, and returns how many it deleted. No index covers
// created over all records (one would cost every claim an index insert), so
// it scans the table: run it from time to time, not per request. It returns an error if
// ctx is done or the database fails.
func (s *Store) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("persist/postgres: expire: %w", err)
	}
	// Created < cutoff <=> Created < cutoff rounded up to the microsecond
	// (Created has microseconds; the database would truncate cutoff).
	if t := cutoff.Truncate(time.Microsecond); !t.Equal(cutoff) {
		cutoff = t.Add(time.Microsecond)
	}
	tag, err := s.pool.Exec(ctx, s.q.expire, cutoff)
	if err != nil {
		return 0, fmt.Errorf("persist/postgres: expire: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// checkCandidate reports why candidate cannot be claimed, or nil.
func checkCandidate(c persist.Record) error {
	switch {
	case c.Operation == "":
		return errors.New("persist/postgres: claim: empty operation name")
	case c.Key == "":
		return fmt.Errorf("persist/postgres: claim %q: empty key", c.Operation)
	case c.Attempts < 0:
		return fmt.Errorf("persist/postgres: claim %q: negative attempts %d", c.Operation, c.Attempts)
	}
	return nil
}

// Table returns the Store's table name as an SQL identifier, quoted, for the
// application's own queries (a join of its rows with their operations).
func (s *Store) Table() string { return s.table }
