package postgres_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/postgres"
)

// TestClaimBatch: the claim goes in the application's batch and commits or
// rolls back with the application's row; an existing record is returned
// unchanged; a failing statement aborts the transaction, so no record; an
// invalid key sends nothing at all; a failing callback is reported and the
// record still shares the row's fate.
func TestClaimBatch(t *testing.T) {
	pool := newPool(t)
	var _ postgres.BatchTX = pgx.Tx(nil)
	errCallback := errors.New("callback failed")
	tests := []struct {
		name     string
		existing bool   // the operation was claimed before, under "key-old"
		insert   string // the application's statement
		callback error  // its callback's error
		key      string
		rollback bool
		wantErr  error // nil: no error; errAny: some error
		wantRec  bool  // a record of the operation after the transaction
		wantRow  bool  // the application's row after the transaction
	}{
		{name: "claimed and committed", insert: "orders", key: "key-new", wantRec: true, wantRow: true},
		{name: "rolled back", insert: "orders", key: "key-new", rollback: true},
		{name: "existing record", existing: true, insert: "orders", key: "key-new", wantRec: true, wantRow: true},
		{name: "the application's statement fails", insert: "no_such_orders", key: "key-new", wantErr: errAny},
		{name: "its callback fails, rolled back", insert: "orders", callback: errCallback, key: "key-new", rollback: true, wantErr: errCallback},
		// A callback's error is the application's: every statement ran,
		// so a commit despite it keeps the row and the claim together.
		{name: "its callback fails, committed anyway", insert: "orders", callback: errCallback, key: "key-new", wantErr: errCallback, wantRec: true, wantRow: true},
		{name: "invalid key: nothing sent", insert: "orders", key: "bad key\x01", wantErr: resilient.ErrInvalidKey},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			store := newStore(t, pool)
			orders := fmt.Sprintf("orders_batch_%d_%d", i, tables.Add(1))
			_, err := pool.Exec(ctx, `CREATE TABLE `+orders+` (id text PRIMARY KEY, amount integer NOT NULL)`)
			require.NoError(t, err)
			t.Cleanup(func() { _, _ = pool.Exec(t.Context(), `DROP TABLE `+orders) })
			op := "pay:o1"
			if tt.existing {
				_, claimed, err := store.ClaimTx(ctx, pool, persist.Record{Operation: op, Key: "key-old"})
				require.NoError(t, err)
				require.True(t, claimed)
			}
			table := orders
			if tt.insert != "orders" {
				table = tt.insert
			}

			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			var batch pgx.Batch
			var inserted int64
			batch.Queue(`INSERT INTO `+table+` (id, amount) VALUES ($1, $2)`, "o1", 1000).Exec(func(tag pgconn.CommandTag) error {
				inserted = tag.RowsAffected()
				return tt.callback
			})
			rec, claimed, err := store.ClaimBatch(ctx, tx, &batch, persist.Record{Operation: op, Key: tt.key})
			switch {
			case tt.wantErr == errAny:
				require.Error(t, err)
			case tt.wantErr != nil:
				require.ErrorIs(t, err, tt.wantErr)
			default:
				require.NoError(t, err)
				assert.EqualValues(t, 1, inserted, "the application's callback ran")
				assert.Equal(t, !tt.existing, claimed)
				if tt.existing {
					assert.Equal(t, "key-old", rec.Key, "the existing record, unchanged")
				} else {
					assert.Equal(t, tt.key, rec.Key)
					assert.Equal(t, persist.Pending, rec.State)
				}
			}
			if tt.rollback {
				require.NoError(t, tx.Rollback(ctx))
			} else if err := tx.Commit(ctx); tt.wantErr != errAny {
				require.NoError(t, err, "nothing failed in the transaction")
			}

			n, sends := recordCount(t, pool, store, op)
			assert.Equal(t, tt.wantRec, n == 1, "record after the transaction")
			assert.Zero(t, sends, "ClaimBatch counts no send")
			var rows int
			if tt.insert == "orders" {
				require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+orders).Scan(&rows))
			}
			assert.Equal(t, tt.wantRow, rows == 1, "the application's row after the transaction")
		})
	}
}

// errAny stands for any error in a table of cases.
var errAny = errors.New("any error")
