package postgres_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/idempotency/internal/v1fixture"
	"github.com/resilienthttp/resilient/idempotency/postgres"
)

// v1Row is a row of the Store's table as internal/v1fixture/postgres.json
// keeps it.
type v1Row struct {
	Scope, Fingerprint, Header, Body []byte
	Route, Key                       string
	Status                           int
	Created, Expires                 time.Time
}

// TestV1Records: rows written by scope and fingerprint version 1
// (e10c1d1), loaded with their expiry moved an hour ahead, are honoured by
// the current middleware and Inbox, through pgx and database/sql.
func TestV1Records(t *testing.T) {
	raw, err := os.ReadFile("../internal/v1fixture/postgres.json")
	require.NoError(t, err)
	var rows []v1Row
	require.NoError(t, json.Unmarshal(raw, &rows))
	require.Len(t, rows, 4)
	pool := newPool(t, 4)
	stores := map[string]func(table string) *postgres.Store{
		"pgx": func(table string) *postgres.Store { return postgres.New(pool, postgres.WithTable(table)) },
		"sql": func(table string) *postgres.Store {
			db := stdlib.OpenDBFromPool(pool)
			t.Cleanup(func() { _ = db.Close() })
			return postgres.NewSQL(db, postgres.WithTable(table))
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			table := newTable()
			store := open(table)
			require.NoError(t, store.CreateSchema(ctx))
			for _, r := range rows {
				_, err := pool.Exec(ctx, `INSERT INTO `+store.Table()+` (scope, route, idem_key, fingerprint, status, header, body, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, r.Scope, r.Route, r.Key, r.Fingerprint, r.Status, r.Header, r.Body, r.Created, time.Now().Add(time.Hour))
				require.NoError(t, err)
			}
			var _ idempotency.Store = store
			v1fixture.Check(t, store)
		})
	}
}
