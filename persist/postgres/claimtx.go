package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist"
)

// DBTX is what ClaimTx needs of the application's transaction: the executor
// shape of sqlc's generated DBTX (for pgx) and of River's pgx driver. A
// pgx.Tx satisfies it (so do a *pgx.Conn and a *pgxpool.Pool, which make
// the claim a transaction of its own).
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// SQLTX is what ClaimSQL needs of the application's database/sql
// transaction: a *sql.Tx satisfies it (so do a *sql.DB and a *sql.Conn,
// which make the claim a transaction of its own). The database must be
// PostgreSQL through pgx's database/sql driver (github.com/jackc/pgx/v5/stdlib).
type SQLTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ClaimTx writes the pending record of rec.Operation in the caller's
// transaction tx, so that it commits with the application's own rows or not
// at all. It returns the record and true if it inserted it; if the operation
// already has a committed record, it returns that one, unchanged, and false.
//
// After tx commits, an HTTP call made through a resilient Transport with
// WithStore(s) and Bind(ctx, rec) — the record ClaimTx returned — sends its
// key; before the commit, or if tx rolled back, that call fails before
// sending (see Bind). ClaimTx gives the call the operation's lease for the
// lease length (WithLease), counted from the insert; the call's Claim renews
// it. Until then nothing may have been sent, which a Resumer relies on. A
// rolled-back transaction leaves no record.
//
// rec.Key must be a key the Transport sends (resilient.ValidateKey); else
// ClaimTx returns an error wrapping resilient.ErrInvalidKey and writes
// nothing. rec.Fingerprint should be persist.Fingerprint of the request the
// call will send: a call with another request is then refused before
// sending (resilient.ErrOperationMismatch). Left empty, the first Claim
// stores the fingerprint the Transport computes. A zero rec.Created is set
// to the current time. It returns an error if ctx is done, rec has an empty
// Operation or an invalid Key or a negative Attempts, or the statement fails
// (which, in PostgreSQL, aborts tx).
func (s *Store) ClaimTx(ctx context.Context, tx DBTX, rec persist.Record) (persist.Record, bool, error) {
	return s.claimTx(ctx, rec, func(args ...any) (int64, error) {
		tag, err := tx.Exec(ctx, s.q.claimTx, args...)
		return tag.RowsAffected(), err
	}, func(op []byte) (persist.Record, error) {
		rows, err := tx.Query(ctx, s.q.read, op)
		if err != nil {
			return persist.Record{}, err
		}
		return pgx.CollectExactlyOneRow(rows, scanRecord)
	})
}

// ClaimSQL is ClaimTx for a database/sql transaction (sqlc's database/sql
// code, or any *sql.Tx of pgx's stdlib driver). Everything ClaimTx says
// holds.
func (s *Store) ClaimSQL(ctx context.Context, tx SQLTX, rec persist.Record) (persist.Record, bool, error) {
	return s.claimTx(ctx, rec, func(args ...any) (int64, error) {
		res, err := tx.ExecContext(ctx, s.q.claimTx, args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}, func(op []byte) (persist.Record, error) {
		var (
			name, key, fp []byte
			created       time.Time
			state         int16
			attempts      int32
		)
		if err := tx.QueryRowContext(ctx, s.q.read, op).Scan(&name, &key, &fp, &created, &state, &attempts); err != nil {
			return persist.Record{}, err
		}
		return persist.Record{Operation: string(name), Key: string(key), Fingerprint: string(fp),
			Created: created.UTC(), State: persist.State(state), Attempts: int(attempts)}, nil
	})
}

// claimTx is ClaimTx over an executor: insert runs the claim's insert with
// args and returns the rows it inserted; read returns the record of an
// operation.
func (s *Store) claimTx(ctx context.Context, rec persist.Record, insert func(args ...any) (int64, error), read func(op []byte) (persist.Record, error)) (persist.Record, bool, error) {
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
	if err := resilient.ValidateKey(rec.Key); err != nil {
		return persist.Record{}, false, fmt.Errorf("persist/postgres: claim %q: %w", op, err)
	}
	// An insert without RETURNING: the record inserted is rec itself, and
	// the count says whether it was.
	n, err := insert([]byte(op), []byte(rec.Key), []byte(rec.Fingerprint), rec.Created, rec.Attempts, s.lease.Microseconds())
	if err != nil {
		return persist.Record{}, false, fmt.Errorf("persist/postgres: claim %q: %w", op, err)
	}
	if n == 1 {
		rec.Created = rec.Created.Truncate(time.Microsecond).UTC() // as the column keeps it
		rec.State = persist.Pending
		return rec, true, nil
	}
	// The operation has a record already (ON CONFLICT DO NOTHING waited for
	// the transaction that inserted it).
	got, err := read([]byte(op))
	if err != nil {
		return persist.Record{}, false, fmt.Errorf("persist/postgres: claim %q: read existing record: %w", op, err)
	}
	return got, false, nil
}
