package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/postgres"
)

// TestUnboundCallAfterWaitedRollback pins the unbound mode's documented
// behaviour: a plain ContextWithOperation call whose Claim waits on an
// open ClaimTx transaction, which then rolls back, claims the name afresh
// under a key the Transport mints and sends, exactly as a call made after
// the rollback would. Only a bound call (Bind, WithBoundCalls) refuses a
// name its application did not commit.
func TestUnboundCallAfterWaitedRollback(t *testing.T) {
	pool := newPool(t)
	store := newStore(t, pool)
	api := newPayAPI(t, store)
	ctx := t.Context()
	id, op := "o1", "pay:o1"
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, _, err = store.ClaimTx(ctx, tx, persist.Record{Operation: op, Key: "key-o1"})
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		callCtx, cancel := context.WithTimeout(resilient.ContextWithOperation(context.Background(), op), 30*time.Second)
		defer cancel()
		done <- api.pay(callCtx, id)
	}()
	waitLockWaiter(t, store)
	require.NoError(t, tx.Rollback(ctx))
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not return")
	}
	require.NoError(t, err, "unbound: the call claims the name afresh")
	assert.Equal(t, []string{id}, api.is.orders(), "sent once")
	rec, claimed, err := store.Claim(ctx, persist.Record{Operation: op, Key: "probe"})
	require.NoError(t, err)
	assert.False(t, claimed)
	assert.NotEqual(t, "key-o1", rec.Key, "the key the Transport minted, not the rolled-back claim's")
	assert.Equal(t, persist.Done, rec.State)
}

// waitLockWaiter waits until a backend waits on a lock in a statement on
// s's table.
func waitLockWaiter(t *testing.T, s *postgres.Store) {
	t.Helper()
	pool := newPool(t)
	for range 1000 {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, strings.Trim(s.Table(), `"`)).Scan(&n))
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no claim waited on the open transaction's row after 1000 polls")
}
