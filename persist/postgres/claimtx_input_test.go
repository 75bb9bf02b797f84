package postgres_test

import (
	"database/sql"
	"net/http"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/postgres"
)

// TestClaimTxRefusesAKeyTheTransportRefuses: ClaimTx (and ClaimSQL) check
// the key as the Transport does: an invalid one is refused with
// ErrInvalidKey and nothing is written.
func TestClaimTxRefusesAKeyTheTransportRefuses(t *testing.T) {
	pool := newPool(t)
	store := newStore(t, pool)
	db := newSQLDB(t)
	for _, key := range []string{"bad key\x01", " padded", strings.Repeat("k", 300)} {
		_, _, err := store.ClaimTx(t.Context(), pool, persist.Record{Operation: "pay:o1", Key: key})
		require.ErrorIs(t, err, resilient.ErrInvalidKey, "%q", key)
		_, _, err = store.ClaimSQL(t.Context(), db, persist.Record{Operation: "pay:o1", Key: key})
		require.ErrorIs(t, err, resilient.ErrInvalidKey, "%q", key)
	}
	n, _ := recordCount(t, pool, store, "pay:o1")
	assert.Zero(t, n)
}

// TestClaimTxFingerprint: a ClaimTx that records persist.Fingerprint of the
// payment makes a bound call with another request fail before sending
// (ErrOperationMismatch, no send counted); the same request is sent.
func TestClaimTxFingerprint(t *testing.T) {
	pool := newPool(t)
	store := newStore(t, pool)
	api := newPayAPI(t, store)
	payment := func(order string) *http.Request {
		req, err := http.NewRequest(http.MethodPost, api.srv.URL+"/v1/payments", strings.NewReader(`{"order":"`+order+`"}`))
		require.NoError(t, err)
		return req
	}
	fp, err := persist.Fingerprint(payment("o1"))
	require.NoError(t, err)
	rec, _, err := store.ClaimTx(t.Context(), pool, persist.Record{Operation: "pay:o1", Key: "key-o1", Fingerprint: fp})
	require.NoError(t, err)

	err = api.pay(postgres.Bind(t.Context(), rec), "o2") // another order's body under o1's name
	require.ErrorIs(t, err, resilient.ErrOperationMismatch)
	assert.Empty(t, api.is.orders(), "refused before the first send")
	_, sends := recordCount(t, pool, store, "pay:o1")
	assert.Zero(t, sends, "a refused call counts no send")

	require.NoError(t, api.pay(postgres.Bind(t.Context(), rec), "o1"))
	assert.Equal(t, []string{"o1"}, api.is.orders())
}

// TestClaimSQL: ClaimSQL in a database/sql transaction (pgx's stdlib
// driver) commits with the application's row or not at all, and returns
// an existing record unchanged; a bound call sends its key once committed.
func TestClaimSQL(t *testing.T) {
	pool := newPool(t)
	store := newStore(t, pool)
	api := newPayAPI(t, store)
	db := newSQLDB(t)
	orders := newTable()
	_, err := db.ExecContext(t.Context(), `CREATE TABLE `+orders+` (id text PRIMARY KEY)`)
	require.NoError(t, err)

	for _, commit := range []bool{false, true} {
		tx, err := db.BeginTx(t.Context(), nil)
		require.NoError(t, err)
		_, err = tx.ExecContext(t.Context(), `INSERT INTO `+orders+` (id) VALUES ($1)`, "o1")
		require.NoError(t, err)
		rec, claimed, err := store.ClaimSQL(t.Context(), tx, persist.Record{Operation: "pay:o1", Key: "key-o1"})
		require.NoError(t, err)
		require.True(t, claimed)
		assert.Equal(t, persist.Pending, rec.State)
		if !commit {
			require.NoError(t, tx.Rollback())
			err := api.pay(postgres.Bind(t.Context(), rec), "o1")
			require.ErrorIs(t, err, postgres.ErrClaimNotCommitted)
			continue
		}
		require.NoError(t, tx.Commit())
		again, claimed, err := store.ClaimSQL(t.Context(), db, persist.Record{Operation: "pay:o1", Key: "key-other"})
		require.NoError(t, err)
		assert.False(t, claimed)
		assert.Equal(t, rec, again)
		require.NoError(t, api.pay(postgres.Bind(t.Context(), again), "o1"))
	}
	assert.Equal(t, []string{"o1"}, api.is.orders())
}

// newSQLDB returns a database/sql handle on the test server through pgx's
// stdlib driver, closed when t ends.
func newSQLDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}
