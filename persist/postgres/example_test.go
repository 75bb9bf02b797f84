package postgres_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/postgres"
)

// An order service inserts an order and claims its payment's key in one
// transaction; the process dies after the commit, before it pays. After the
// restart a Resumer finds the pending payment and sends it, with its key.
func ExampleResumer() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn) // the application's database
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	store := postgres.New(pool, postgres.WithTable("example_operations"), postgres.WithLease(time.Millisecond))
	if err := store.CreateSchema(ctx); err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE example_orders (id text PRIMARY KEY, amount integer NOT NULL)`); err != nil {
		panic(err)
	}
	defer pool.Exec(ctx, `DROP TABLE example_orders, example_operations`)

	api := fakeserver.New() // a payments API that dedupes by Idempotency-Key
	defer api.Close()
	client := resilient.NewClient(resilient.WithStore(store))
	payment := func(ctx context.Context, order string, amount int) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodPost, api.URL+"/v1/payments",
			strings.NewReader(fmt.Sprintf(`{"order":%q,"amount":%d}`, order, amount)))
	}

	// Place the order: its row and its payment's pending record commit
	// together, or neither does.
	key, _ := resilient.NewKey()
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO example_orders (id, amount) VALUES ('o1', 1000)`); err != nil {
		panic(err)
	}
	if _, _, err := store.ClaimTx(ctx, tx, persist.Record{Operation: "pay:o1", Key: key}); err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}
	// Here the service would pay: client.Do(req) with
	// resilient.ContextWithOperation(ctx, "pay:o1"). It crashes instead.
	time.Sleep(2 * time.Millisecond) // its lease expires

	// After the restart:
	r := &postgres.Resumer{
		Store:  store,
		Client: client,
		Request: func(ctx context.Context, rec persist.Record) (*http.Request, error) {
			order := strings.TrimPrefix(rec.Operation, "pay:")
			var amount int
			if err := pool.QueryRow(ctx, `SELECT amount FROM example_orders WHERE id = $1`, order).Scan(&amount); err != nil {
				return nil, err
			}
			return payment(ctx, order, amount)
		},
		Response: func(ctx context.Context, rec persist.Record, resp *http.Response) error {
			fmt.Println(rec.Operation, "answered", resp.StatusCode)
			return nil
		},
		Unknown: func(ctx context.Context, tx pgx.Tx, rec persist.Record) error {
			// Never here for this operation: it was provably not sent.
			fmt.Println(rec.Operation, "may have been paid; ask the API about key", rec.Key)
			return nil
		},
	}
	res, err := r.Resume(ctx)
	fmt.Printf("%+v %v\n", res, err)
	fmt.Println("payments:", api.TotalEffects(), "sent with the claimed key:", api.Ledger()[0].Key == key)
	// Output:
	// pay:o1 answered 201
	// {Resent:1 Unknown:0 Failed:0} <nil>
	// payments: 1 sent with the claimed key: true
}
