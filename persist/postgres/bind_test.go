package postgres_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/postgres"
)

// payAPI is a payments API that ignores keys, behind a resilient client
// with WithStore(store): every request that reaches it is a payment.
type payAPI struct {
	srv    *httptest.Server
	is     *ignoringServer
	client *http.Client
}

func newPayAPI(t *testing.T, store persist.Store) *payAPI {
	t.Helper()
	is := &ignoringServer{}
	srv := httptest.NewServer(is)
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: resilient.NewTransport(srv.Client().Transport, resilient.WithStore(store))}
	t.Cleanup(client.CloseIdleConnections)
	return &payAPI{srv: srv, is: is, client: client}
}

// pay sends the payment of order with ctx and returns the call's error.
func (a *payAPI) pay(ctx context.Context, order string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.srv.URL+"/v1/payments",
		strings.NewReader(fmt.Sprintf(`{"order":%q}`, order)))
	if err != nil {
		return err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// recordCount returns how many records op has in s's table (0 or 1), and
// its sends column (0 without a record).
func recordCount(t *testing.T, pool *pgxpool.Pool, s *postgres.Store, op string) (n, sends int) {
	t.Helper()
	require.NoError(t, pool.QueryRow(t.Context(),
		`SELECT count(*), coalesce(max(sends), 0) FROM `+s.Table()+` WHERE operation = $1`, []byte(op)).Scan(&n, &sends))
	return n, sends
}

// TestReadmeSnippetFailurePath is the README's "Use" snippet against a
// database without the orders table: the insert fails, so does ClaimTx, the
// commit rolls back. The payment's call, bound to its claim (Bind, or a
// Store WithBoundCalls), fails before sending with ErrClaimNotCommitted:
// no payment, no record, no key minted in its place.
func TestReadmeSnippetFailurePath(t *testing.T) {
	pool := newPool(t)
	tests := []struct {
		name  string
		opts  []postgres.Option
		bind  bool // the call's context: Bind(rec), else ContextWithOperation
		bound bool // the call must fail before sending
	}{
		{"Bind", nil, true, true},
		{"Bind of the record a failed ClaimTx returned", nil, true, true},
		{"WithBoundCalls", []postgres.Option{postgres.WithBoundCalls()}, false, true},
		{"WithBoundCalls and Bind", []postgres.Option{postgres.WithBoundCalls()}, true, true},
		// Plain ContextWithOperation on a Store without the mode claims
		// the name afresh, as with a store that has no transactions.
		{"unbound", nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, pool, tt.opts...)
			api := newPayAPI(t, store)
			ctx := t.Context()
			id := "o1"
			op := "pay:" + id
			key, err := resilient.NewKey()
			require.NoError(t, err)

			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, `INSERT INTO no_such_orders (id, amount) VALUES ($1, $2)`, id, 1000)
			require.Error(t, err, "the orders table does not exist")
			rec := persist.Record{Operation: op, Key: key}
			got, _, err := store.ClaimTx(ctx, tx, rec)
			require.Error(t, err, "the transaction is aborted")
			if strings.HasPrefix(tt.name, "Bind of the record") {
				rec = got // the zero record
			}
			require.Error(t, tx.Commit(ctx), "Commit of an aborted transaction rolls back")

			callCtx := resilient.ContextWithOperation(ctx, op)
			if tt.bind {
				callCtx = postgres.Bind(ctx, rec)
			}
			err = api.pay(callCtx, id)
			n, _ := recordCount(t, pool, store, op)
			if !tt.bound {
				require.NoError(t, err)
				assert.Equal(t, []string{id}, api.is.orders(), "unbound: sent under a key the Transport minted")
				return
			}
			require.ErrorIs(t, err, postgres.ErrClaimNotCommitted)
			require.ErrorIs(t, err, resilient.ErrStore)
			var rerr *resilient.Error
			require.ErrorAs(t, err, &rerr)
			assert.False(t, rerr.Unknown, "nothing was sent")
			assert.Empty(t, api.is.orders(), "nothing was sent")
			assert.Zero(t, n, "no record")
		})
	}
}

// TestBoundCallOpenTransactionRace: the call is made while ClaimTx's
// transaction is open, then the application rolls back (in either order:
// the two race). In every run the bound call fails before sending with
// ErrClaimNotCommitted, at once (it never waits for the open transaction),
// and no record is left.
func TestBoundCallOpenTransactionRace(t *testing.T) {
	pool := newPool(t)
	for _, mode := range []struct {
		name string
		opts []postgres.Option
		bind bool
	}{
		{"Bind", nil, true},
		{"WithBoundCalls", []postgres.Option{postgres.WithBoundCalls()}, false},
	} {
		t.Run(mode.name, func(t *testing.T) {
			store := newStore(t, pool, mode.opts...)
			api := newPayAPI(t, store)
			const runs = 50
			for i := range runs {
				id := fmt.Sprintf("o%03d", i)
				op := "pay:" + id
				key, err := resilient.NewKey()
				require.NoError(t, err)
				tx, err := pool.Begin(t.Context())
				require.NoError(t, err)
				rec, claimed, err := store.ClaimTx(t.Context(), tx, persist.Record{Operation: op, Key: key})
				require.NoError(t, err)
				require.True(t, claimed)

				// A deadline far away: the call must not wait for the
				// transaction, so it never reaches it.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				callCtx := resilient.ContextWithOperation(ctx, op)
				if mode.bind {
					callCtx = postgres.Bind(ctx, rec)
				}
				var (
					wg      sync.WaitGroup
					callErr error
				)
				wg.Go(func() { callErr = api.pay(callCtx, id) })
				if i%2 == 0 {
					wg.Wait() // call first, then roll back
				}
				require.NoError(t, tx.Rollback(t.Context()))
				wg.Wait()
				cancel()
				require.ErrorIs(t, callErr, postgres.ErrClaimNotCommitted, "run %d", i)
				n, _ := recordCount(t, pool, store, op)
				assert.Zero(t, n, "run %d: a record", i)
			}
			assert.Empty(t, api.is.orders(), "a bound call whose claim did not commit was sent")
		})
	}
}

// TestBoundCallCommitted: once ClaimTx's transaction committed, the bound
// call sends the claimed key and counts one send; bound to another key
// than the record's, it is refused before sending and counts none.
func TestBoundCallCommitted(t *testing.T) {
	pool := newPool(t)
	store := newStore(t, pool, postgres.WithBoundCalls())
	var keys []string
	var mu sync.Mutex
	is := &ignoringServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		is.ServeHTTP(w, r)
	}))
	defer srv.Close()
	api := &payAPI{srv: srv, is: is, client: &http.Client{Transport: resilient.NewTransport(srv.Client().Transport, resilient.WithStore(store))}}
	defer api.client.CloseIdleConnections()

	rec, claimed, err := store.ClaimTx(t.Context(), pool, persist.Record{Operation: "pay:o1", Key: "key-o1"})
	require.NoError(t, err)
	require.True(t, claimed)
	_, sends := recordCount(t, pool, store, "pay:o1")
	assert.Zero(t, sends, "ClaimTx counts no send")

	require.NoError(t, api.pay(postgres.Bind(t.Context(), rec), "o1"))
	assert.Equal(t, []string{"key-o1"}, keys)
	_, sends = recordCount(t, pool, store, "pay:o1")
	assert.Equal(t, 1, sends)

	other := rec
	other.Key = "key-other"
	err = api.pay(postgres.Bind(t.Context(), other), "o1")
	require.ErrorIs(t, err, resilient.ErrOperationMismatch)
	assert.Equal(t, []string{"key-o1"}, keys, "nothing sent under another key")
	_, sends = recordCount(t, pool, store, "pay:o1")
	assert.Equal(t, 1, sends, "a refused call counts no send")
}

// TestAbandonedClaimCommitsNothing: a call whose Claim waits on ClaimTx's
// open transaction past its deadline fails with ErrStore, and the
// application then rolls back. The abandoned claim statement must not
// commit afterwards: no record under a minted key, no send counted.
func TestAbandonedClaimCommitsNothing(t *testing.T) {
	pool := newPool(t)
	store := newStore(t, pool)
	api := newPayAPI(t, store)
	const runs = 20
	for i := range runs {
		id := fmt.Sprintf("o%03d", i)
		op := "pay:" + id
		tx, err := pool.Begin(t.Context())
		require.NoError(t, err)
		_, _, err = store.ClaimTx(t.Context(), tx, persist.Record{Operation: op, Key: "key-" + id})
		require.NoError(t, err)

		ctx, cancel := context.WithTimeout(resilient.ContextWithOperation(context.Background(), op), 100*time.Millisecond)
		err = api.pay(ctx, id)
		cancel()
		require.ErrorIs(t, err, resilient.ErrStore, "run %d", i)
		require.NoError(t, tx.Rollback(t.Context()))
		waitNoClaimInFlight(t, pool, store)
		n, _ := recordCount(t, pool, store, op)
		assert.Zero(t, n, "run %d: the abandoned claim committed a record", i)
	}
	assert.Empty(t, api.is.orders())
}

// waitNoClaimInFlight waits until no other backend runs a statement on s's
// table: an abandoned claim has then committed or rolled back.
func waitNoClaimInFlight(t *testing.T, pool *pgxpool.Pool, s *postgres.Store) {
	t.Helper()
	for range 500 {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
WHERE pid <> pg_backend_pid() AND state <> 'idle' AND query LIKE '%' || $1 || '%'`, strings.Trim(s.Table(), `"`)).Scan(&n))
		if n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("a statement on the store's table is still running after 500 polls")
}
