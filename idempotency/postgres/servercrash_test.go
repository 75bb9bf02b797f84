package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/idempotency/internal/servercrash"
	"github.com/resilienthttp/resilient/idempotency/postgres"
)

// openCrashServer opens a matrix server's Store from "DSN|TABLE": the
// Postgres Store on TABLE, and effects that are rows of TABLE_effects,
// written in the claim's transaction.
func openCrashServer(arg string) (idempotency.Store, servercrash.Effect, func(), error) {
	dsn, table, ok := strings.Cut(arg, "|")
	if !ok {
		return nil, nil, nil, fmt.Errorf("store %q: want DSN|TABLE", arg)
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		return nil, nil, nil, err
	}
	effect := func(ctx context.Context, op, id string) error {
		tx := postgres.Tx(ctx)
		if tx == nil {
			return errors.New("no transaction")
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+table+`_effects (op, id) VALUES ($1, $2)`, op, id)
		return err
	}
	return postgres.New(pool, postgres.WithTable(table)), effect, pool.Close, nil
}

// TestServerCrashMatrix is the server crash matrix (internal/servercrash)
// on the Postgres Store, which holds both the effect (a row written in the
// claim's transaction) and the record: the server is killed before the
// handler, in it, after its effect, after the stored answer, and at random,
// and restarted on the same database. Its promise: no duplicate effect and
// nothing lost, at every kill point. IDEMPOTENCY_CRASH_KILLS sets the
// number of kills (default 10; the closing note's run used 200).
func TestServerCrashMatrix(t *testing.T) {
	pool := newPool(t, 2)
	table := newTable()
	require.NoError(t, postgres.New(pool, postgres.WithTable(table)).CreateSchema(t.Context()))
	_, err := pool.Exec(t.Context(), `CREATE TABLE `+table+`_effects (op text NOT NULL, id text PRIMARY KEY)`)
	require.NoError(t, err)
	servercrash.Run(t, servercrash.Config{
		Name: "postgres", Arg: dsn + "|" + table, Promise: servercrash.Atomic, Kills: servercrash.Kills(t, 10),
		Effects: func(t *testing.T) map[string][]string {
			rows, err := pool.Query(t.Context(), `SELECT op, id FROM `+table+`_effects`)
			require.NoError(t, err)
			out := map[string][]string{}
			var op, id string
			_, err = pgx.ForEachRow(rows, []any{&op, &id}, func() error {
				out[op] = append(out[op], id)
				return nil
			})
			require.NoError(t, err)
			return out
		},
	})
}
