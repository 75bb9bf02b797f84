package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resilienthttp/resilient/persist"
)

// BatchTX is what ClaimBatch needs of the application's transaction: a
// pgx.Tx satisfies it (so does sqlc's pgx DBTX with batches).
type BatchTX interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// ClaimBatch is ClaimTx sent with the application's own statements in one
// round trip: it queues the claim after the statements already in batch,
// sends batch in tx and runs the callbacks of the queued statements
// (pgx.QueuedQuery's Exec, Query or QueryRow) in order. Everything ClaimTx
// says holds; the claim costs no round trip of its own.
//
// If rec is invalid it returns the error ClaimTx would and sends nothing,
// not even the application's statements. If a statement of batch fails, it
// returns that error and the claim is not made (in PostgreSQL a failed
// statement aborts tx). If a callback fails, it returns that error, but
// every statement ran, the claim included: roll tx back on any error (a
// commit keeps the claim with the application's rows, as ClaimTx would).
func (s *Store) ClaimBatch(ctx context.Context, tx BatchTX, batch *pgx.Batch, rec persist.Record) (persist.Record, bool, error) {
	return s.claimTx(ctx, rec, func(args ...any) (int64, error) {
		var n int64
		batch.Queue(s.q.claimTx, args...).Exec(func(tag pgconn.CommandTag) error {
			n = tag.RowsAffected()
			return nil
		})
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return 0, fmt.Errorf("batch: %w", err)
		}
		return n, nil
	}, func(op []byte) (persist.Record, error) {
		rows, err := tx.Query(ctx, s.q.read, op)
		if err != nil {
			return persist.Record{}, err
		}
		return pgx.CollectExactlyOneRow(rows, scanRecord)
	})
}
