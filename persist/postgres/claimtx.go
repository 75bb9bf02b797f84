package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resilienthttp/resilient/persist"
)

// DBTX is what ClaimTx needs of the application's transaction: the executor
// shape of sqlc's generated DBTX and of River's pgx driver. A pgx.Tx
// satisfies it (so do a *pgx.Conn and a *pgxpool.Pool, which make the claim
// a transaction of its own).
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ClaimTx writes the pending record of rec.Operation in the caller's
// transaction tx, so that it commits with the application's own rows or not
// at all. It returns the record and true if it inserted it; if the operation
// already has a committed record, it returns that one, unchanged, and false.
//
// After tx commits, an HTTP call made through a resilient Transport with
// WithStore(s) and ContextWithOperation(ctx, rec.Operation) finds the record
// and sends its key. ClaimTx gives that call the operation's lease for the
// lease length (WithLease), counted from the insert; the call's Claim renews
// it. Until then nothing may have been sent, which a Resumer relies on. A
// rolled-back transaction leaves no record.
//
// rec.Fingerprint may be empty: the first Claim then stores the fingerprint
// the Transport computes. A zero rec.Created is set to the current time.
// It returns an error if ctx is done, rec has an empty Operation or Key or a
// negative Attempts, or the statement fails (which, in PostgreSQL, aborts tx).
func (s *Store) ClaimTx(ctx context.Context, tx DBTX, rec persist.Record) (persist.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return persist.Record{}, false, fmt.Errorf("persist/postgres: claim: %w", err)
	}
	if rec.Created.IsZero() {
		rec.Created = time.Now()
	}
	if err := checkCandidate(rec); err != nil {
		return persist.Record{}, false, err
	}
	op := rec.Operation
	// Exec, not a RETURNING query: the record inserted is rec itself, and
	// the command tag says whether it was.
	tag, err := tx.Exec(ctx, s.q.claimTx,
		[]byte(op), []byte(rec.Key), []byte(rec.Fingerprint), rec.Created, rec.Attempts, s.lease.Microseconds())
	if err != nil {
		return persist.Record{}, false, fmt.Errorf("persist/postgres: claim %q: %w", op, err)
	}
	if tag.RowsAffected() == 1 {
		rec.Created = rec.Created.Truncate(time.Microsecond).UTC() // as the column keeps it
		rec.State = persist.Pending
		return rec, true, nil
	}
	// The operation has a record already (ON CONFLICT DO NOTHING waited for
	// the transaction that inserted it).
	rows, err := tx.Query(ctx, s.q.read, []byte(op))
	if err != nil {
		return persist.Record{}, false, fmt.Errorf("persist/postgres: claim %q: %w", op, err)
	}
	got, err := pgx.CollectExactlyOneRow(rows, scanRecord)
	if err != nil {
		return persist.Record{}, false, fmt.Errorf("persist/postgres: claim %q: read existing record: %w", op, err)
	}
	return got, false, nil
}
