package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/postgres"
)

// TestInlineCallAndResumerRace keeps the inline call and a Resumer both alive
// on each operation, against an API that ignores keys (a second send would be
// a second payment): ClaimTx's lease has expired by the time either starts,
// so the Resumer may take it, and the inline call, whose context has a
// deadline, holds it once its Claim is made. Exactly one of them sends: the
// other is refused (ErrLeaseLost) or finds the lease held.
func TestInlineCallAndResumerRace(t *testing.T) {
	pool := newPool(t)
	store := newStore(t, pool, postgres.WithLease(time.Microsecond))
	is := &ignoringServer{}
	srv := httptest.NewServer(is)
	defer srv.Close()
	client := &http.Client{Transport: resilient.NewTransport(srv.Client().Transport,
		resilient.WithStore(store))}
	defer client.CloseIdleConnections()
	request := func(ctx context.Context, order string) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/payments",
			strings.NewReader(fmt.Sprintf(`{"order":%q}`, order)))
	}
	resumer := &postgres.Resumer{Store: store, Client: client,
		Request: func(ctx context.Context, rec persist.Record) (*http.Request, error) {
			return request(ctx, strings.TrimPrefix(rec.Operation, "pay:"))
		},
		Unknown: func(ctx context.Context, tx pgx.Tx, rec persist.Record) error {
			return fmt.Errorf("operation %s handed over: the inline call's lease should have kept the resumer away", rec.Operation)
		},
	}

	const rounds = 30
	inlineWon, resumerWon := 0, 0
	for i := range rounds {
		order := fmt.Sprintf("race%03d", i)
		op := "pay:" + order
		_, claimed, err := store.ClaimTx(t.Context(), pool, persist.Record{Operation: op, Key: "key-" + order})
		require.NoError(t, err)
		require.True(t, claimed)

		var (
			wg        sync.WaitGroup
			inlineErr error
			res       postgres.Result
			resumeErr error
		)
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			ctx, cancel := context.WithTimeout(resilient.ContextWithOperation(context.Background(), op), 30*time.Second)
			defer cancel()
			req, err := request(ctx, order)
			if err != nil {
				inlineErr = err
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				inlineErr = err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
		wg.Go(func() {
			<-start
			res, resumeErr = resumer.Resume(context.Background())
		})
		close(start)
		wg.Wait()
		if resumeErr != nil {
			// The Resumer took the lease and its re-send's Claim then waited
			// on the row the inline call's Claim held longer than its
			// lock_timeout (the 1 µs lease, rounded up to 1 ms, as its
			// context has no deadline): a transient failure, nothing sent,
			// the record left pending. Seen under load. The next Resume
			// sends it if the inline call did not (ErrLeaseLost).
			var pgErr *pgconn.PgError
			require.ErrorAs(t, resumeErr, &pgErr, "round %d", i)
			require.Equal(t, "55P03", pgErr.Code, "round %d: %v", i, resumeErr)
			require.Zero(t, res.Resent, "round %d", i)
			res, resumeErr = resumer.Resume(context.Background())
			require.NoError(t, resumeErr, "round %d: the next Resume", i)
		}
		switch {
		case inlineErr == nil:
			inlineWon++
			assert.Zero(t, res.Resent, "round %d: both sent", i)
		case errors.Is(inlineErr, postgres.ErrLeaseLost):
			resumerWon++
			assert.Equal(t, 1, res.Resent, "round %d: the resumer took the lease and sent", i)
		default:
			t.Fatalf("round %d: inline call: %v", i, inlineErr)
		}
	}
	t.Logf("inline call sent %d, resumer sent %d", inlineWon, resumerWon)
	effects := map[string]int{}
	for _, o := range is.orders() {
		effects[o]++
	}
	require.Len(t, effects, rounds)
	for o, n := range effects {
		assert.Equal(t, 1, n, "order %s: payments", o)
	}
	pending, err := store.Pending(t.Context())
	require.NoError(t, err)
	assert.Empty(t, pending)
}
